"""Δ_E−S and the interference gaps (paper §5.2, Table 3) on hand-worked scores."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval import metrics as M
from madbench_common.benchmarks.madbench.eval.analysis import component_records, summary_records
from madbench_common.benchmarks.madbench.eval.fit import GroupScores

PROTOCOLS = ("balanced", "scene_matched", "scene_mismatched")
# Per protocol, scores for rows R, S, E, Q of clip a then clip b.
ENV = {  # environment task {E,Q} vs {R,S}: AUC 1, 0.75, 0.5
    "balanced": [0, 0, 1, 1, 0, 0, 1, 1],
    # neg R,S = 0, 3, 2, 1; pos E,Q = 2.5, 0.5, 4, 3.5 → 3 + 1 + 4 + 4 = 12 of 16
    "scene_matched": [0, 3, 2.5, 0.5, 2, 1, 4, 3.5],
    "scene_mismatched": [1] * 8,
}
SPEECH = {  # speech task {S,Q} vs {R,E}: AUC 0.5, 0.5, 0.25
    "balanced": [1] * 8,
    "scene_matched": [2] * 8,
    # neg R,E = 0, 1, 2, 3; pos S,Q = 0.5, 1.5, −1, 0.7 → 1 + 2 + 0 + 1 = 4 of 16
    "scene_mismatched": [0, 0.5, 1, 1.5, 2, -1, 3, 0.7],
}


def _group(protocol: str) -> GroupScores:
    test = pd.DataFrame({"sample_id": [f"{protocol}-{c}-{v}" for c in "ab" for v in "RSEQ"],
                         "clip_id": [c for c in "ab" for _ in "RSEQ"],
                         "variant": list("RSEQRSEQ"), "protocol": protocol})
    binary = np.array([0, 1, 1, 1, 0, 1, 1, 1.0])  # H_bin: E and S both perfectly above R
    return GroupScores(protocol, "AV", "paired", test,
                       {"binary": binary, "speech": np.array(SPEECH[protocol], float),
                        "env": np.array(ENV[protocol], float)})


def test_delta_e_minus_s_matches_table3_imagebind() -> None:
    # Table 3, ImageBind A-V: E 0.898 0.896 0.919 (mean 0.904), S 0.797 0.803 0.793 (0.798)
    got = M.delta_e_minus_s([0.898, 0.896, 0.919], [0.797, 0.803, 0.793])
    assert got == pytest.approx(0.106, abs=1e-3)
    assert got == pytest.approx((0.898 + 0.896 + 0.919) / 3 - (0.797 + 0.803 + 0.793) / 3)


def test_delta_e_minus_s_from_the_component_heads_per_protocol() -> None:
    groups = [_group(p) for p in PROTOCOLS]
    means = {(r["task"], r["metric"]): r for r in summary_records(groups, n_boot=0)}
    assert means[("env", "auc")]["value"] == pytest.approx((1 + 0.75 + 0.5) / 3)
    assert means[("speech", "auc")]["value"] == pytest.approx((0.5 + 0.5 + 0.25) / 3)
    mean = next(r for r in component_records(groups, n_boot=100) if r["protocol"] == "mean")
    # Δ_E−S = mean AUC_E − mean AUC_S = 0.75 − 0.41667; the binary head's AUC(E vs R) −
    # AUC(S vs R) (today's definition) would be 1 − 1 = 0
    assert mean["delta_E_S"] == pytest.approx(0.75 - 1.25 / 3)
    assert mean["delta_E_S_lo"] <= mean["delta_E_S"] <= mean["delta_E_S_hi"]


def test_gaps_use_the_component_scores_and_average_over_protocols() -> None:
    groups = [_group(p) for p in PROTOCOLS]
    recs = {r["protocol"]: r for r in component_records(groups, n_boot=0)}
    v = np.array(list("RSEQRSEQ"))
    for p in PROTOCOLS:
        gaps = M.interference_gaps(SPEECH[p], ENV[p], v)
        assert recs[p]["G_S"] == pytest.approx(gaps["G_S"])
        assert recs[p]["G_E"] == pytest.approx(gaps["G_E"])
    # mismatched: G_S = AUC(S vs R) − AUC(Q vs E) = (0.5 > 0: 1 of 4) − (1.5 > 1: 1 of 4) = 0
    assert recs["scene_mismatched"]["G_S"] == pytest.approx(0.25 - 0.25)
    # matched: G_E = AUC(E vs R) − AUC(Q vs S) = (2.5, 4 > 0, 2: 4 of 4) − (3.5 > 3, 1: 2 of 4)
    assert recs["scene_matched"]["G_E"] == pytest.approx(1.0 - 0.5)
    assert recs["mean"]["G_E"] == pytest.approx(np.mean([recs[p]["G_E"] for p in PROTOCOLS]))
