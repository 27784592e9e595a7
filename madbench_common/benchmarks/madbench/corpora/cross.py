"""Cross-dataset evaluation: heads fitted on one corpus's training split, scored on another's
test split, with the tasks both corpora define (:func:`cross_evaluate`).

Features come from a registry encoder run in-process on both corpora
(:func:`corpus_features`: audio decoded with FFmpeg at 16 kHz, video frames where the mode
is A-V), cached by the media's sha256, or from the user's feature files. The report prints
the ``cross`` record as its own table.
"""

from __future__ import annotations

import hashlib
import io
import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from madbench_common.benchmarks.madbench.corpora.base import Corpus
from madbench_common.benchmarks.madbench.eval.fit import FeatureSet
from madbench_common.benchmarks.madbench.eval.suite import (
    EvalConfig,
    EvalResult,
    ModelInfo,
    run_evaluation,
)
from madbench_common.core.errors import ConfigError
from madbench_common.media.audio import decode_audio
from madbench_common.media.mux import sample_frames
from madbench_common.models.registry import load_model

__all__ = ["ALL_TASKS", "corpus_features", "cross_evaluate", "direction_tasks"]

log = logging.getLogger("madbench")
ALL_TASKS = ("binary", "fourway", "speech", "env", "scene")


def direction_tasks(train: Corpus, test: Corpus) -> tuple[list[str], dict[str, str]]:
    """(tasks both corpora define, {task left out: why})."""
    tasks, missing = [], {}
    for task in ALL_TASKS:
        lack = [c.name for c in (train, test) if task not in c.tasks]
        if lack:
            missing[task] = "not defined by " + " and ".join(dict.fromkeys(lack))
        else:
            tasks.append(task)
    return tasks, missing


def _rows(corpus: Corpus, splits: tuple[str, ...], protocol: str) -> pd.DataFrame:
    ok = corpus.ok
    if corpus.name == "madbench":
        ok = ok[ok["protocol"] == protocol]
        if ok.empty:
            raise ConfigError(f"{corpus.root}: no samples of protocol {protocol!r}")
    part = ok[ok["split"].isin(splits)].copy()
    part["sample_id"] = corpus.name + ":" + part["sample_id"].astype(str)
    part["clip_id"] = corpus.name + ":" + part["clip_id"].astype(str)
    return part


def _decode(data: bytes, suffix: str) -> np.ndarray:
    with tempfile.TemporaryDirectory(prefix="madbench-corpus-") as tmp:
        path = Path(tmp) / f"media{suffix}"
        path.write_bytes(data)
        return decode_audio(path, 16000)


def _frames(data: bytes, suffix: str) -> tuple[Any, float]:
    with tempfile.TemporaryDirectory(prefix="madbench-corpus-") as tmp:
        path = Path(tmp) / f"video{suffix}"
        path.write_bytes(data)
        return sample_frames(path, fps=4.0, size=112, max_frames=64)


def _encode(encoder: Any, corpus: Corpus, row: pd.Series, mode: str) -> np.ndarray:
    audio_path = str(row["audio_path"])
    audio = _decode(corpus.media(audio_path), Path(audio_path).suffix or ".wav")
    kwargs: dict[str, Any] = {"mode": mode, "audio": audio, "sample_rate": 16000}
    if mode == "AV":
        video = str(row["video_path"])
        kwargs["frames"], kwargs["fps"] = _frames(corpus.media(video), Path(video).suffix)
    embed = getattr(encoder, "embed", None)
    vec = embed(**kwargs).vector if embed is not None else encoder.encode(**kwargs)
    return np.asarray(vec, dtype=np.float32).reshape(-1)


