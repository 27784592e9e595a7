"""Bring-your-own-model: the CLI end to end, and a clear error for each bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from madbench_common.cli import main
from madbench_common.errors import ConfigError
from madbench_common.eval.byom import run_byom
from madbench_common.eval.suite import EvalConfig
from madbench_common.manifest import write_manifest_bytes
from madbench_common.rows import SampleRow

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
    assert "| mine | heads | balanced | A |" in printed and "report.html" in printed
    tables = json.loads((out / "report.json").read_text())["tables"]
    binary = next(r for r in tables["tasks"] if r["task"] == "binary")
    assert 0.6 < binary["auc"] <= 1.0 and binary["auc_lo"] <= binary["auc"] <= binary["auc_hi"]


def test_cli_eval_scores_csv(files: dict[str, Path]) -> None:
    out = files["dir"] / "scores-report"
    assert main(["eval", "--samples", f"file://{files['samples']}", "--scores",
                 str(files["scores"]), "--out", str(out), "--n-boot", "0"]) == 0
    tables = json.loads((out / "report.json").read_text())["tables"]
    assert {r["head"] for r in tables["tasks"]} == {"direct"}
    assert all(r["cllr"] is not None for r in tables["tasks"])


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
