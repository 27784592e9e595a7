"""Bring your own model: evaluate per-sample features or scores from a Parquet/CSV file.

No image runs: the user's file (:func:`load_features`, :func:`load_scores`) is validated
against the samples manifest and fed to the same protocol as the benchmark's own models
(heads for features, direct transfer / zero-shot scoring for scores). Problems are
reported as :class:`ConfigError` naming the file, the count and an example: missing
samples, duplicate ids, NaN or infinite values, constant features or scores.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pandas as pd

from madbench_common.benchmarks.madbench.eval.fit import FeatureSet
from madbench_common.benchmarks.madbench.eval.suite import (
    EvalConfig,
    EvalResult,
    ModelInfo,
    run_evaluation,
)
from madbench_common.benchmarks.madbench.eval.tasks import TASKS, VARIANTS, core_rows
from madbench_common.benchmarks.madbench.rows import SampleRow
from madbench_common.core.errors import ConfigError, ManifestError
from madbench_common.core.manifest import read_manifest_bytes, rows_to_frame

__all__ = ["ByomRun", "load_features", "load_samples", "load_scores", "run_byom"]

_SAMPLE_DEFAULTS = {"protocol": "", "scene_consistent": True, "speech_generator": "",
                    "env_generator": "", "sc_condition": ""}
_KEYS = ["sample_id", "mode", "pairing"]
_SCORE_KEYS = ["sample_id", "task", "mode", "pairing"]
_PROB_COLUMNS = [f"prob_{v}" for v in VARIANTS]


def _read_uri(uri: str) -> bytes:
    parsed = urlparse(uri)
    if parsed.scheme == "s3":
        from madbench_common.core.store import S3Store

        return S3Store(f"s3://{parsed.netloc}").get_bytes(parsed.path.lstrip("/"))
    path = Path(parsed.path if parsed.scheme == "file" else uri)
    if not path.is_file():
        raise ConfigError(f"{uri}: no such file")
    return path.read_bytes()


def _read_table(uri: str) -> pd.DataFrame:
    data = _read_uri(uri)
    if uri.lower().endswith(".csv"):
        return pd.read_csv(io.BytesIO(data), keep_default_na=False, na_values=["", "nan", "NaN"])
    return pd.read_parquet(io.BytesIO(data))


def _example(values: pd.Series | np.ndarray) -> str:
    return repr(str(np.asarray(values)[0]))


def load_samples(uri: str) -> pd.DataFrame:
    """A samples manifest (MADBench Parquet) or a plain table with the sample columns."""
    try:
        frame = rows_to_frame(SampleRow, read_manifest_bytes(SampleRow, _read_uri(uri), uri))
    except ManifestError:
        frame = _read_table(uri)
    missing = {"sample_id", "clip_id", "variant", "split"} - set(frame.columns)
    if missing:
        raise ConfigError(f"{uri}: samples lack columns {sorted(missing)}")
    frame = frame.assign(**{k: frame.get(k, v) for k, v in _SAMPLE_DEFAULTS.items()})
    if "status" in frame:
        frame = frame[frame["status"] == "ok"]
    dup = frame["sample_id"][frame["sample_id"].duplicated()]
    if len(dup):
        raise ConfigError(f"{uri}: {len(dup)} duplicate sample_id values, e.g. {_example(dup)}")
    return frame.reset_index(drop=True)


def _with_keys(frame: pd.DataFrame, where: str, keys: list[str] = _KEYS) -> pd.DataFrame:
    if "sample_id" not in frame:
        raise ConfigError(f"{where}: no sample_id column")
    frame = frame.assign(mode=frame.get("mode", "A"), pairing=frame.get("pairing", "paired"))
    if "task" in keys:
        task = frame.get("task", pd.Series("binary", index=frame.index))
        frame = frame.assign(task=task.fillna("").astype(str).replace("", "binary"))
    frame["sample_id"] = frame["sample_id"].astype(str)
    dup = frame[frame.duplicated(keys)]
    if len(dup):
        raise ConfigError(f"{where}: {len(dup)} duplicate ({', '.join(keys)}) rows, "
                          f"e.g. {_example(dup['sample_id'])}")
    return frame


def _matrix(frame: pd.DataFrame, where: str) -> np.ndarray:
    if "features" in frame:
        try:
            return np.stack([np.asarray(v, dtype=np.float64) for v in frame["features"]])
        except ValueError as exc:
            raise ConfigError(f"{where}: feature vectors differ in length ({exc})") from None
    numeric = frame.drop(columns=_KEYS).select_dtypes("number")
    if numeric.shape[1] == 0:
        raise ConfigError(f"{where}: no 'features' column and no numeric feature columns")
    return numeric.to_numpy(np.float64)


def _check_matrix(x: np.ndarray, ids: pd.Series, where: str, drop_constant: bool) -> np.ndarray:
    bad = ~np.isfinite(x).all(axis=1)
    if bad.any():
        raise ConfigError(f"{where}: {int(bad.sum())} rows with NaN or inf features, "
                          f"e.g. {_example(ids[bad])}")
    constant = np.ptp(x, axis=0) == 0
    if constant.all():
        raise ConfigError(f"{where}: every feature is constant; nothing to learn from")
    if constant.any() and not drop_constant:
        raise ConfigError(f"{where}: {int(constant.sum())} constant feature columns "
                          f"(e.g. index {int(np.flatnonzero(constant)[0])}); "
                          "pass --drop-constant to drop them")
    return x[:, ~constant]


def _check_known(samples: pd.DataFrame, frame: pd.DataFrame, where: str) -> None:
    known = set(samples["sample_id"].astype(str))
    extra = frame.loc[~frame["sample_id"].isin(known), "sample_id"]
    if len(extra):
        raise ConfigError(f"{where}: {len(extra)} rows name samples not in the manifest, "
                          f"e.g. {_example(extra)}")


def _lacking(need: pd.Series, part: pd.DataFrame, where: str, what: str) -> None:
    lacking = sorted(set(need.astype(str)) - set(part["sample_id"]))
    if lacking:
        raise ConfigError(f"{where}: {len(lacking)} samples have no {what} rows, "
                          f"e.g. {lacking[0]!r}")


def _check_coverage(samples: pd.DataFrame, frame: pd.DataFrame, where: str) -> None:
    _check_known(samples, frame, where)
    shuffled = ~core_rows(samples) & (samples["split"] == "test")
    for (mode, pairing), part in frame.groupby(["mode", "pairing"]):
        need = samples["sample_id"] if pairing == "paired" else samples.loc[shuffled, "sample_id"]
        _lacking(need, part, where, f"{mode}/{pairing}")


def _check_score_coverage(samples: pd.DataFrame, frame: pd.DataFrame, where: str) -> None:
    _check_known(samples, frame, where)
    unknown = sorted(set(frame["task"]) - set(TASKS))
    if unknown:
        raise ConfigError(f"{where}: unknown task {unknown[0]!r}; expected one of {tuple(TASKS)}")
    test = samples[samples["split"] == "test"]
    for (task, mode, pairing), part in frame.groupby(["task", "mode", "pairing"]):
        mask, _ = TASKS[str(task)].select(test)
        _lacking(test.loc[mask, "sample_id"], part, where, f"{task} {mode}/{pairing}")


def load_features(uri: str, samples: pd.DataFrame, drop_constant: bool = False) -> FeatureSet:
    """Validated feature matrices per (mode, pairing).

    Columns: ``sample_id``, optional ``mode`` (default ``A``) and ``pairing`` (default
    ``paired``), and either a list column ``features`` or numeric columns. Every sample
    needs a paired row per mode; ``shuffled`` rows (another clip's video, paper §5.3) are
    read only for scene-consistency test samples."""
    frame = _with_keys(_read_table(uri), uri)
    _check_coverage(samples, frame, uri)
    fs = FeatureSet()
    for (mode, pairing), part in frame.groupby(["mode", "pairing"]):
        where = f"{uri} [{mode}/{pairing}]"
        x = _check_matrix(_matrix(part, where), part["sample_id"], where, drop_constant)
        fs.add(str(mode), str(pairing), part["sample_id"], x)
    return fs


def _probs(frame: pd.DataFrame) -> pd.DataFrame:
    if "probs" not in frame and set(_PROB_COLUMNS) <= set(frame.columns):
        frame = frame.assign(probs=list(frame[_PROB_COLUMNS].to_numpy(np.float64)))
    return frame


def _check_scores(frame: pd.DataFrame, where: str) -> np.ndarray:
    score = pd.to_numeric(frame.get("score", pd.Series(np.nan, index=frame.index)),
                          errors="coerce").to_numpy(np.float64)
    unscored = ~np.isfinite(score) & (frame["task"] != "fourway").to_numpy()
    parsed = frame.get("parsed", pd.Series("", index=frame.index)).fillna("").astype(str)
    excused = (parsed != "").to_numpy() | frame.get(
        "excluded", pd.Series(False, index=frame.index)).fillna(False).astype(bool).to_numpy()
    bad = unscored & ~excused
    if bad.any():
        raise ConfigError(f"{where}: {int(bad.sum())} NaN, inf or non-numeric scores without "
                          f"a parsed answer, e.g. {_example(frame['sample_id'][bad])}")
    finite = score[np.isfinite(score)]
    if finite.size and np.ptp(finite) == 0 and not (frame["task"] == "fourway").any():
        raise ConfigError(f"{where}: every score is the same; a constant score ranks nothing")
    return score


def load_scores(uri: str, samples: pd.DataFrame) -> pd.DataFrame:
    """Validated per-sample, per-task scores.

    One row per sample and task: ``sample_id``, ``score`` (P(positive), or any score where
    higher = positive: fake for ``binary``/``speech``/``env``, scene-inconsistent for
    ``scene``), optional ``task`` (default ``binary``), ``mode``, ``pairing``, ``probs``
    (four-way R, S, E, Q probabilities: a list column in Parquet, or columns ``prob_R``,
    ``prob_S``, ``prob_E``, ``prob_Q`` in CSV), ``parsed`` (the parsed answer:
    ``fake``/``real``, ``inconsistent``/``consistent``, R/S/E/Q, ``refusal``,
    ``unparsed``) and ``excluded``. Every test sample of a task needs a row of it (train
    and val rows are optional).
    """
    frame = _probs(_with_keys(_read_table(uri), uri, _SCORE_KEYS))
    if "score" not in frame and "probs" not in frame:
        raise ConfigError(f"{uri}: no 'score' column (nor four-way 'probs')")
    _check_score_coverage(samples, frame, uri)
    return frame.assign(score=_check_scores(frame, uri))


@dataclass(frozen=True)
class ByomRun:
    """What :func:`run_byom` produced."""

    result: EvalResult
    out_dir: Path
    files: list[str]


def run_byom(samples_uri: str, *, features: str | None = None, scores: str | None = None,
             out: str | Path | None = None, model: str = "", group: str = "",
             config: EvalConfig | None = None, drop_constant: bool = False) -> ByomRun:
    """Validate the user's file, run the protocol, write the report to ``out``."""
    from madbench_common.benchmarks.madbench.eval.report import write_report

    if (features is None) == (scores is None):
        raise ConfigError("give exactly one of --features FILE or --scores FILE")
    samples = load_samples(samples_uri)
    name = model or Path(str(features or scores)).stem
    fs = load_features(features, samples, drop_constant) if features else None
    sc = load_scores(scores, samples) if scores else None
    try:
        info = ModelInfo.lookup(name, group=group)
        result = run_evaluation(info, samples, features=fs, scores=sc, config=config)
    except ValueError as exc:
        raise ConfigError(f"{features or scores}: {exc}") from None
    out_dir = Path(out or f"madbench-eval-{name}")
    out_dir.mkdir(parents=True, exist_ok=True)
    files = write_report([result], lambda n, b: (out_dir / n).write_bytes(b))
    return ByomRun(result, out_dir, files)
