"""DEAF sentence sets: the committed offline set, a user's EMIS copy, or a user CSV.

The committed set (:func:`committed_sentences`) was written for this project in the
paper's conditions; it is not the paper's text. EMIS (Corrêa et al. 2025; Zenodo
19207001) ships 1,248 WAVs named
``{sentence-ID}_{text-emotion}_{audio-emotion}_{ESD-speaker-ID}_{TTS}.wav``
(:func:`read_emis_clips`, :func:`read_emis_sentences`); the copy may be a local folder or
an ``s3://`` prefix (:mod:`.datasets`: the cluster's way in).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from madbench_common.benchmarks.deaf.datasets import list_files, read_file
from madbench_common.benchmarks.deaf.design import CONFLICTS, EMOTIONS, category_of
from madbench_common.core.errors import ConfigError

__all__ = [
    "EMIS_NAME",
    "EmisClip",
    "Sentence",
    "committed_sentences",
    "implied_identity",
    "load_sentences",
    "read_emis_clips",
    "read_emis_sentences",
    "read_sentence_csv",
    "select_subset",
]

_FIELDS = ("sentence_id", "conflict", "subdim", "condition", "label", "text")
EMIS_NAME = re.compile(r"^(?P<sid>[^_]+)_(?P<text>[^_]+)_(?P<audio>[^_]+)_(?P<speaker>[^_]+)_"
                       r"(?P<tts>[^.]+)\.wav$", re.IGNORECASE)


@dataclass(frozen=True)
class Sentence:
    """One scripted sentence and the semantic class it implies.

    CSV columns: ``sentence_id, conflict, subdim, condition, label, text``. ``label`` is the
    semantic class the text implies: an emotion (ESC), a DEMAND code (BSC), or for SIC
    ``female``/``male``, ``young``/``elderly``, or ``<age>_<gender>``; ``neutral``
    otherwise."""

    sentence_id: str
    conflict: str
    subdim: str
    condition: str
    label: str
    text: str

    @property
    def stratum(self) -> tuple[str, str, str, str]:
        """What subsets keep balanced: conflict, sub-dimension, condition and label group
        (the DEMAND category for BSC, so a subset keeps every category)."""
        group = self.label
        if self.conflict == "bsc" and self.label != "neutral":
            group = category_of(self.label)
        return self.conflict, self.subdim, self.condition, group


def _check(s: Sentence, where: str) -> Sentence:
    if s.conflict not in CONFLICTS:
        raise ConfigError(f"{where}: {s.sentence_id}: conflict {s.conflict!r} not in {CONFLICTS}")
    if s.condition not in ("explicit", "implicit", "neutral"):
        raise ConfigError(f"{where}: {s.sentence_id}: condition {s.condition!r} is not "
                          "explicit, implicit or neutral")
    if s.conflict == "esc" and s.label not in EMOTIONS:
        raise ConfigError(f"{where}: {s.sentence_id}: emotion {s.label!r} not in {EMOTIONS}")
    if s.conflict == "bsc" and s.label != "neutral":
        category_of(s.label)
    if s.conflict == "sic":
        implied_identity(s)
    if not s.text.strip():
        raise ConfigError(f"{where}: {s.sentence_id}: empty text")
    return s


def implied_identity(s: Sentence) -> tuple[str, str]:
    """(gender, age) a SIC sentence implies; ``""`` for an attribute it leaves open."""
    parts = s.label.split("_") if s.label != "neutral" else []
    gender = next((p for p in parts if p in ("female", "male")), "")
    age = next((p for p in parts if p in ("young", "elderly")), "")
    if len(parts) != bool(gender) + bool(age):
        raise ConfigError(f"{s.sentence_id}: SIC label {s.label!r} is not female/male, "
                          "young/elderly, <age>_<gender> or neutral")
    return gender, age


def read_sentence_csv(path: str | Path) -> list[Sentence]:
    """Sentences from a CSV in the committed format (header ``sentence_id,conflict,…``)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return _parse(csv.DictReader(fh), str(path))


def _parse(reader: csv.DictReader[str], where: str) -> list[Sentence]:
    missing = set(_FIELDS) - set(reader.fieldnames or ())
    if missing:
        raise ConfigError(f"{where}: missing columns {sorted(missing)}; expected {_FIELDS}")
    out = [_check(Sentence(**{k: (row[k] or "").strip() for k in _FIELDS}), where)
           for row in reader]
    ids = [s.sentence_id for s in out]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{where}: duplicate sentence ids")
    return out


def committed_sentences() -> list[Sentence]:
    """The offline sentence set written for this project (all three conflict types).

    ``madbench_common/data/deaf_sentences.csv``, written in the paper's conditions; it is
    not the paper's text. Counts follow §2.1 and Appendix A.2. ESC: 104 sentences, 13
    explicit + 13 implicit for each of angry, happy and sad, and 26 neutral (EMIS's four
    classes; the paper gives 104 and the four classes, the split of 26 per class and 13/13
    explicit/implicit is this project's reading). BSC: 84, two explicit and two implicit
    per DEMAND environment (72), and 12 neutral. SIC: 82, 20 gender, 20 age, 32 combined
    (explicit and implicit halves), 10 neutral.
    """
    text = resources.files("madbench_common").joinpath("data/deaf_sentences.csv").read_text(
        encoding="utf-8")
    return _parse(csv.DictReader(text.splitlines()), "madbench_common/data/deaf_sentences.csv")


