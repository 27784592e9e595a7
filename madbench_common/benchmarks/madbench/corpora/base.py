"""What every corpus loader returns: a samples table in the evaluation's columns, and its tasks.

A loader reads a dataset in its **own** release layout (protocol or metadata files, audio
and video where the release puts them) and maps each trial to the columns the evaluation
reads (:mod:`madbench_common.benchmarks.madbench.eval.tasks`): ``sample_id``, ``clip_id`` (the
bootstrap's
resampling unit), ``variant`` (R/S/E/Q), ``split`` (train/val/test), ``protocol`` (the
corpus name), ``audio_path`` (and ``video_path`` for audio-visual corpora), the generator
or attack (``speech_generator``) and the corpus's own label (``label_source``).

Labels are mapped to R/S/E/Q only as far as the dataset defines them
(:attr:`Corpus.tasks`); a binary-only corpus encodes "spoof" as variant ``S`` for the
evaluation's machinery, and every task it does not define is left out of any evaluation
on it. A malformed protocol line or a missing media file never stops the load: the row
is kept with ``status="rejected"``, a reason code (``bad_protocol_line``, ``missing``,
``bad_label``) and a detail naming the file and line.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from madbench_common.core.errors import ConfigError

__all__ = ["COLUMNS", "Corpus", "grouped_split", "rejected", "require"]

log = logging.getLogger("madbench")
COLUMNS = ("sample_id", "clip_id", "variant", "split", "protocol", "audio_path", "video_path",
           "speech_generator", "env_generator", "speech_fake", "env_fake", "scene_consistent",
           "label_source", "speaker", "status", "reason", "detail")


@dataclass
class Corpus:
    """A loaded corpus: its samples (``status`` ok or rejected) and what it defines."""

    name: str
    root: str
    frame: pd.DataFrame
    tasks: tuple[str, ...]
    """Evaluation tasks whose labels the dataset defines (``binary`` always)."""
    modality: str = "A"
    """``A`` (audio files) or ``AV`` (videos with their audio)."""
    notes: list[str] = field(default_factory=list)
    """How labels and splits were derived, for the report."""
    reader: Callable[[str], bytes] | None = None
    """Reads a row's ``audio_path`` / ``video_path`` (default: a local file)."""

    def media(self, path: str) -> bytes:
        """The bytes of a row's media file."""
        if self.reader is not None:
            return self.reader(path)
        return Path(path).read_bytes()

    @property
    def ok(self) -> pd.DataFrame:
        return self.frame[self.frame["status"] == "ok"].reset_index(drop=True)

    def counts(self) -> dict[str, Any]:
        ok = self.ok
        return {"rows": len(self.frame), "rejected": int((self.frame["status"] != "ok").sum()),
                "by_split": {s: int((ok["split"] == s).sum()) for s in ("train", "val", "test")},
                "fake": int((ok["variant"] != "R").sum()), "real": int((ok["variant"] == "R")
                                                                       .sum())}


def require(path: Path, what: str) -> Path:
    """``path`` if it exists, else a :class:`ConfigError` naming it and what it should be."""
    if not path.exists():
        raise ConfigError(f"{path}: missing ({what})")
    return path


def rejected(sample_id: str, reason: str, detail: str, **extra: Any) -> dict[str, Any]:
    """A quarantined row (logged once)."""
    log.warning("corpus: rejected %s (%s): %s", sample_id, reason, detail)
    return {"sample_id": sample_id, "clip_id": sample_id, "variant": "R", "split": "",
            "status": "rejected", "reason": reason, "detail": detail, **extra}


def grouped_split(key: str, seed: str, ratios: tuple[float, float, float] = (0.7, 0.1, 0.2)
                  ) -> str:
    """A deterministic train/val/test split by group (speaker or identity), from a hash:
    for corpora that define none. The same group always lands in the same split."""
    u = int.from_bytes(hashlib.sha256(f"{seed}/{key}".encode()).digest()[:8], "big") / 2**64
    if u < ratios[0]:
        return "train"
    return "val" if u < ratios[0] + ratios[1] else "test"


def frame_of(rows: list[dict[str, Any]], protocol: str) -> pd.DataFrame:
    """Rows → a samples table with every column (defaults filled), the corpus as protocol."""
    defaults: dict[str, Any] = {"video_path": "", "speech_generator": "", "env_generator": "",
                                "env_fake": False, "scene_consistent": True,
                                "label_source": "", "speaker": "", "status": "ok",
                                "reason": "", "detail": "", "audio_path": ""}
    frame = pd.DataFrame([defaults | r for r in rows])
    extra = [c for c in frame.columns if c not in COLUMNS]
    frame = frame.reindex(columns=[*COLUMNS, *extra])
    frame["protocol"] = protocol
    frame["speech_fake"] = frame["variant"].isin(["S", "Q"])
    return frame
