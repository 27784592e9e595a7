"""``madbench compare``: runs side by side from their report.json files, same tables/figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval.compare import compare_runs
from madbench_common.benchmarks.madbench.eval.fit import FeatureSet
from madbench_common.benchmarks.madbench.eval.report import render_markdown, write_report
from madbench_common.benchmarks.madbench.eval.suite import EvalConfig, ModelInfo, run_evaluation
from madbench_common.cli import main
from madbench_common.core.errors import ConfigError


@pytest.fixture(scope="module")
def two_runs(samples: pd.DataFrame, features: FeatureSet,
             tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    cfg = EvalConfig(n_boot=20, logo=False)
    audio = FeatureSet({k: v for k, v in features.matrices.items() if k[0] == "A"})
    published = [run_evaluation("ref-av-stats", samples, features=features, config=cfg),
                 run_evaluation(ModelInfo("aud", "AudioEnc", "audio_encoder"), samples,
                                features=audio, config=cfg)]
    mine = [run_evaluation(ModelInfo("new", "MyModel", "audio_encoder"), samples,
                           features=audio, config=EvalConfig(n_boot=20, logo=False, c=0.01))]
    dirs = []
    facts = {"run_id": "paper", "pipeline": "madbench", "store": "s3://bucket/runs",
             "commit": "0123abcd", "images": {"embedded": ["evaluate"]},
             "clips": {"ingested": 5}, "samples": {}, "quarantine": {"total": 0}}
    for name, results, runs in (("published", published, [facts]), ("mine", mine, [])):
        d = tmp_path_factory.mktemp(name)
        write_report(results, lambda n, b, d=d: (d / n).write_bytes(b), runs=runs)
        dirs.append(d)
    return dirs[0], dirs[1]


def test_models_of_both_runs_in_one_report(two_runs: tuple[Path, Path]) -> None:
    pub, mine = two_runs
    results = compare_runs([str(pub / "report.json"), str(mine)], ["paper-v1", "mine"])
    names = [r.model.name for r in results]
    assert names == ["ref-av-stats [paper-v1]", "AudioEnc [paper-v1]", "MyModel [mine]"]
    md = render_markdown(results)
    table2 = md.split("\n## ")[2]
    assert "| ref-av-stats [paper-v1] † | A-V | H_bin |" in table2
    # audio encoders are not in the paper's Table 2: the same layout beyond the paper
    table2 = md[md.find("## Beyond the paper — Table 2"):]
    assert "| MyModel [mine] | A | H_bin |" in table2
    # the records are the runs' own: the published Mean AUC is unchanged
    pub_json = json.loads((pub / "report.json").read_text())
    mean = next(r for r in pub_json["models"][1]["tables"]["means"]
                if (r["task"], r["metric"], r["mode"]) == ("binary", "auc", "A"))
    assert f"{mean['value']:.3f}" in next(ln for ln in table2.splitlines() if "AudioEnc" in ln)


def test_compare_command_writes_the_same_tables_and_figures(two_runs: tuple[Path, Path],
                                                            tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]
                                                            ) -> None:
    pub, mine = two_runs
    out = tmp_path / "cmp"
    assert main(["compare", str(pub), str(mine), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    # the same layout as a run's report: the summary first, with each run's facts
    assert printed.startswith("## Summary") and "MyModel [" in printed
    # labelled by the run id its report records ("paper"), the other by its folder
    assert "**Pipeline (paper)" in printed and "commit 0123abcd" in printed
    assert "**Run (mine" in printed and "no run facts" in printed
    html = (out / "report.html").read_text()
    one = (pub / "report.html").read_text()
    assert re.findall(r'<section id="?([\w]+)', html) == re.findall(r'<section id="?([\w]+)', one)
    assert re.search(r"<h1>MADBench comparison: paper vs mine\w*</h1>", html)
    assert html.count("<svg") >= 4 and "ROC and DET: Balanced" in html
    assert "MyModel [" in html and "AudioEnc [" in html
    data = json.loads((out / "report.json").read_text())
    assert len(data["models"]) == 3 and "table2a" in data["layout"]


def test_bad_inputs_are_named(tmp_path: Path, two_runs: tuple[Path, Path]) -> None:
    with pytest.raises(ConfigError, match=r"no such report\.json"):
        compare_runs([str(tmp_path / "nope.json")])
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"not a MADBench report\.json"):
        compare_runs([str(tmp_path / "x.json")])
    with pytest.raises(ConfigError, match="same label"):
        compare_runs([str(two_runs[0]), str(two_runs[0])])


def test_default_label_is_the_run_id_and_same_named_folders_do_not_collide(
        samples: pd.DataFrame, features: FeatureSet, tmp_path: Path) -> None:
    """A run's report lies at ``evaluate/<fp>/report/report.json``: labelled by the folder,
    every run was "report" and two collided. The default is the run id the report records;
    two reports in folders of one name and no run id are told apart by their paths."""
    cfg = EvalConfig(n_boot=0, logo=False)
    audio = FeatureSet({k: v for k, v in features.matrices.items() if k[0] == "A"})
    result = [run_evaluation(ModelInfo("aud", "AudioEnc", "audio_encoder"), samples,
                             features=audio, config=cfg)]
    specs = []
    for run_id in ("run-a", "run-b"):
        d = tmp_path / run_id / "evaluate" / "0f" / "report"
        d.mkdir(parents=True)
        write_report(result, lambda n, b, d=d: (d / n).write_bytes(b),
                     runs=[{"run_id": run_id, "pipeline": "madbench"}])
        specs.append(str(d / "report.json"))
    names = [r.model.name for r in compare_runs(specs)]
    assert names == ["AudioEnc [run-a]", "AudioEnc [run-b]"]
    bare = []
    for side in ("x", "y"):
        d = tmp_path / side / "report"
        d.mkdir(parents=True)
        write_report(result, lambda n, b, d=d: (d / n).write_bytes(b))
        bare.append(str(d / "report.json"))
    labels = [r.model.name for r in compare_runs(bare)]
    assert len(set(labels)) == 2 and all(f"({s})" in n for s, n in zip(bare, labels))
