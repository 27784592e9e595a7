"""Scene taxonomy: load and validate the coarse/fine scene labels, assign labels, build prompts.

The taxonomy is data (``madbench_common/models/data/taxonomy.json``): 10 coarse and 63 fine
scene categories. Each fine label lists its keywords, expected environmental sounds (from
a controlled sound vocabulary), excluded categories (speech, singing, music and media
playback always) and two incompatibility relations (paper §3.4 "mismatch scene types";
§5.3 needs both: :class:`FineScene`). Every function here is deterministic, so every
scene describer shares the same caption → label step.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Seconds

__all__ = [
    "DEFAULT_TAXONOMY_PATH",
    "CoarseScene",
    "FineScene",
    "ScenePrompt",
    "SoundClass",
    "Taxonomy",
    "assign_label",
    "build_prompt",
    "find_sounds",
    "load_taxonomy",
    "parse_taxonomy",
    "pick_mismatch",
    "score_labels",
    "taxonomy_problems",
]

DEFAULT_TAXONOMY_PATH = Path(__file__).parent / "data" / "taxonomy.json"
_MIN_FINE_PER_COARSE = 3


@dataclass(frozen=True)
class CoarseScene:
    """A coarse scene category (``domain`` is indoor, outdoor, transportation, ...)."""

    name: str
    domain: str
    description: str
    keywords: tuple[str, ...]


@dataclass(frozen=True)
class FineScene:
    """A fine scene label with its expected sounds, exclusions and mismatch scenes.

    ``mismatch``: incompatible scenes of a *different coarse* scene (scene-mismatched
    generation and replacement, and the D-R scene-consistency donors).
    ``sibling_mismatch``: labels of the *same coarse* scene whose sounds are incompatible
    (the S-R donors, §5.3: "same coarse scene but different fine-grained labels"). Built
    by rule and reviewed by hand: two labels of one coarse scene are siblings-in-mismatch
    when both have distinctive expected sounds (footsteps, wind, air conditioning, doors
    and clocks are too generic to count) and the Jaccard overlap of those is at most 1/4;
    kitchen/dining room were removed by hand (both are dish-clinking rooms). Labels with
    no distinctive sound (living room, museum) have none, so their clips get no S-R pair.
    """

    name: str
    coarse: str
    keywords: tuple[str, ...]
    expected_sounds: tuple[str, ...]
    excluded: tuple[str, ...]
    mismatch: tuple[str, ...]
    sibling_mismatch: tuple[str, ...] = ()
    """Incompatible labels of the same coarse scene (S-R donors)."""


@dataclass(frozen=True)
class SoundClass:
    """One entry of the controlled environmental-sound vocabulary."""

    name: str
    aliases: tuple[str, ...]


@dataclass(frozen=True)
class Taxonomy:
    """The whole taxonomy; ``fine`` keeps the file's order."""

    version: str
    coarse: Mapping[str, CoarseScene]
    fine: Mapping[str, FineScene]
    sounds: Mapping[str, SoundClass]
    always_excluded: tuple[str, ...]
    fallback_label: str


@dataclass(frozen=True)
class ScenePrompt:
    """A generation prompt for one fine label: positive text and negative prompt."""

    label: str
    text: str
    negative: str
    duration: Seconds


def parse_taxonomy(data: Mapping[str, Any]) -> Taxonomy:
    """Build a :class:`Taxonomy` from the JSON document (no validation)."""
    coarse = {c["name"]: CoarseScene(c["name"], c["domain"], c["description"],
                                     tuple(c["keywords"])) for c in data["coarse"]}
    fine = {f["name"]: FineScene(f["name"], f["coarse"], tuple(f["keywords"]),
                                 tuple(f["expected_sounds"]), tuple(f["excluded"]),
                                 tuple(f["mismatch"]), tuple(f.get("sibling_mismatch", ())))
            for f in data["fine"]}
    sounds = {s["name"]: SoundClass(s["name"], tuple(s["aliases"]))
              for s in data["sounds"]}
    return Taxonomy(str(data["version"]), coarse, fine, sounds,
                    tuple(data["always_excluded"]), str(data["fallback_label"]))


def taxonomy_problems(tax: Taxonomy) -> list[str]:
    """Every structural problem of ``tax`` (empty when it is valid)."""
    problems: list[str] = []
    for f in tax.fine.values():
        problems += _fine_problems(tax, f)
    for c in tax.coarse:
        n = sum(1 for f in tax.fine.values() if f.coarse == c)
        if n < _MIN_FINE_PER_COARSE:
            problems.append(f"coarse {c!r} has {n} fine labels (< {_MIN_FINE_PER_COARSE})")
    if tax.fallback_label not in tax.fine:
        problems.append(f"fallback label {tax.fallback_label!r} is not a fine label")
    return problems


def _fine_problems(tax: Taxonomy, f: FineScene) -> list[str]:
    out = [f"{f.name}: unknown coarse {f.coarse!r}"] if f.coarse not in tax.coarse else []
    out += [f"{f.name}: unknown mismatch {m!r}" for m in f.mismatch if m not in tax.fine]
    out += [f"{f.name}: unknown sound {s!r}" for s in f.expected_sounds if s not in tax.sounds]
    out += [f"{f.name}: does not exclude {e!r}" for e in tax.always_excluded
            if e not in f.excluded]
    out += [f"{f.name}: mismatch {m!r} is not symmetric" for m in f.mismatch
            if m in tax.fine and f.name not in tax.fine[m].mismatch]
    out += _sibling_problems(tax, f)
    if f.name in f.mismatch:
        out.append(f"{f.name}: mismatches itself")
    if not f.mismatch or not f.expected_sounds or not f.keywords:
        out.append(f"{f.name}: empty mismatch, expected_sounds or keywords")
    return out


