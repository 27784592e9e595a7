"""Reports: the paper's Tables 2–5 (layout, groups, Mean, intervals), JSON and HTML."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval.fit import FeatureSet
from madbench_common.benchmarks.madbench.eval.report import (
    main_table,
    render_html,
    render_markdown,
    write_report,
)
from madbench_common.benchmarks.madbench.eval.suite import (
    EvalConfig,
    EvalResult,
    ModelInfo,
    run_evaluation,
)
from madbench_common.cli.pipeline import main_section, zero_shot_sections

CFG = EvalConfig(n_boot=30)


@pytest.fixture(scope="module")
def result(samples: pd.DataFrame, features: FeatureSet) -> EvalResult:
    return run_evaluation("ref-av-stats", samples, features=features, config=CFG)


@pytest.fixture(scope="module")
def several(samples: pd.DataFrame, features: FeatureSet, result: EvalResult) -> list[EvalResult]:
    audio = FeatureSet({k: v for k, v in features.matrices.items() if k[0] == "A"})
    omni = pd.DataFrame({"sample_id": samples["sample_id"], "task": "binary", "mode": "AV",
                         "score": np.random.default_rng(0).random(len(samples))})
    return [
        run_evaluation(ModelInfo("omni-x", "Omni-X", "omni"), samples, scores=omni, config=CFG),
        run_evaluation(ModelInfo("aud", "AudioEnc", "audio_encoder"), samples, features=audio,
                       config=CFG),
        result,
        run_evaluation(ModelInfo("det", "DetX", "av_detector"), samples, features=features,
                       config=CFG),
    ]


def test_records_cover_the_protocol(result: EvalResult) -> None:
    t = result.tables
    tasks = {(r["protocol"], r["mode"], r["pairing"], r["task"]) for r in t["tasks"]}
    assert ("scene_matched", "A", "paired", "fourway") in tasks
    assert ("scene_consistency", "AV", "shuffled", "scene") in tasks
    assert not {k for k in tasks if k[2] == "shuffled" and k[3] != "scene"}
    assert {r["condition"] for r in t["tasks"] if r["task"] == "scene"} == {"D-R", "S-R", "D-S"}
    assert {r["condition"] for r in t["pairing"] if "delta_pair" in r} == {"D-R", "S-R", "D-S"}
    assert {r["task"] for r in t["ablation"]} == {"binary", "fourway", "speech", "env"}
    means = {(r["mode"], r["task"], r["metric"]) for r in t["means"]}
    assert ("AV", "fourway", "macro_f1") in means and ("A", "binary", "eer") in means
    assert all(len(r["protocols"]) == 3 for r in t["means"])
    assert {r["generator"] for r in t["logo"]} >= {"speech:tts0", "env:t2a1"}


def test_table2_first_with_mean_and_intervals(result: EvalResult) -> None:
    md = render_markdown([result])
    sections = md.split("\n## ")
    assert sections[1].startswith("Summary") and sections[2].startswith("Table 2")
    order = [md.find(f"## Table {n}") for n in (2, 3, 4, 5)]
    assert order == sorted(order) and order[0] > 0
    header = next(line for line in md.splitlines() if line.startswith("| Model | Input | via |"))
    assert header.endswith("| Balanced | Matched | Mismatched | Mean |")
    row = next(line for line in sections[2].splitlines() if line.startswith("| ref-av-stats †"))
    cells = row.strip("|").split("|")
    assert cells[1].strip() == "A-V"  # Tables 2–4 use the A-V input of an A-V model
    # every protocol cell and the Mean: "AUC [lo, hi] / EER [lo, hi] / AP [lo, hi]"
    assert all(re.fullmatch(r" \d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] / \d\.\d{3} \[\S+, \S+\]"
                            r" / \d\.\d{3} \[\S+, \S+\] ", c)
               for c in cells[3:])
    # the legend: once, in the summary, not under every table
    assert md.count("† CPU reference implementation") == 1
    assert "† CPU reference implementation" in sections[1]
    assert main_section(md).startswith("## Summary") and "## Table 2" not in main_section(md)
    assert main_table([result]) == ("## " + sections[2]).strip()[: len(main_table([result]))]


def test_mean_is_the_average_over_protocols(result: EvalResult) -> None:
    per = {r["protocol"]: r["auc"] for r in result.tables["tasks"]
           if (r["task"], r["mode"], r["pairing"]) == ("binary", "AV", "paired")}
    mean = next(r for r in result.tables["means"]
                if (r["task"], r["metric"], r["mode"]) == ("binary", "auc", "AV"))
    assert mean["value"] == pytest.approx(np.mean(list(per.values())))
    assert mean["value_lo"] <= mean["value"] <= mean["value_hi"]


def test_groups_in_the_papers_order(several: list[EvalResult]) -> None:
    md = render_markdown(several)
    table2 = md[md.find("## Table 2"):md.find("## Table 3")]
    # §5.1 Table 2: pretrained A-V detectors, frozen A-V encoders, omni models, in that order
    titles = ["Pretrained A-V detectors", "Frozen A-V encoders", "Omni models (zero-shot)"]
    pos = [table2.find(f"**{t}**") for t in titles]
    assert all(p > 0 for p in pos) and pos == sorted(pos)
    assert "Frozen audio encoders" not in table2 and "AudioEnc" not in table2
    beyond = md[md.find("## Beyond the paper — Table 2"):]
    assert "**Frozen audio encoders**" in beyond and "| AudioEnc | A |" in beyond
    t5 = md[md.find("## Table 5"):]
    t5 = t5[: t5.find("\n## ")]
    assert re.search(r"\| ref-av-stats † \| A \|.*\n\|  \| A-V \|", t5)  # a pair per A-V model
    # §5.4's Table 5 lists no A-V detector: DetX goes to the same layout beyond the paper
    assert "DetX" not in t5
    beyond5 = md[md.find("## Beyond the paper — Table 5"):]
    assert re.search(r"\| DetX \| A \|.*\n\|  \| A-V \|", beyond5)
    assert re.search(r"\| AudioEnc \| A \|", t5) and "| AudioEnc | A-V |" not in t5
    t4 = md[md.find("## Table 4"):md.find("## Table 5")]
    assert "AudioEnc" not in t4 and "ref-av-stats †" in t4 and "Omni-X" in t4
    # omni gave P_bin rows only: the note under Table 4 says so
    assert "— No scene-consistency answers from this model in the run (never filled from " \
        "another task): Omni-X." in t4
    assert "| Omni-X | A-V | P_bin (zero-shot) |" in table2


def test_markdown_json_html(several: list[EvalResult], tmp_path: Path) -> None:
    files = write_report(several, lambda n, b: (tmp_path / n).write_bytes(b))
    assert files == ["report.md", "report.json", "report.html"]
    data = json.loads((tmp_path / "report.json").read_text())  # strict JSON: NaN → null
    assert [m["slug"] for m in data["models"]] == ["omni-x", "aud", "ref-av-stats", "det"]
    assert data["models"][2]["reference"] and data["models"][2]["group"] == "av_encoder"
    assert {"table2a", "table2b", "table3", "table4", "table5"} <= set(data["layout"])
    assert "NaN" not in (tmp_path / "report.json").read_text()
    html = render_html(several)
    # the summary, then Table 2 with its ROC/DET figure (matplotlib SVG) beneath, Table 3
    assert html.find("id=summary") < html.find('id="table2a"') < html.find("ROC and DET") \
        < html.find('id="table3"')
    assert "ROC and DET: Balanced" in html and "normal deviate" in html
    assert 'class="paper sortable"' in html and "true \\ pred" in html
    headline = html[html.find('id="tbl-summary"'):]
    headline = headline[:headline.find("</table>")]
    assert "Binary AUC" in headline and "Δ_pair D-R" in headline
    table2 = html[html.find('id="tbl-table2a"'):]
    table2 = table2[:table2.find("</table>")]
    assert "Mean" in table2 and "Balanced" in table2
    # one number per cell: no interval in any cell's text, only in its hover title
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table2)
    assert cells and not any("[" in c for c in cells)
    assert re.search(r'title="AUC \d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\]', table2)


def test_report_command_prints_the_zero_shot_sections() -> None:
    md = ("# r\n\n## Table 2: x\n\nt2\n\n## Table 3: y\n\nt3\n\n"
          "## Zero-shot answers: parse rates\n\n| a |\n\n## Zero-shot prompts\n\n| p |\n\n"
          "## Per-generator breakdown\n\ng\n")
    assert zero_shot_sections(md) == ["## Zero-shot answers: parse rates\n\n| a |",
                                      "## Zero-shot prompts\n\n| p |"]
    assert zero_shot_sections(md.split("## Zero-shot")[0]) == []


def test_average_precision_beside_auc_and_eer(result: EvalResult) -> None:
    """Every binary record carries AP, equal to scikit-learn's on the same scored rows."""
    from sklearn.metrics import average_precision_score

    from madbench_common.benchmarks.madbench.eval.views import task_view

    core = (g for g in result.groups
            if g.pairing == "paired" and g.protocol != "scene_consistency")
    for g in core:
        for task in ("binary", "speech", "env"):
            view = task_view(g, task)
            assert view is not None
            rec = next(r for r in result.tables["tasks"] if (r["protocol"], r["mode"], r["task"])
                       == (g.protocol, g.mode, task) and r["pairing"] == "paired")
            want = average_precision_score(view.binary_labels(), view.ranking())
            assert rec["ap"] == pytest.approx(want, abs=1e-12)
            assert rec["ap_lo"] <= rec["ap"] <= rec["ap_hi"]
    assert all("ap" in r for r in result.tables["generators"])
    assert all("ap_held_out" in r for r in result.tables["logo"])
    assert all("ap_P" in r for r in result.tables["pairing"])
    md = render_markdown([result])
    ap = md[md.find("## Average precision"):]
    assert re.search(r"\| ref-av-stats † \| A-V \| \d\.\d{3} \[", ap)
