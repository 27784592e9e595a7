"""ASVspoof 2019 LA and ASVspoof 5 in their release layouts: CM protocol files, FLAC folders.

Both are **binary-only**: the datasets define bona fide vs spoof, not which component was
manipulated, so only the binary task is evaluated on them (a spoof is carried as variant
``S`` for the machinery) and the attack becomes the generator of the per-generator
breakdown. Each loader's docstring gives its layout and bootstrap units.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from madbench_common.benchmarks.madbench.corpora.base import Corpus, frame_of, rejected, require
from madbench_common.core.errors import ConfigError

__all__ = ["load_asvspoof5", "load_asvspoof2019_la"]

_LA_FILES = (("train", "train.trn", "train"), ("val", "dev.trl", "dev"),
             ("test", "eval.trl", "eval"))
_AS5_FILES = (("train", "ASVspoof5.train.tsv", ("flac_T",), "ASVspoof5_train"),
              ("val", "ASVspoof5.dev.track_1.tsv", ("flac_D",), "ASVspoof5_dev"),
              ("test", "ASVspoof5.eval.track_1.tsv", ("flac_E_eval", "flac_E"),
               "ASVspoof5_eval"))
_KEYS = {"bonafide": "R", "spoof": "S"}


def _la_root(root: Path) -> Path:
    if not (root / "ASVspoof2019_LA_cm_protocols").is_dir() and (root / "LA").is_dir():
        return root / "LA"
    return root


def _trial(split: str, speaker: str, name: str, attack: str, key: str, audio: Path,
           where: str, unit: str = "", **extra: Any) -> dict[str, Any]:
    if key not in _KEYS:
        return rejected(name, "bad_label", f"{where}: key {key!r} is not bonafide/spoof")
    if not audio.is_file():
        return rejected(name, "missing", f"{where}: {audio} does not exist", split=split)
    return {"sample_id": name, "clip_id": unit or name, "variant": _KEYS[key], "split": split,
            "audio_path": str(audio), "speaker": speaker, "label_source": key,
            "speech_generator": attack if key == "spoof" and attack != "-" else "",
            "_where": where, **extra}


def _protocol_lines(path: Path, width: int, rows: list[dict[str, Any]]
                    ) -> Iterator[tuple[str, list[str]]]:
    """``(where, fields)`` for each non-blank line of a whitespace-separated protocol file
    (``where``: ``path:line``); a line without ``width`` fields joins ``rows`` rejected
    (``bad_protocol_line``) instead."""
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        where = f"{path}:{no}"
        if len(fields) != width:
            rows.append(rejected(f"{path.name}:{no}", "bad_protocol_line",
                                 f"{where}: expected {width} fields, got {len(fields)}"))
            continue
        yield where, fields


def load_asvspoof2019_la(root: str | Path) -> Corpus:
    """ASVspoof 2019 LA from its CM protocols (``LA/`` of the Edinburgh DataShare release,
    or its parent).

    Layout::

        ASVspoof2019_LA_cm_protocols/ASVspoof2019.LA.cm.train.trn.txt   train → train
        ASVspoof2019_LA_cm_protocols/ASVspoof2019.LA.cm.dev.trl.txt     dev   → val
        ASVspoof2019_LA_cm_protocols/ASVspoof2019.LA.cm.eval.trl.txt    eval  → test
        ASVspoof2019_LA_{train,dev,eval}/flac/<AUDIO_FILE_NAME>.flac

    One trial per line, five space-separated fields: ``SPEAKER_ID AUDIO_FILE_NAME -
    SYSTEM_ID KEY`` (``LA_0079 LA_T_1138215 - - bonafide``; ``SYSTEM_ID`` A01–A19 for
    spoofs, the generator of the per-generator breakdown). Every utterance is its own
    bootstrap unit.
    """
    base = _la_root(Path(root))
    protocols = require(base / "ASVspoof2019_LA_cm_protocols",
                        "the ASVspoof 2019 LA CM protocol folder")
    rows: list[dict[str, Any]] = []
    for split, suffix, part in _LA_FILES:
        path = protocols / f"ASVspoof2019.LA.cm.{suffix}.txt"
        if not path.is_file():
            continue
        for where, fields in _protocol_lines(path, 5, rows):
            speaker, name, _, system, key = fields
            audio = base / f"ASVspoof2019_LA_{part}" / "flac" / f"{name}.flac"
            rows.append(_trial(split, speaker, name, system, key, audio, where))
    if not rows:
        raise ConfigError(f"{protocols}: no ASVspoof2019.LA.cm.*.txt protocol file")
    return Corpus("asvspoof2019_la", str(base), frame_of(rows, "asvspoof2019_la"), ("binary",),
                  notes=["ASVspoof 2019 LA: bona fide vs spoof only (binary task); train/dev/"
                         "eval CM protocols → train/val/test; attack A01–A19 as generator."])


def _find(root: Path, name: str) -> Path | None:
    direct = [root / name, root / "ASVspoof5_protocols" / name]
    found = next((p for p in direct if p.is_file()), None)
    return found or next(iter(sorted(root.rglob(name))), None)


def _as5_audio(base: Path, folders: tuple[str, ...], part: str) -> Path:
    """The split's FLAC folder: ``<base>/flac_T`` or ``<base>/ASVspoof5_train/flac_T`` (any
    ``flac_*`` there); the first candidate when none exists (its rows are then missing)."""
    nested = base / part
    candidates = [*(base / f for f in folders), *(nested / f for f in folders),
                  *sorted(p for p in nested.glob("flac_*") if p.is_dir())]
    return next((p for p in candidates if p.is_dir()), candidates[0])


def load_asvspoof5(root: str | Path) -> Corpus:
    """ASVspoof 5 (track 1) from its protocol files (the Zenodo release, protocols unpacked
    anywhere under the root).

    Layout::

        ASVspoof5.train.tsv            train → train    audio flac_T/
        ASVspoof5.dev.track_1.tsv      dev   → val      audio flac_D/
        ASVspoof5.eval.track_1.tsv     eval  → test     audio flac_E_eval/ (or flac_E/)

    The audio folders may also sit one level down (:func:`_as5_audio`). Protocol lines are
    whitespace-separated despite ``.tsv``, ten fields: ``SPEAKER_ID FLAC_FILE_NAME
    SPEAKER_GENDER CODEC CODEC_Q CODEC_SEED ATTACK_TAG ATTACK_LABEL KEY TMP`` (``T_4850
    T_0000000000 F - - - AC3 A05 spoof -``). ``ATTACK_LABEL`` becomes the generator; the
    codec condition is kept in columns of its own (``codec``, ``codec_q``, ``codec_seed``,
    ``attack_tag``, ``gender``). A row whose ``CODEC_SEED`` names a source utterance joins
    that utterance's bootstrap unit (``clip_id``), so the copies of one utterance under
    several codecs are resampled together, not counted as independent trials.
    """
    base = Path(root)
    require(base, "the ASVspoof 5 release folder")
    rows: list[dict[str, Any]] = []
    for split, name, folders, part in _AS5_FILES:
        path = _find(base, name)
        if path is None:
            continue
        audio_dir = _as5_audio(base, folders, part)
        for where, fields in _protocol_lines(path, 10, rows):
            speaker, file, gender, codec, codec_q, seed, tag, attack, key, _ = fields
            rows.append(_trial(split, speaker, file, attack, key, audio_dir / f"{file}.flac",
                               where, unit=seed if seed != "-" else "", gender=gender,
                               codec=codec, codec_q=codec_q, codec_seed=seed,
                               attack_tag=tag))
    if not rows:
        raise ConfigError(f"{base}: no ASVspoof5.*.tsv protocol file under it")
    return Corpus("asvspoof5", str(base), frame_of(rows, "asvspoof5"), ("binary",),
                  notes=["ASVspoof 5 track 1: bona fide vs spoof only (binary task); train/"
                         "dev/eval protocols → train/val/test; attack label as generator; "
                         "codec conditions (eval) recorded per row; coded copies of one "
                         "utterance (CODEC_SEED) are one bootstrap unit."])
