"""Bring-your-own-model: the CLI end to end, and a clear error for each bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval.byom import run_byom
from madbench_common.benchmarks.madbench.eval.suite import EvalConfig
from madbench_common.benchmarks.madbench.rows import SampleRow
from madbench_common.cli import main
from madbench_common.core.errors import ConfigError
from madbench_common.core.manifest import write_manifest_bytes

from .eval_synth import make_samples

CFG = EvalConfig(n_boot=50, logo=False)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    df = make_samples(80)
    rows = [SampleRow(**r) for r in df.to_dict("records")]
    (tmp_path / "samples.parquet").write_bytes(write_manifest_bytes(SampleRow, rows))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(len(df), 6))
    x[:, 0] += df["speech_fake"].to_numpy() + df["env_fake"].to_numpy()
    feats = pd.DataFrame({"sample_id": df["sample_id"], "features": list(x)})
    feats.to_parquet(tmp_path / "feats.parquet")
    scores = pd.DataFrame({"sample_id": df["sample_id"], "score": 1 / (1 + np.exp(-x[:, 0]))})
    scores.to_csv(tmp_path / "scores.csv", index=False)
    return {"samples": tmp_path / "samples.parquet", "features": tmp_path / "feats.parquet",
            "scores": tmp_path / "scores.csv", "dir": tmp_path}


def test_cli_eval_features(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = files["dir"] / "report"
    code = main(["eval", "--samples", str(files["samples"]), "--features", str(files["features"]),
                 "--out", str(out), "--n-boot", "20", "--model", "mine"])
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("## Table 2") and "| Balanced | Mean |" in printed
    assert "| mine | A | H_bin |" in printed and "report.html" in printed
    tables = json.loads((out / "report.json").read_text())["models"][0]["tables"]
    binary = next(r for r in tables["tasks"] if r["task"] == "binary")
    assert 0.6 < binary["auc"] <= 1.0 and binary["auc_lo"] <= binary["auc"] <= binary["auc_hi"]


def test_cli_eval_scores_csv(files: dict[str, Path]) -> None:
    out = files["dir"] / "scores-report"
    assert main(["eval", "--samples", f"file://{files['samples']}", "--scores",
                 str(files["scores"]), "--out", str(out), "--n-boot", "0"]) == 0
    tables = json.loads((out / "report.json").read_text())["models"][0]["tables"]
    assert {(r["source"], r["task"]) for r in tables["tasks"]} == {("native", "binary")}
    assert all(r["cllr"] is not None for r in tables["tasks"])


def test_cli_eval_per_task_scores(files: dict[str, Path]) -> None:
    """A scores file with a task column: each task from its own rows, four-way from probs."""
    df = make_samples(80)
    test = df[df["split"] == "test"]
    v = test["variant"].to_numpy()
    rows = pd.concat([
        pd.DataFrame({"sample_id": test["sample_id"], "task": "env",
                      "score": np.where(np.isin(v, ["E", "Q"]), 0.8, 0.3)}),
        pd.DataFrame({"sample_id": test["sample_id"], "task": "fourway",
                      **{f"prob_{c}": np.where(v == c, 0.7, 0.1) for c in "RSEQ"}}),
    ])
    rows.loc[rows.index[:3], "parsed"] = "refusal"
    rows.loc[rows.index[:3], "score"] = np.nan
    rows.to_csv(files["dir"] / "tasks.csv", index=False)
    out = files["dir"] / "task-report"
    assert main(["eval", "--samples", str(files["samples"]), "--scores",
                 str(files["dir"] / "tasks.csv"), "--out", str(out), "--n-boot", "0",
                 "--model", "omni-y", "--group", "omni"]) == 0
    data = json.loads((out / "report.json").read_text())["models"][0]
    assert data["group"] == "omni"
    recs = {r["task"]: r for r in data["tables"]["tasks"]}
    assert set(recs) == {"env", "fourway"}  # binary and speech are absent, not borrowed
    assert recs["env"]["auc"] == 1.0 and recs["env"]["n_excluded"] == 3
    assert recs["fourway"]["acc"] == 1.0
    md = (out / "report.md").read_text()
    assert "— No binary answers from this model in the run (never filled from another task): " \
        "omni-y." in md


def test_scores_must_cover_the_test_rows_of_their_task(files: dict[str, Path]) -> None:
    df = make_samples(80)
    test = df[df["split"] == "test"]
    env = pd.DataFrame({"sample_id": test["sample_id"].iloc[1:], "task": "env", "score": 0.5})
    env.iloc[0, 2] = 0.7
    assert "samples have no env A/paired rows" in _bad(files, env, "scores")
    assert "unknown task 'bogus'" in _bad(files, env.assign(task="bogus"), "scores")


def _bad(files: dict[str, Path], frame: pd.DataFrame, kind: str = "features") -> str:
    path = files["dir"] / f"bad.{'parquet' if kind == 'features' else 'csv'}"
    frame.to_parquet(path) if kind == "features" else frame.to_csv(path, index=False)
    with pytest.raises(ConfigError) as err:
        run_byom(str(files["samples"]), **{kind: str(path)}, out=files["dir"] / "x", config=CFG)
    return str(err.value)


def test_missing_samples(files: dict[str, Path]) -> None:
    feats = pd.read_parquet(files["features"])
    assert "samples have no A/paired rows" in _bad(files, feats.iloc[1:])
    extra = pd.concat([feats, feats.iloc[:1].assign(sample_id="ghost")])
    assert "not in the manifest, e.g. 'ghost'" in _bad(files, extra)


def test_duplicate_ids(files: dict[str, Path]) -> None:
    feats = pd.read_parquet(files["features"])
    assert "duplicate (sample_id, mode, pairing)" in _bad(files, pd.concat([feats, feats.iloc[:2]]))


def test_nan_and_constant_features(files: dict[str, Path]) -> None:
    feats = pd.read_parquet(files["features"])
    x = np.stack(feats["features"])
    x[3, 2] = np.nan
    assert "1 rows with NaN or inf" in _bad(files, feats.assign(features=list(x)))
    x[3, 2] = 0.0
    x[:, 4] = 7.0
    assert "constant feature columns (e.g. index 4)" in _bad(files, feats.assign(features=list(x)))
    assert "every feature is constant" in _bad(files, feats.assign(features=list(x * 0)))


def test_bad_scores(files: dict[str, Path]) -> None:
    scores = pd.read_csv(files["scores"])
    assert "every score is the same" in _bad(files, scores.assign(score=0.5), "scores")
    nan = scores.copy()
    nan.loc[0, "score"] = np.nan
    assert "NaN, inf or non-numeric" in _bad(files, nan, "scores")


def test_duplicate_samples_in_manifest(tmp_path: Path) -> None:
    df = make_samples(10)
    pd.concat([df, df.iloc[:1]]).to_parquet(tmp_path / "s.parquet")
    with pytest.raises(ConfigError, match="1 duplicate sample_id"):
        run_byom(str(tmp_path / "s.parquet"), scores="x.csv", config=CFG)