def corpus_features(corpus: Corpus, rows: pd.DataFrame, encoder_slug: str, mode: str,
                    cache: Path | None = None) -> FeatureSet:
    """``encoder_slug``'s features of ``rows`` (paired, one mode), cached by media sha256."""
    encoder = load_model(encoder_slug)
    if mode not in encoder.modes:
        raise ConfigError(f"{encoder_slug} has no input mode {mode!r} (it takes {encoder.modes})")
    ids, vectors = [], []
    for _, row in rows.iterrows():
        key = hashlib.sha256(f"{row['audio_path']}|{row.get('video_path', '')}|{mode}"
                             .encode()).hexdigest()
        path = cache / f"{encoder_slug}-{encoder.version}" / mode / f"{key}.npy" if cache else None
        if path is not None and path.is_file():
            vec = np.load(path)
        else:
            try:
                vec = _encode(encoder, corpus, row, mode)
            except (OSError, ValueError) as exc:
                log.warning("%s: %s left out: %s", corpus.name, row["sample_id"], exc)
                continue
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                buf = io.BytesIO()
                np.save(buf, vec)
                path.write_bytes(buf.getvalue())
        ids.append(row["sample_id"])
        vectors.append(vec)
    fs = FeatureSet()
    if ids:
        fs.add(mode, "paired", ids, np.stack(vectors))
    return fs


def _merge(a: FeatureSet, b: FeatureSet, mode: str) -> FeatureSet:
    parts = [fs.matrices[(mode, "paired")] for fs in (a, b) if (mode, "paired") in fs.matrices]
    out = FeatureSet()
    if parts:
        out.add(mode, "paired", np.concatenate([p[0] for p in parts]),
                np.vstack([p[1] for p in parts]))
    return out


def cross_evaluate(train: Corpus, test: Corpus, encoder_slug: str, *, mode: str = "A",
                   protocol: str = "balanced", cache: Path | None = None,
                   config: EvalConfig | None = None,
                   features: tuple[FeatureSet, FeatureSet] | None = None) -> EvalResult:
    """One direction ``train → test``: heads and their validation thresholds from
    ``train``'s ``train`` and ``val`` rows (paper §4.2), scored on ``test``'s ``test`` rows;
    a MADBench run contributes one protocol (``balanced`` by default, so each clip enters
    once). Only the tasks both corpora define are evaluated (:func:`direction_tasks`); the
    result carries a ``cross`` record naming the direction, the tasks evaluated and, for
    each task left out, which side lacks it."""
    if mode == "AV":  # an audio-only side has no frames: refuse, never an empty table
        audio_only = [c for c in (train, test) if c.modality != "AV"]
        if audio_only:
            names = " and ".join(dict.fromkeys(c.name for c in audio_only))
            raise ConfigError(f"--mode AV: {names} ({audio_only[0].root}) is audio-only; "
                              "use --mode A, or corpora with video (madbench, fakeavceleb)")
    tasks, missing = direction_tasks(train, test)
    tasks = [t for t in tasks if t != "scene"]  # only MADBench defines it: never both sides
    missing.setdefault("scene", "scene consistency is defined by MADBench only")
    fit, score = _rows(train, ("train", "val"), protocol), _rows(test, ("test",), protocol)
    for part, corpus, what in ((fit, train, "train/val"), (score, test, "test")):
        if part.empty:
            raise ConfigError(f"{corpus.root}: no {what} rows in {corpus.name}")
    frame = pd.concat([fit, score], ignore_index=True)
    frame["protocol"] = "cross"
    if features is None:
        features = (corpus_features(train, fit, encoder_slug, mode, cache),
                    corpus_features(test, score, encoder_slug, mode, cache))
    fs = _merge(*features, mode)
    cfg = config or EvalConfig()
    cfg = EvalConfig(c=cfg.c, n_boot=cfg.n_boot, seed=cfg.seed, logo=False,
                     score_kind=cfg.score_kind, tasks=tuple(tasks))
    name = f"{encoder_slug} ({train.name} → {test.name})"
    result = run_evaluation(ModelInfo.lookup(encoder_slug, name=name), frame, features=fs,
                            config=cfg)
    result.tables["cross"] = [{"train": train.name, "test": test.name, "tasks": tasks,
                               "unsupported": missing, "protocol": protocol, "mode": mode,
                               "n_train": int((fit["split"] == "train").sum()),
                               "n_val": int((fit["split"] == "val").sum()),
                               "n_test": len(score), "notes": [*train.notes, *test.notes]}]
    return result
