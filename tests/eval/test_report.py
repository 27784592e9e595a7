"""Reports: the paper-shaped tables in Markdown/JSON and the HTML with ROC curves."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from madbench_common.eval.report import main_table, render_markdown, write_report
from madbench_common.eval.runner import FeatureSet
from madbench_common.eval.suite import EvalConfig, EvalResult, run_evaluation


@pytest.fixture(scope="module")
def result(samples: pd.DataFrame, features: FeatureSet) -> EvalResult:
    return run_evaluation("toy", samples, features=features, config=EvalConfig(n_boot=30))


def test_tables_cover_the_protocol(result: EvalResult) -> None:
    t = result.tables
    tasks = {(r["mode"], r["pairing"], r["task"]) for r in t["tasks"]}
    assert ("A", "paired", "fourway") in tasks and ("AV", "shuffled", "scene_ds") in tasks
    assert ("AV", "shuffled", "binary") not in tasks
    assert {r["task"] for r in t["pairing"]} == {"scene_dr", "scene_sr", "scene_ds"}
    assert {r["task"] for r in t["ablation"]} == {"binary", "speech", "env"}
    assert {r["generator"] for r in t["logo"]} >= {"speech:tts0", "env:t2a1"}
    gens = [r for r in t["generators"] if r["mode"] == "A"]
    assert all(r["n_fake"] > 0 and r["n_real"] > 0 for r in gens)


def test_signals_are_found(result: EvalResult) -> None:
    rows = {(r["mode"], r["pairing"], r["task"]): r for r in result.tables["tasks"]}
    assert rows[("A", "paired", "env")]["auc"] > 0.7
    # the scene cue exists only in the paired A-V features: Δ_pair for D-S is clearly positive
    ds = next(r for r in result.tables["pairing"] if r["task"] == "scene_ds")
    assert ds["delta_pair"] > 0.1 and ds["delta_pair_lo"] > 0


def test_markdown_json_html(result: EvalResult, tmp_path: Path) -> None:
    files = write_report(result, lambda n, b: (tmp_path / n).write_bytes(b))
    assert files == ["report.md", "report.json", "report.html"]
    md = (tmp_path / "report.md").read_text()
    for title in ("Table 2", "Table 3", "Table 4", "Table 5", "Leave-one-generator-out"):
        assert title in md
    data = json.loads((tmp_path / "report.json").read_text())  # strict JSON: NaN → null
    assert data["model"] == "toy" and "NaN" not in (tmp_path / "report.json").read_text()
    html = (tmp_path / "report.html").read_text()
    assert html.count("<svg") == len(result.groups) and "true \\ pred" in html
    assert render_markdown(result).startswith("# MADBench evaluation: toy")


def test_main_table_has_one_row_per_mode(result: EvalResult) -> None:
    lines = main_table(result).splitlines()
    assert len(lines) == 2 + 2  # header, rule, A and AV
    assert all("[" in line for line in lines[2:])  # intervals printed