def select_subset(sentences: Sequence[Sentence], per_stratum: int) -> list[Sentence]:
    """The first ``per_stratum`` sentences (by id) of every stratum; all when ``≤ 0``."""
    if per_stratum <= 0:
        return list(sentences)
    kept: dict[tuple[str, str, str, str], int] = {}
    out = []
    for s in sorted(sentences, key=lambda s: s.sentence_id):
        if kept.get(s.stratum, 0) < per_stratum:
            kept[s.stratum] = kept.get(s.stratum, 0) + 1
            out.append(s)
    return out


def load_sentences(user_csv: str = "", emis: str = "", per_stratum: int = 0) -> list[Sentence]:
    """The sentence set of a run: committed, with ESC replaced by EMIS and any conflict
    type present in ``user_csv`` replaced by the user's rows."""
    sentences = committed_sentences()
    if emis:
        sentences = [s for s in sentences if s.conflict != "esc"] + read_emis_sentences(emis)
    if user_csv:
        user = read_sentence_csv(user_csv)
        replaced = {s.conflict for s in user}
        sentences = [s for s in sentences if s.conflict not in replaced] + user
    return select_subset(sorted(sentences, key=lambda s: s.sentence_id), per_stratum)


# ---------------------------------------------------------------- EMIS


@dataclass(frozen=True)
class EmisClip:
    """One EMIS WAV (``name`` under the copy's ``root``), parsed from its file name."""

    root: str
    name: str
    sentence_id: str
    text_emotion: str
    audio_emotion: str
    speaker: str
    tts: str

    def read(self) -> bytes:
        return read_file(self.root, self.name)


def _emotion_in(token: str) -> str:
    found = [e for e in EMOTIONS if e in token.lower()]
    return found[0] if len(found) == 1 else ""


def read_emis_clips(root: str | Path) -> list[EmisClip]:
    """Every WAV of an EMIS copy whose name follows the documented pattern."""
    clips = []
    for name in list_files(str(root), (".wav",), "EMIS copy"):
        m = EMIS_NAME.match(name.rpartition("/")[2])
        if m is None:
            continue
        audio = _emotion_in(m["audio"])
        if not audio:
            raise ConfigError(f"{root}/{name}: audio emotion {m['audio']!r} is not one of "
                              f"{EMOTIONS}")
        clips.append(EmisClip(str(root), name, _emis_id(m["sid"]), m["text"].lower(), audio,
                              m["speaker"], m["tts"]))
    if not clips:
        raise ConfigError(f"{root}: no EMIS WAVs named "
                          "{sentence-ID}_{text-emotion}_{audio-emotion}_{speaker}_{TTS}.wav")
    return clips


def _emis_id(raw: str) -> str:
    return f"emis{int(raw):03d}" if raw.isdigit() else f"emis-{raw}"


def _pick(header: Iterable[str], *names: str) -> str:
    for h in header:
        if h.strip().lower() in names:
            return h
    return ""


def read_emis_sentences(root: str | Path) -> list[Sentence]:
    """ESC sentences of an EMIS copy: texts from its metadata table, classes from the
    table or, failing that, from the clip names (the text emotion of the clip whose audio
    emotion matches it names the class; explicit/implicit from the text-emotion token).

    The texts are read from a CSV or TSV in the copy's folder with a text column and an id
    column (header names matched loosely: ``id``/``sentence_id``, ``text``/``sentence``/
    ``transcription``, optional ``emotion`` and ``type``/``condition``); where a header is
    missing the emotion and condition come from the file names. That layout is read from
    the dataset description, not tried on the real files: a copy laid out otherwise fails
    with an error naming what was expected."""
    texts = _emis_table(str(root))
    by_id: dict[str, list[EmisClip]] = {}
    for clip in read_emis_clips(root):
        by_id.setdefault(clip.sentence_id, []).append(clip)
    out = []
    for sid, (text, emotion, condition) in sorted(texts.items()):
        clips = by_id.get(sid, [])
        token = clips[0].text_emotion if clips else ""
        emotion = emotion or _emotion_in(token)
        condition = condition or next((c for c in ("explicit", "implicit") if c in token),
                                      "neutral" if emotion == "neutral" else "")
        s = Sentence(sid, "esc", "", condition, emotion, text)
        out.append(_check(s, f"{root} (EMIS)"))
    return out


def _emis_table(root: Path | str) -> dict[str, tuple[str, str, str]]:
    for name in list_files(str(root), (".csv", ".tsv"), "EMIS copy"):
        text = read_file(str(root), name).decode("utf-8-sig")
        reader = csv.DictReader(io.StringIO(text), delimiter="\t" if name.lower().endswith(
            ".tsv") else ",")
        header = reader.fieldnames or []
        id_col = _pick(header, "id", "sentence_id", "sentence-id", "sentence id")
        text_col = _pick(header, "text", "sentence", "transcription", "transcript")
        if not id_col or not text_col:
            continue
        emo_col = _pick(header, "emotion", "text_emotion", "label")
        cond_col = _pick(header, "type", "condition", "semantic", "text_type")
        return {_emis_id(str(r[id_col]).strip()): (
            r[text_col].strip(), _emotion_in(r.get(emo_col, "") or ""),
            (r.get(cond_col, "") or "").strip().lower()) for r in reader}
    raise ConfigError(f"{root}: no CSV/TSV with an id and a text column (EMIS sentence list)")
