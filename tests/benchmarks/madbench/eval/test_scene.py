"""Scene consistency (paper §5.3, Table 4): one pooled head, Sh with the same head, Δ_pair."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from madbench_common.benchmarks.madbench.eval.analysis import pair_records
from madbench_common.benchmarks.madbench.eval.fit import (
    FeatureSet,
    GroupScores,
    run_heads,
    union_rows,
)
from madbench_common.benchmarks.madbench.eval.heads import Standardiser

from .eval_synth import make_features, make_samples


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, FeatureSet]:
    samples = make_samples(200, ("balanced",), scene=True)
    return samples, make_features(samples)


def _scene(groups: list[GroupScores], mode: str, pairing: str) -> GroupScores:
    return next(g for g in groups if (g.protocol, g.mode, g.pairing)
                == ("scene_consistency", mode, pairing))


def test_union_counts_the_shared_consistent_mix_once(data: tuple[pd.DataFrame, FeatureSet]) -> None:
    samples, _ = data
    sc = samples[samples["protocol"] == "scene_consistency"]
    one_clip = sc[sc["clip_id"] == "c0000"]
    assert len(one_clip) == 6  # D-R, S-R, D-S × consistent, inconsistent
    union = union_rows(one_clip)
    # D-R's and S-R's consistent rows are the clip's own R: one sample of the union
    assert len(union) == 5 and union["scene_consistent"].sum() == 2


def test_one_pooled_head_per_mode_trained_on_the_union(
        data: tuple[pd.DataFrame, FeatureSet]) -> None:
    samples, fs = data
    groups = run_heads(samples, fs)
    paired = _scene(groups, "AV", "paired")
    assert set(paired.heads) == {"scene"}  # no per-condition heads
    assert not [g for g in groups if g.protocol != "scene_consistency" and g.pairing != "paired"]
    sc = samples[samples["protocol"] == "scene_consistency"]
    train = union_rows(sc[sc["split"] == "train"])
    x_train = fs.rows("AV", "paired", train["sample_id"])
    std = Standardiser.fit(x_train)
    y = (~train["scene_consistent"]).to_numpy(int)
    ref = LogisticRegression(C=1.0, tol=1e-12, max_iter=10000).fit(
        std.transform(x_train, np.float64), y)
    x_test = std.transform(fs.rows("AV", "paired", paired.test["sample_id"]), np.float64)
    got = expit(paired.scores["scene"])
    np.testing.assert_allclose(got, ref.predict_proba(x_test)[:, 1], atol=2e-4)
    # counting the shared consistent mix twice (no union) would give another head
    dup = sc[sc["split"] == "train"]
    x_dup = fs.rows("AV", "paired", dup["sample_id"])
    std_dup = Standardiser.fit(x_dup)
    other = LogisticRegression(C=1.0, tol=1e-12, max_iter=10000).fit(
        std_dup.transform(x_dup, np.float64), (~dup["scene_consistent"]).to_numpy(int))
    x_test_dup = std_dup.transform(fs.rows("AV", "paired", paired.test["sample_id"]), np.float64)
    assert np.abs(other.predict_proba(x_test_dup)[:, 1] - got).max() > 1e-3
    assert len(paired.test) == (sc["split"] == "test").sum()  # every test row of every condition


def test_shuffled_uses_the_same_head_on_swapped_video_features(
        data: tuple[pd.DataFrame, FeatureSet]) -> None:
    samples, fs = data
    groups = run_heads(samples, fs, logo=False)
    paired, sh = _scene(groups, "AV", "paired"), _scene(groups, "AV", "shuffled")
    head = paired.heads["scene"]
    assert sh.heads["scene"] is head and sh.standardiser is paired.standardiser
    assert paired.standardiser is not None
    x_sh = paired.standardiser.transform(fs.rows("AV", "shuffled", sh.test["sample_id"]))
    np.testing.assert_allclose(sh.scores["scene"], head.decision(x_sh))
    # shuffled features never enter training: garbage shuffled rows for training samples
    # (and changed test ones) leave the head untouched
    noisy = FeatureSet(dict(fs.matrices))
    ids = samples["sample_id"]
    noisy.add("AV", "shuffled", ids, np.random.default_rng(1).normal(size=(len(ids), 20)) * 50)
    again = _scene(run_heads(samples, noisy, logo=False), "AV", "paired")
    np.testing.assert_array_equal(again.heads["scene"].coef, head.coef)
    # the synthetic scene cue lives only in the intended video: Δ_pair > 0 in every condition
    recs = {r["condition"]: r for r in pair_records(groups, n_boot=50)
            if r["mode"] == "AV"}
    assert set(recs) == {"D-R", "S-R", "D-S"}
    assert all(r["delta_pair"] > 0.2 and r["delta_pair_lo"] > 0 for r in recs.values())


def _hand_groups() -> list[GroupScores]:
    """4 test clips, D-R only: consistent (C) and inconsistent (I) per clip."""
    test = pd.DataFrame({
        "sample_id": [f"c{c}-{k}" for c in range(4) for k in "CI"],
        "clip_id": [f"c{c}" for c in range(4) for _ in "CI"],
        "variant": ["R"] * 8, "protocol": ["scene_consistency"] * 8,
        "sc_condition": ["D-R"] * 8, "scene_consistent": [k == "C" for _ in range(4) for k in "CI"],
    })
    p = np.array([0.0, 5.0, 1.0, 6.0, 2.0, 7.0, 3.0, 8.0])  # every I above every C: AUC 1
    # Sh: C = 0, 1, 2, 3 and I = 0.5, 1.5, −1, −2 → I > C in 1 + 2 + 0 + 0 = 3 of 16 pairs
    sh = np.array([0.0, 0.5, 1.0, 1.5, 2.0, -1.0, 3.0, -2.0])
    return [GroupScores("scene_consistency", "AV", "paired", test, {"scene": p}),
            GroupScores("scene_consistency", "AV", "shuffled", test.iloc[::-1].reset_index(
                drop=True), {"scene": sh[::-1].copy()})]


def test_delta_pair_hand_worked() -> None:
    (rec,) = pair_records(_hand_groups(), n_boot=200)
    assert rec["condition"] == "D-R" and rec["n"] == 8
    assert rec["auc_P"] == pytest.approx(1.0)
    assert rec["auc_Sh"] == pytest.approx(3 / 16)
    assert rec["delta_pair"] == pytest.approx(1.0 - 3 / 16)
    assert rec["delta_pair_lo"] <= rec["delta_pair"] <= rec["delta_pair_hi"]


def test_delta_pair_uses_rows_scored_in_both() -> None:
    p, sh = _hand_groups()
    sh.scores["scene"][0] = np.nan  # the last I row (c3-I, −2) has no shuffled score
    (rec,) = pair_records([p, sh], n_boot=0)
    # P over the 7 shared rows is still 1; Sh: I = 0.5, 1.5, −1 vs C = 0..3 → 3 of 12
    assert rec["n"] == 7 and rec["n_excluded"] == 1
    assert rec["auc_Sh"] == pytest.approx(3 / 12)
    assert rec["delta_pair"] == pytest.approx(1 - 3 / 12)


def test_union_needs_both_hashes_on_every_row() -> None:
    frame = pd.DataFrame({"audio_sha256": ["a", "a", None], "video_sha256": ["v", "v", "v"],
                          "scene_consistent": [True, True, True]})
    assert len(union_rows(frame)) == 3  # a missing hash: no deduplication at all
    assert len(union_rows(frame.iloc[:2])) == 1
