"""Direct transfer and zero-shot scores per task (paper §4.2): own rows only, exclusion, parses."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval.native import native_groups, parse_records
from madbench_common.benchmarks.madbench.eval.report import main_table, render_markdown
from madbench_common.benchmarks.madbench.eval.suite import EvalConfig, ModelInfo, run_evaluation
from madbench_common.benchmarks.madbench.eval.tables import table2, table3

from .eval_synth import make_features, make_samples

CFG = EvalConfig(n_boot=0, logo=False)


def _test_samples() -> pd.DataFrame:
    """Two test clips of one protocol: rows R, S, E, Q of clip a, then of clip b."""
    return pd.DataFrame({
        "sample_id": [f"{c}-{v}" for c in "ab" for v in "RSEQ"],
        "clip_id": [c for c in "ab" for _ in "RSEQ"], "variant": list("RSEQRSEQ"),
        "scene_consistent": True, "speech_generator": "", "env_generator": "",
        "protocol": "balanced", "split": "test", "sc_condition": ""})


def _omni_rows() -> pd.DataFrame:
    ids = [f"{c}-{v}" for c in "ab" for v in "RSEQ"]
    binary = pd.DataFrame({
        "sample_id": ids, "task": "binary", "mode": "AV",
        # P(fake); the two refusals have no score: a-E is excluded, b-R keeps none either
        "score": [0.1, 0.7, np.nan, 0.9, np.nan, 0.6, 0.2, 0.8],
        "parsed": ["real", "fake", "refusal", "fake", "unparsed", "fake", "real", "fake"],
        "prompt_hash": "0123456789abcdef"})
    fourway = pd.DataFrame({
        "sample_id": ids, "task": "fourway", "mode": "AV", "score": np.nan,
        "probs": [(0.7, 0.1, 0.1, 0.1), (), (), (0.1, 0.1, 0.1, 0.7), (), (), (), ()],
        "parsed": ["R", "S", "refusal", "Q", "R", "E", "unparsed", "Q"]})
    return pd.concat([binary, fourway], ignore_index=True)


def test_refusals_without_a_score_are_excluded_and_counted() -> None:
    samples = _test_samples()
    (g,) = native_groups(samples, _omni_rows())
    assert g.source == "native" and set(g.scores) == {"binary", "fourway"}
    res = run_evaluation(ModelInfo("omni-x", "Omni-X", "omni"), samples, scores=_omni_rows(),
                         config=CFG)
    rec = {r["task"]: r for r in res.tables["tasks"]}
    b = rec["binary"]
    # a-E (refusal) and b-R (unparsed) have no score: 6 rows left, the real a-R (0.1) below
    # every fake (a-S 0.7, a-Q 0.9, b-S 0.6, b-E 0.2, b-Q 0.8): AUC 1
    assert (b["n"], b["n_excluded"]) == (6, 2) and b["excluded_rate"] == pytest.approx(0.25)
    assert b["auc"] == pytest.approx(1.0)
    # four-way: probs where present, else the parsed letter; 2 rows (refusal, unparsed) out
    f = rec["fourway"]
    assert (f["n"], f["n_excluded"]) == (6, 2)
    # a-R, a-Q from probs (R, Q); a-S, b-R, b-S, b-Q parsed S, R, E, Q: only b-S (E) is wrong
    assert f["acc"] == pytest.approx(5 / 6)
    assert "absent" not in main_table([res])  # both tasks have rows
    assert "(excl. 25.0%)" in main_table([res])


def test_parse_rates_per_task_and_mode() -> None:
    recs = {r["task"]: r for r in parse_records(_test_samples(), _omni_rows())}
    assert recs["binary"]["n"] == 8 and recs["binary"]["mode"] == "AV"
    assert recs["binary"]["shares"] == {"fake": 0.5, "real": 0.25, "refusal": 0.125,
                                        "unparsed": 0.125}
    assert list(recs["fourway"]["shares"]) == ["R", "S", "E", "Q", "refusal", "unparsed"]
    md = render_markdown([run_evaluation(ModelInfo("omni-x", "Omni-X", "omni"), _test_samples(),
                                         scores=_omni_rows(), config=CFG)])
    assert "parse rates" in md and "fake 50.0% · real 25.0% · refusal 12.5% · unparsed 12.5%" in md
    assert "| binary | A-V | paired | 0123456789ab | 8 |" in md


def test_a_task_without_rows_is_absent_never_borrowed() -> None:
    samples = _test_samples()
    binary_only = _omni_rows().query("task == 'binary'")
    res = run_evaluation(ModelInfo("det", "Det", "av_detector"), samples, scores=binary_only,
                         config=CFG)
    assert {r["task"] for r in res.tables["tasks"]} == {"binary"}
    four = table2([res])[1]
    row = four.sections[0][1][0]
    assert row[3:] == ["—", "—"]
    assert any(n.startswith("— No four-way answers") and "never filled from another task" in n
               and n.endswith(": Det.") for n in four.all_notes())
    t3 = table3([res])
    assert all(c == "—" for row in t3.sections[0][1] for c in row[4:6])


def test_detector_native_binary_and_heads_for_the_other_tasks() -> None:
    samples = make_samples(80)
    fs = make_features(samples)
    native = pd.DataFrame({"sample_id": samples["sample_id"], "task": "binary", "mode": "AV",
                           "score": np.where(samples["variant"] == "R", 0.2, 0.8)})
    res = run_evaluation(ModelInfo("det", "Det", "av_detector"), samples, features=fs,
                         scores=native, config=CFG)
    assert res.source_for("binary") == "native" and res.source_for("fourway") == "head"
    tasks = {(r["source"], r["task"]) for r in res.tables["tasks"] if r["mode"] == "AV"}
    assert ("native", "binary") in tasks and ("head", "binary") in tasks  # both in the JSON
    assert not {("native", t) for t in ("fourway", "speech", "env")} & tasks
    a, b = table2([res])
    row = a.sections[0][1][0]
    assert row[2] == "native (direct)" and row[3].startswith("1.000")
    assert b.sections[0][1][0][2] == "H_4way"