def _sibling_problems(tax: Taxonomy, f: FineScene) -> list[str]:
    out = [f"{f.name}: mismatch {m!r} is in the same coarse scene" for m in f.mismatch
           if m in tax.fine and tax.fine[m].coarse == f.coarse]
    for m in f.sibling_mismatch:
        other = tax.fine.get(m)
        if other is None or other.coarse != f.coarse or m == f.name:
            out.append(f"{f.name}: sibling mismatch {m!r} is not another label of "
                       f"{f.coarse!r}")
        elif f.name not in other.sibling_mismatch:
            out.append(f"{f.name}: sibling mismatch {m!r} is not symmetric")
    return out


def load_taxonomy(path: Path | str | None = None) -> Taxonomy:
    """Load and validate the taxonomy (the packaged one by default, cached)."""
    return _load(str(path or DEFAULT_TAXONOMY_PATH))


@cache
def _load(path: str) -> Taxonomy:
    tax = parse_taxonomy(json.loads(Path(path).read_text(encoding="utf-8")))
    problems = taxonomy_problems(tax)
    if problems:
        raise ConfigError(f"invalid taxonomy {path}: " + "; ".join(problems[:10]))
    return tax


def _tokens(text: str) -> tuple[str, ...]:
    words = re.findall(r"[a-z0-9]+", text.lower().replace("é", "e"))
    return tuple(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
                 for w in words)


def _count_phrase(tokens: tuple[str, ...], phrase: str) -> int:
    p = _tokens(phrase)
    n = len(p)
    return sum(1 for i in range(len(tokens) - n + 1) if tokens[i:i + n] == p) if n else 0


def _phrase_score(tokens: tuple[str, ...], phrases: Iterable[str]) -> float:
    """Best keyword hit: a longer (more specific) phrase scores higher."""
    unique = {_tokens(p) for p in phrases}
    hits = [2.0 + len(p) for p in unique if _count_phrase(tokens, " ".join(p))]
    return max(hits, default=0.0) + 0.5 * max(len(hits) - 1, 0)


def _sound_hits(tokens: tuple[str, ...], tax: Taxonomy) -> set[str]:
    return {s.name for s in tax.sounds.values()
            if any(_count_phrase(tokens, p) for p in (s.name.replace("_", " "), *s.aliases))}


def score_labels(caption: str, taxonomy: Taxonomy | None = None) -> dict[str, float]:
    """Keyword/synonym score of every fine label for ``caption`` (0 = no evidence)."""
    tax = taxonomy or load_taxonomy()
    tokens = _tokens(caption)
    sounds = _sound_hits(tokens, tax)
    coarse = {c.name: 0.5 * bool(_phrase_score(tokens, c.keywords)) for c in tax.coarse.values()}
    return {f.name: _phrase_score(tokens, (f.name.replace("_", " "), *f.keywords))
            + len(sounds.intersection(f.expected_sounds)) + coarse[f.coarse]
            for f in tax.fine.values()}


def assign_label(caption: str, taxonomy: Taxonomy | None = None) -> str:
    """The best-scoring fine label; ties go to the alphabetically first label.

    A caption with no evidence at all gets the taxonomy's ``fallback_label``.
    """
    tax = taxonomy or load_taxonomy()
    scores = score_labels(caption, tax)
    best = min(scores, key=lambda name: (-scores[name], name))
    return best if scores[best] > 0 else tax.fallback_label


def find_sounds(text: str, taxonomy: Taxonomy | None = None) -> list[str]:
    """Vocabulary sounds named in ``text`` (by name or alias), in vocabulary order."""
    tax = taxonomy or load_taxonomy()
    hits = _sound_hits(_tokens(text), tax)
    return [s for s in tax.sounds if s in hits]


def _fine(tax: Taxonomy, label: str) -> FineScene:
    try:
        return tax.fine[label]
    except KeyError:
        raise ConfigError(f"unknown fine scene label {label!r}") from None


def build_prompt(label: str, duration: Seconds, taxonomy: Taxonomy | None = None) -> ScenePrompt:
    """The fixed generation prompt for ``label``; speech and music are always negative."""
    tax = taxonomy or load_taxonomy()
    fine = _fine(tax, label)
    coarse = tax.coarse[fine.coarse]
    sounds = ", ".join(s.replace("_", " ") for s in fine.expected_sounds)
    text = (f"Ambient sound of a {label.replace('_', ' ')} ({coarse.description}, "
            f"{coarse.domain}), {duration:.1f} seconds: {sounds}. "
            "Environmental sounds only, no speech, no music.")
    negative = ", ".join(dict.fromkeys((*fine.excluded, "talking", "human voice", "vocals")))
    return ScenePrompt(label, text, negative, duration)


def pick_mismatch(label: str, seed: int, taxonomy: Taxonomy | None = None) -> str:
    """An incompatible fine label for ``label``, chosen deterministically from ``seed``."""
    options = sorted(_fine(taxonomy or load_taxonomy(), label).mismatch)
    digest = hashlib.sha256(f"{label}:{seed}".encode()).digest()
    return options[int.from_bytes(digest[:8], "big") % len(options)]
