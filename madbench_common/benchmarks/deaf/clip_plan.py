"""Which DEAF clips to make: one :class:`ClipSpec` per clip, with its labels (Table 1).

ESC (Appendix A.2.1): :func:`plan_esc`; BSC (Appendix A.2.2): :func:`plan_bsc`; SIC (§2.1):
:func:`plan_sic`. Each planner gives the paper's counts and where it had to choose.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from madbench_common.benchmarks.deaf.design import (
    CATEGORIES,
    EMOTIONS,
    ENVIRONMENTS,
    SNRS_DB,
    VOICE_PROFILES,
    cross_mismatch,
    level2_bsc_claim,
    level2_extension_claims,
    voice_profile,
    within_mismatch,
)
from madbench_common.benchmarks.deaf.sentences import Sentence, implied_identity

__all__ = ["ClipSpec", "bsc_control_backgrounds", "bsc_neutral_backgrounds", "plan_bsc",
           "plan_esc", "plan_sic"]


@dataclass(frozen=True)
class ClipSpec:
    """One stimulus to synthesise: what the text implies and what the audio carries."""

    stimulus_id: str
    conflict: str
    sentence_id: str
    subdim: str
    condition: str
    text: str
    semantic: str
    """The class the words imply (emotion, DEMAND code, voice attributes or ``neutral``)."""
    acoustic: str
    """The class the audio carries: prosody, background code or voice profile."""
    matched: bool
    setting: str = ""
    """ESC: the TTS setting (``a``/``b``/``c``)."""
    pairing: str = ""
    """BSC: ``matched``, ``within``, ``cross`` or ``neutral``."""
    snr_db: int = 0


def plan_esc(sentences: Sequence[Sentence], setting: str) -> list[ClipSpec]:
    """ESC clips of one TTS setting: every ESC sentence in every prosody.

    Appendix A.2.1: a clip is matched when its prosody is the sentence's class (104 × 4 ×
    3 settings = 1,248; 312 matched)."""
    return [
        ClipSpec(f"esc-{setting}-{s.sentence_id}-{emotion}", "esc", s.sentence_id, "",
                 s.condition, s.text, s.label, emotion, emotion == s.label, setting=setting)
        for s in sentences if s.conflict == "esc" for emotion in EMOTIONS
    ]


def bsc_neutral_backgrounds(sentence_id: str, seed: int) -> list[str]:
    """Three environments of three different categories, drawn for a neutral sentence."""
    text = f"{seed}/{sentence_id}".encode()
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(text).digest()[:8], "little"))
    cats = [CATEGORIES[i] for i in rng.choice(len(CATEGORIES), 3, replace=False)]
    out = []
    for cat in cats:
        members = [e.code for e in ENVIRONMENTS if e.category == cat]
        out.append(members[int(rng.integers(len(members)))])
    return out


def bsc_control_backgrounds(backgrounds: Sequence[str]) -> list[str]:
    """The DEMAND environments Level 2 prompts claim over a neutral sentence's
    ``backgrounds`` (A.3's and this project's own) that the sentence is not already mixed
    over: the same-sentence control clips eq. 2 needs, in first-claimed order."""
    claimed: list[str] = []
    for bg in backgrounds:
        paper = level2_bsc_claim(bg)
        for env in [paper or "", *(c for c, _ in level2_extension_claims(bg))]:
            if env in {e.code for e in ENVIRONMENTS} and env not in claimed:
                claimed.append(env)
    return [env for env in claimed if env not in backgrounds]


def _bsc_pairs(s: Sentence, seed: int) -> list[tuple[str, str]]:
    if s.label == "neutral":
        backgrounds = bsc_neutral_backgrounds(s.sentence_id, seed)
        return [*(("neutral", bg) for bg in backgrounds),
                *(("control", env) for env in bsc_control_backgrounds(backgrounds))]
    return [("matched", s.label), ("within", within_mismatch(s.label)),
            ("cross", cross_mismatch(s.label))]


def plan_bsc(sentences: Sequence[Sentence], snrs: Sequence[int] = SNRS_DB,
             seed: int = 0) -> list[ClipSpec]:
    """BSC mixtures: every pairing of every BSC sentence at every SNR.

    Appendix A.2.2: each environment sentence over its own environment (Matched), the next
    one in its category (Within-Mismatch) and the paired category's (Cross-Mismatch); each
    neutral sentence over three environments of three different categories drawn at
    random; each at every SNR (252 per SNR, 1,260 in all). Eq. 2 needs each Level 2 trial's
    control to be *the same sentence* over the background the prompt claims; the paper's
    neutral clips rarely carry it, so each neutral sentence is also mixed over every
    claimed environment it lacks (pairing ``control``, :func:`bsc_control_backgrounds`).
    These control clips are this project's addition and are not counted in Table 1.
    """
    out = []
    for s in sentences:
        if s.conflict != "bsc":
            continue
        for pairing, bg in _bsc_pairs(s, seed):
            for snr in snrs:
                out.append(ClipSpec(
                    f"bsc-{s.sentence_id}-{pairing}-{bg}-snr{snr}", "bsc", s.sentence_id,
                    "", s.condition, s.text, s.label, bg, pairing == "matched",
                    pairing=pairing, snr_db=int(snr)))
    return out


def _sic_profiles(s: Sentence, index: int) -> list[str]:
    gender, age = implied_identity(s)
    other = {"female": "male", "male": "female", "young": "elderly", "elderly": "young"}
    if s.subdim == "gender":
        age = ("young", "elderly")[index % 2]
        return [voice_profile(gender, age).name, voice_profile(other[gender], age).name]
    if s.subdim == "age":
        gender = ("female", "male")[index % 2]
        return [voice_profile(gender, age).name, voice_profile(gender, other[age]).name]
    return [p.name for p in VOICE_PROFILES]


def plan_sic(sentences: Sequence[Sentence]) -> list[ClipSpec]:
    """SIC clips: each sentence in the voice profiles its sub-dimension calls for.

    §2.1 gives 82 sentences, four profiles and 248 clips (208 identity-specific + 40
    neutral), not 82 × 4 = 328. 248 is what you get when gender sentences are voiced by
    two profiles (their own gender and the other, same age), age sentences by two (their
    own age group and the other, same gender), combined and neutral sentences by all four:
    20·2 + 20·2 + 32·4 + 10·4 = 248. The paper does not say which age (gender) voices a
    gender (age) sentence: here it alternates by sentence order.
    """
    out, seen = [], {"gender": 0, "age": 0}
    for s in sorted((s for s in sentences if s.conflict == "sic"), key=lambda s: s.sentence_id):
        index = seen.get(s.subdim, 0)
        seen[s.subdim] = index + 1
        for name in _sic_profiles(s, index):
            out.append(ClipSpec(f"sic-{s.sentence_id}-{name}", "sic", s.sentence_id, s.subdim,
                                s.condition, s.text, s.label, name,
                                s.label != "neutral" and _matches(s, name)))
    return out


def _matches(s: Sentence, profile: str) -> bool:
    gender, age = implied_identity(s)
    p = next(p for p in VOICE_PROFILES if p.name == profile)
    return (not gender or gender == p.gender) and (not age or age == p.age)
