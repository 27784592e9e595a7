"""In-the-Wild (Müller et al., 2022) and FakeAVCeleb v1.2 in their release layouts.

Each loader's docstring gives its release layout, how its labels map to MADBench's and
how it is split (:func:`load_in_the_wild`, :func:`load_fakeavceleb`).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from madbench_common.benchmarks.madbench.corpora.base import (
    Corpus,
    frame_of,
    grouped_split,
    rejected,
    require,
)
from madbench_common.core.errors import ConfigError

__all__ = ["FAKEAVCELEB_SPEECH_GENERATOR", "FAKEAVCELEB_TYPES", "load_fakeavceleb",
           "load_in_the_wild"]

_ITW_LABELS = {"bona-fide": "R", "spoof": "S"}
FAKEAVCELEB_TYPES = {"RealVideo-RealAudio": ("R", False), "RealVideo-FakeAudio": ("S", False),
                     "FakeVideo-RealAudio": ("R", True), "FakeVideo-FakeAudio": ("S", True)}
"""type → (variant from the audio, whether the video is fake)."""
FAKEAVCELEB_SPEECH_GENERATOR = "rtvc"
"""The voice cloner behind every fake audio track of FakeAVCeleb (SV2TTS, Real-Time Voice
Cloning): the speech generator of ``FakeVideo-FakeAudio`` rows, whose ``method`` names
the face method."""


def load_in_the_wild(root: str | Path) -> Corpus:
    """In-the-Wild from ``meta.csv`` (release layout ``release_in_the_wild/``).

    ``meta.csv`` has the header ``file,speaker,label`` (label ``bona-fide`` or ``spoof``)
    beside the audio files (e.g. ``0.wav``). Binary-only (bona fide vs spoof of
    celebrities' and politicians' speech). The release has no splits; it is a test set in
    the literature. For training on it, speakers are split 7:1:2 by a hash of the speaker
    name (no speaker spans two splits; MADBench's choice, the dataset is silent). Every
    file is its own bootstrap unit.
    """
    base = Path(root)
    if not (base / "meta.csv").is_file() and (base / "release_in_the_wild").is_dir():
        base = base / "release_in_the_wild"
    meta = require(base / "meta.csv", "In-the-Wild's metadata (file,speaker,label)")
    with meta.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        if not reader.fieldnames or not {"file", "speaker", "label"} <= set(reader.fieldnames):
            raise ConfigError(f"{meta}: expected the header file,speaker,label")
        rows = [_itw_row(base, r, f"{meta}:{no}") for no, r in enumerate(reader, 2)]
    return Corpus("in_the_wild", str(base), frame_of(rows, "in_the_wild"), ("binary",),
                  notes=["In-the-Wild: bona fide vs spoof only (binary task); no official "
                         "split: speakers split 7:1:2 by a hash of their name."])


def _itw_row(base: Path, r: dict[str, str], where: str) -> dict[str, Any]:
    name, label = (r.get("file") or "").strip(), (r.get("label") or "").strip()
    sid = f"itw/{name}"
    if not name:
        return rejected(where, "bad_protocol_line", f"{where}: no file name")
    if label not in _ITW_LABELS:
        return rejected(sid, "bad_label", f"{where}: label {label!r} is not bona-fide/spoof")
    speaker = (r.get("speaker") or "").strip()
    split = grouped_split(speaker, "in_the_wild")
    if not (base / name).is_file():
        return rejected(sid, "missing", f"{where}: {base / name} does not exist", split=split)
    return {"sample_id": sid, "clip_id": sid, "variant": _ITW_LABELS[label], "split": split,
            "audio_path": str(base / name), "speaker": speaker, "label_source": label,
            "_where": where}


def load_fakeavceleb(root: str | Path, video: str = "real") -> Corpus:
    """FakeAVCeleb v1.2 from ``meta_data.csv`` (``FakeAVCeleb_v1.2/`` or the folder holding it).

    Layout::

        meta_data.csv   header ``source,target1,target2,method,category,type,race,gender,path,``
                        (``path`` holds the file name and the tenth, unnamed column its
                        folder, ``FakeAVCeleb/<type>/<race>/<gender>/<source>``)
        <type>/<race>/<gender>/<source>/<file>.mp4

    ``type`` is one of ``RealVideo-RealAudio``, ``RealVideo-FakeAudio``,
    ``FakeVideo-RealAudio``, ``FakeVideo-FakeAudio``. ``method`` names what made the row's
    fake: for ``RealVideo-FakeAudio`` the voice cloner (``rtvc``), for the fake-video types
    the face method (``faceswap``, ``fsgan``, ``wav2lip`` and combinations such as
    ``faceswap-wav2lip``). Every fake audio track of the dataset is made by one voice
    cloner, Real-Time Voice Cloning (SV2TTS, ``rtvc``; Khalid et al. 2021,
    arXiv:2108.05080), so a fake-audio row's speech generator is ``rtvc`` (``method`` of a
    ``RealVideo-FakeAudio`` row, :data:`FAKEAVCELEB_SPEECH_GENERATOR` for a
    ``FakeVideo-FakeAudio`` one), never the face method, which goes to ``video_generator``.

    Labels as far as MADBench's go: real audio → R, fake audio → S (fake speech); the
    binary and speech tasks are evaluated; environment, four-way and scene consistency
    are not (it defines no environment manipulation). MADBench's videos are authentic, so
    by default only the two real-video types are kept (``video="real"``: RVRA vs RVFA);
    ``video="all"`` keeps the fake-video types too, labelled by their audio. No official
    split: source identities are split 7:1:2 by a hash (MADBench's choice). A source video
    and every fake made from it (``<source>/<video number>``) form one bootstrap unit.
    """
    if video not in ("real", "all"):
        raise ConfigError(f"FakeAVCeleb video={video!r}: expected 'real' or 'all'")
    base = Path(root)
    if not (base / "meta_data.csv").is_file():  # the parent of the release folder
        inner = [base / n for n in ("FakeAVCeleb_v1.2", "FakeAVCeleb")
                 if (base / n / "meta_data.csv").is_file()]
        base = inner[0] if inner else base
    meta = require(base / "meta_data.csv", "FakeAVCeleb's metadata (meta_data.csv)")
    rows = []
    with meta.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        if header[:9] != ["source", "target1", "target2", "method", "category", "type", "race",
                          "gender", "path"]:
            raise ConfigError(f"{meta}: unexpected header {header[:9]} (FakeAVCeleb v1.2's is "
                              "source,target1,target2,method,category,type,race,gender,path,)")
        for no, fields in enumerate(reader, 2):
            if fields:
                rows.append(_favc_row(base, fields, f"{meta}:{no}"))
    kept = [r for r in rows if video == "all" or not r.pop("_fake_video", False)]
    for r in kept:
        r.pop("_fake_video", None)
    notes = ["FakeAVCeleb v1.2: real audio → R, fake (cloned) audio → S; binary and speech "
             "tasks only; no official split: source identities split 7:1:2 by a hash; "
             + ("real-video types only (RVRA, RVFA)" if video == "real"
                else "all four types, labelled by their audio")]
    return Corpus("fakeavceleb", str(base), frame_of(kept, "fakeavceleb"), ("binary", "speech"),
                  modality="AV", notes=notes)


def _favc_row(base: Path, fields: list[str], where: str) -> dict[str, Any]:
    if len(fields) < 10:
        return rejected(where, "bad_protocol_line", f"{where}: expected 10 fields, got "
                        f"{len(fields)}")
    source, _, _, method, _, kind, _, _, file, folder = (f.strip() for f in fields[:10])
    rel = Path(folder.removeprefix("FakeAVCeleb/")) / file
    sid = f"favc/{rel.as_posix()}"
    if kind not in FAKEAVCELEB_TYPES:
        return rejected(sid, "bad_label", f"{where}: type {kind!r} is not one of "
                        f"{sorted(FAKEAVCELEB_TYPES)}")
    variant, fake_video = FAKEAVCELEB_TYPES[kind]
    split = grouped_split(source, "fakeavceleb")
    path = base / rel
    if not path.is_file():
        return rejected(sid, "missing", f"{where}: {path} does not exist", split=split,
                        _fake_video=fake_video)
    speech = ""
    if variant == "S":  # the voice cloner, never the face method of a fake-video row
        speech = method if not fake_video and method else FAKEAVCELEB_SPEECH_GENERATOR
    return {"sample_id": sid, "clip_id": f"favc/{source}/{file.split('_')[0].split('.')[0]}",
            "variant": variant, "split": split, "audio_path": str(path), "video_path": str(path),
            "speaker": source, "label_source": kind, "_fake_video": fake_video,
            "speech_generator": speech, "video_fake": fake_video,
            "video_generator": method if fake_video else "", "_where": where}
