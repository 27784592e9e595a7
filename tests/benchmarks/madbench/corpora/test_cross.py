"""Cross-dataset evaluation in both directions, from the CLI, on the layout fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from madbench_common.benchmarks.madbench.corpora import load_corpus
from madbench_common.benchmarks.madbench.corpora.cross import cross_evaluate, direction_tasks
from madbench_common.benchmarks.madbench.eval.suite import EvalConfig
from madbench_common.cli import main
from madbench_common.core.store import FileStore, RunStore
from tests.benchmarks.madbench.eval.test_feature_stage import _put_samples

from . import layouts


def _report(out: Path, direction: str) -> dict:
    return json.loads((out / direction / "report.json").read_text())


def test_asvspoof_and_in_the_wild_both_directions(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    la = layouts.asvspoof2019_la(tmp_path / "a", {"train": 24, "dev": 8, "eval": 16})
    itw = layouts.in_the_wild(tmp_path / "w", 60)
    out = tmp_path / "out"
    assert main(["eval", "--train", f"asvspoof2019_la:{la}", "--test", f"in_the_wild:{itw}",
                 "--both-directions", "--encoder", "ref-lfcc-stats", "--n-boot", "0",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "asvspoof2019_la → in_the_wild: tasks binary" in printed
    assert "in_the_wild → asvspoof2019_la: tasks binary" in printed
    for direction in ("asvspoof2019_la-to-in_the_wild", "in_the_wild-to-asvspoof2019_la"):
        report = _report(out, direction)
        (model,) = report["models"]
        cross = model["tables"]["cross"][0]
        assert cross["tasks"] == ["binary"]
        assert set(cross["unsupported"]) == {"fourway", "speech", "env", "scene"}
        auc = next(r["auc"] for r in model["tables"]["tasks"] if r["task"] == "binary")
        assert auc > 0.9  # the fixtures' spoofs are buzzy tones in both corpora
        assert {r["task"] for r in model["tables"]["tasks"]} == {"binary"}
        md = (out / direction / "report.md").read_text()
        assert "## Cross-dataset protocol: tasks each direction supports" in md
    assert (out / ".features").is_dir()  # features cached for a rerun


@pytest.fixture(scope="module")
def madbench_run(tmp_path_factory: pytest.TempPathFactory) -> str:
    store = tmp_path_factory.mktemp("store")
    _put_samples(RunStore(FileStore(store), "r1"), tmp_path_factory.mktemp("media"))
    return f"madbench:{store}/r1"


def test_madbench_and_fakeavceleb_both_directions(madbench_run: str, tmp_path: Path) -> None:
    favc = load_corpus(f"fakeavceleb:{layouts.fakeavceleb(tmp_path, 12)}")
    mb = load_corpus(madbench_run)
    tasks, missing = direction_tasks(mb, favc)
    assert tasks == ["binary", "speech"] and "env" in missing and "fourway" in missing
    cfg = EvalConfig(n_boot=0)
    forward = cross_evaluate(mb, favc, "ref-av-stats", mode="AV", config=cfg,
                             cache=tmp_path / "c")
    backward = cross_evaluate(favc, mb, "ref-av-stats", mode="AV", config=cfg,
                              cache=tmp_path / "c")
    for result, train, test in ((forward, "madbench", "fakeavceleb"),
                                (backward, "fakeavceleb", "madbench")):
        cross = result.tables["cross"][0]
        assert (cross["train"], cross["test"], cross["tasks"]) == (train, test,
                                                                   ["binary", "speech"])
        assert {r["task"] for r in result.tables["tasks"]} <= {"binary", "speech"}
        assert all(r["protocol"] == "cross" for r in result.tables["tasks"])
    # the MADBench side contributes one protocol: each clip once
    assert backward.tables["cross"][0]["n_test"] == 4 * 4  # 4 test clips x R/S/E/Q
