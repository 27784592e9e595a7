"""What every corpus loader returns: a samples table in the evaluation's columns, and its tasks.

A loader reads a dataset in its **own** release layout and maps each trial to the columns
the evaluation reads (:mod:`madbench_common.benchmarks.madbench.eval.tasks`):
``sample_id``, ``clip_id`` (the bootstrap's resampling unit), ``variant`` (R/S/E/Q),
``split``, ``protocol`` (the corpus name), ``audio_path`` (and ``video_path``), the
generator or attack (``speech_generator``) and the corpus's own label (``label_source``).
Bad rows are kept as rejected (:func:`rejected`); the log gets one line per reason
(:func:`log_rejections`; ``-v`` lists every row, logger ``madbench.corpus``).
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from madbench_common.core.errors import ConfigError

__all__ = ["COLUMNS", "Corpus", "grouped_split", "log_rejections", "rejected", "require"]

log = logging.getLogger("madbench")
rows_log = logging.getLogger("madbench.corpus")
"""Each rejected row, at DEBUG: shown with ``-v`` (the CLI enables it); the default log has
one summary line per reason (:func:`log_rejections`)."""
COLUMNS = ("sample_id", "clip_id", "variant", "split", "protocol", "audio_path", "video_path",
           "speech_generator", "env_generator", "speech_fake", "env_fake", "scene_consistent",
           "label_source", "speaker", "status", "reason", "detail")


@dataclass
class Corpus:
    """A loaded corpus: its samples (``status`` ok or rejected) and what it defines.

    Labels are mapped to R/S/E/Q only as far as the dataset defines them (:attr:`tasks`); a
    binary-only corpus encodes "spoof" as variant ``S`` for the evaluation's machinery, and
    every task it does not define is left out of any evaluation on it."""

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
    """A quarantined row (summed up per reason by :func:`log_rejections`).

    A malformed protocol line or a missing media file never stops the load: the row is kept
    with ``status="rejected"``, a reason code (``bad_protocol_line``, ``missing``,
    ``bad_label``, ``duplicate``: a trial whose id an earlier line already gave) and a
    detail naming the file and line."""
    return {"sample_id": sample_id, "clip_id": sample_id, "variant": "R", "split": "",
            "status": "rejected", "reason": reason, "detail": detail, **extra}


def log_rejections(corpus: Corpus) -> None:
    """One warning per reason (its count and first row's detail), however many rows it
    quarantined (20,000 missing files were 80,000 log lines); every row at DEBUG on
    ``madbench.corpus`` (``-v``)."""
    bad = corpus.frame[corpus.frame["status"] != "ok"]
    if bad.empty:
        return
    for sid, reason, detail in zip(bad["sample_id"], bad["reason"], bad["detail"]):
        rows_log.debug("%s: rejected %s (%s): %s", corpus.name, sid, reason, detail)
    counts = Counter(bad["reason"])
    for reason, n in sorted(counts.items()):
        first = bad[bad["reason"] == reason]["detail"].iloc[0]
        log.warning("%s: %d row%s rejected (%s), first: %s%s", corpus.name, n,
                    "" if n == 1 else "s", reason, first,
                    "; -v lists each" if n > 1 else "")


def grouped_split(key: str, seed: str, ratios: tuple[float, float, float] = (0.7, 0.1, 0.2)
                  ) -> str:
    """A deterministic train/val/test split by group (speaker or identity), from a hash:
    for corpora that define none. The same group always lands in the same split."""
    u = int.from_bytes(hashlib.sha256(f"{seed}/{key}".encode()).digest()[:8], "big") / 2**64
    if u < ratios[0]:
        return "train"
    return "val" if u < ratios[0] + ratios[1] else "test"


def quarantine_duplicates(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows whose ``sample_id`` an earlier row already has (a repeated protocol or
    metadata line) → quarantined as ``duplicate``, naming both lines. The first is kept;
    a table of unique ids is what the evaluation indexes (a repeat was a pandas
    ``InvalidIndexError``). A row's ``_where`` (file:line) is dropped here."""
    first: dict[str, str] = {}
    out = []
    for row in rows:
        where = str(row.pop("_where", "") or row.get("detail", "").split(": ")[0])
        sid = str(row["sample_id"])
        if sid in first:
            extra = {k: row[k] for k in ("split",) if k in row}
            out.append(rejected(sid, "duplicate", f"{where}: repeats trial {sid} of "
                                f"{first[sid]}", **extra))
            continue
        first[sid] = where
        out.append(row)
    return out


def frame_of(rows: list[dict[str, Any]], protocol: str) -> pd.DataFrame:
    """Rows → a samples table with every column (defaults filled), the corpus as protocol;
    repeated trials quarantined (:func:`quarantine_duplicates`)."""
    defaults: dict[str, Any] = {"video_path": "", "speech_generator": "", "env_generator": "",
                                "env_fake": False, "scene_consistent": True,
                                "label_source": "", "speaker": "", "status": "ok",
                                "reason": "", "detail": "", "audio_path": ""}
    frame = pd.DataFrame([defaults | r for r in quarantine_duplicates(rows)])
    extra = [c for c in frame.columns if c not in COLUMNS]
    frame = frame.reindex(columns=[*COLUMNS, *extra])
    frame["protocol"] = protocol
    frame["speech_fake"] = frame["variant"].isin(["S", "Q"])
    return frame
