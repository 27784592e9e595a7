"""Robustness evaluation: clean heads score every condition; records and tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval.fit import FeatureSet
from madbench_common.benchmarks.madbench.eval.report import render_markdown
from madbench_common.benchmarks.madbench.eval.robust_tables import robust_mean
from madbench_common.benchmarks.madbench.eval.suite import (
    EvalConfig,
    EvalResult,
    ModelInfo,
    run_evaluation,
)
from madbench_common.cli.pipeline import robustness_sections

CFG = EvalConfig(n_boot=40, logo=False)
CONDITIONS = ("identity", "mild", "harsh")


def _perturbed(samples: pd.DataFrame, features: FeatureSet) -> tuple[pd.DataFrame, FeatureSet]:
    """Every test sample under three conditions: features unchanged, a little noise, and the
    speech/env/scene cues wiped out."""
    test = samples[samples["split"] == "test"]
    rng = np.random.default_rng(7)
    frames, out = [], FeatureSet(dict(features.matrices))
    for cond in CONDITIONS:
        part = test.assign(sample_id=test["sample_id"] + f"@{cond}", condition=cond,
                           condition_index=CONDITIONS.index(cond))
        frames.append(part)
        for mode in ("A", "AV"):
            x = features.rows(mode, "paired", test["sample_id"]).copy()
            if cond == "mild":
                x += rng.normal(scale=1.5, size=x.shape)
            elif cond == "harsh":
                x[:, :2] = rng.normal(size=(len(x), 2))
                x[:, -1:] = rng.normal(size=(len(x), 1))
            ids, mat = out.matrices[(mode, "paired")]
            out.add(mode, "paired", np.r_[ids, part["sample_id"]], np.vstack([mat, x]))
    return pd.concat(frames, ignore_index=True), out


@pytest.fixture(scope="module")
def robust(samples: pd.DataFrame, features: FeatureSet) -> EvalResult:
    perturbed, fs = _perturbed(samples, features)
    return run_evaluation(ModelInfo("enc", "Enc", "av_encoder"), samples, features=fs,
                          config=CFG, perturbed=perturbed)


def test_the_clean_heads_score_every_condition(robust: EvalResult) -> None:
    conds = {g.condition for g in robust.robust_groups}
    assert conds == set(CONDITIONS)
    for g in robust.robust_groups:
        clean = next(c for c in robust.groups if (c.protocol, c.mode, c.pairing, c.source)
                     == (g.protocol, g.mode, "paired", "head"))
        assert all(g.heads[k] is clean.heads[k] for k in g.heads)  # never refitted
        assert g.thresholds == clean.thresholds
        assert not any(k.startswith("logo:") for k in g.scores)
    # an unchanged input scores exactly as clean: the same heads, the same standardiser
    ident = next(g for g in robust.robust_groups
                 if (g.condition, g.protocol, g.mode) == ("identity", "balanced", "AV"))
    clean = next(g for g in robust.groups if (g.protocol, g.mode, g.pairing)
                 == ("balanced", "AV", "paired"))
    np.testing.assert_allclose(ident.scores["binary"], clean.scores["binary"])


def test_records_and_drops(robust: EvalResult) -> None:
    recs = robust.tables["robustness"]
    assert {r["task"] for r in recs} == {"binary", "speech", "env", "scene"}
    mean = {r["condition"]: r for r in recs if r["protocol"] == "mean"
            and (r["task"], r["mode"]) == ("binary", "AV")}
    assert set(mean) == {"clean", *CONDITIONS}
    table2 = next(r for r in robust.tables["means"]
                  if (r["task"], r["metric"], r["mode"]) == ("binary", "auc", "AV"))
    assert mean["clean"]["auc"] == pytest.approx(table2["value"])
    assert mean["identity"]["auc_drop"] == pytest.approx(0.0, abs=1e-12)
    assert mean["identity"]["eer_rise"] == pytest.approx(0.0, abs=1e-12)
    assert 0 < mean["mild"]["auc_drop"] < mean["harsh"]["auc_drop"]
    assert mean["harsh"]["auc"] < 0.65 < mean["clean"]["auc"]
    h = mean["harsh"]
    assert h["auc_drop_lo"] <= h["auc_drop"] <= h["auc_drop_hi"] and h["auc_drop_lo"] > 0
    assert {"ap", "ap_lo", "ap_hi", "eer", "ap_drop"} <= set(h)
    scene = [r for r in recs if r["task"] == "scene" and r["condition"] == "harsh"]
    assert scene and scene[0]["protocol"] == "scene_consistency"


def test_robustness_tables_in_the_report(robust: EvalResult) -> None:
    md = render_markdown([robust])
    pivot = robustness_sections(md)
    assert len(pivot) == 1
    lines = [ln for ln in pivot[0].splitlines() if ln.startswith("| ")]
    assert lines[0].startswith("| Condition | Enc")
    assert [ln.split("|")[1].strip() for ln in lines[1:]] == ["clean", *CONDITIONS]
    harsh = robust_mean(robust, "harsh")
    assert harsh is not None and f"({-harsh['auc_drop']:+.3f})" in lines[-1]
    assert "(+0.000)" in lines[2] and "-0.000" not in pivot[0]  # identity: no change
    long = md[md.find("## Robustness: binary detection under each condition"):]
    assert "| Enc | A-V | clean |" in long and "| ΔAUC |" in long
