"""The DEAF design: emotions, environments and their pairings, SNRs, voice profiles, levels.

Everything here is fixed by the paper (§2.1, Appendix A.2) except where a docstring says
the paper is silent and names the choice made.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters.elevenlabs import ELEVENLABS_VOICES

__all__ = [
    "CATEGORIES",
    "CONFLICTS",
    "CROSS_CATEGORY",
    "ELEVENLABS_VOICES",
    "EMOTIONS",
    "ENVIRONMENTS",
    "LEVELS",
    "SNRS_DB",
    "VOICE_PROFILES",
    "Environment",
    "VoiceProfile",
    "category_of",
    "cross_mismatch",
    "environment",
    "level2_cross_claim",
    "voice_profile",
    "within_mismatch",
]

CONFLICTS = ("esc", "bsc", "sic")
"""Emotion-, background-sound- and speaker-identity–semantic conflict (§2.1)."""
LEVELS = ("L1", "L2", "L3")
"""§2.3: conflict in the audio only; neutral audio + misleading prompt; both."""
EMOTIONS = ("angry", "happy", "neutral", "sad")
"""ESC prosodies and semantic classes (Appendix A.2.1, EMIS)."""
SNRS_DB = (-10, -5, 0, 5, 10)
"""BSC mixing SNRs in dB (Appendix A.2.2)."""


@dataclass(frozen=True)
class Environment:
    """One of DEMAND's 18 environments (Table 6): its code, category and a plain name."""

    code: str
    category: str
    name: str


CATEGORIES = ("Domestic", "Nature", "Office", "Public", "Street", "Transportation")
ENVIRONMENTS = (
    Environment("DKITCHEN", "Domestic", "kitchen"),
    Environment("DLIVING", "Domestic", "living room"),
    Environment("DWASHING", "Domestic", "laundry room"),
    Environment("NFIELD", "Nature", "sports field"),
    Environment("NPARK", "Nature", "city park"),
    Environment("NRIVER", "Nature", "river"),
    Environment("OHALLWAY", "Office", "office hallway"),
    Environment("OMEETING", "Office", "meeting room"),
    Environment("OOFFICE", "Office", "office"),
    Environment("PCAFETER", "Public", "cafeteria"),
    Environment("PRESTO", "Public", "restaurant"),
    Environment("PSTATION", "Public", "train station"),
    Environment("SCAFE", "Street", "street café terrace"),
    Environment("SPSQUARE", "Street", "public square"),
    Environment("STRAFFIC", "Street", "street traffic"),
    Environment("TBUS", "Transportation", "bus"),
    Environment("TCAR", "Transportation", "car"),
    Environment("TMETRO", "Transportation", "metro"),
)
"""In alphabetical order within each category, which is the within-category rotation."""

CROSS_CATEGORY = {
    "Domestic": "Street", "Street": "Domestic", "Nature": "Transportation",
    "Transportation": "Nature", "Office": "Nature", "Public": "Domestic",
}
"""Text category → background category of a Cross-Mismatch (Appendix A.2.2).

The paper lists four pairs, Domestic↔Street, Nature↔Transportation, Office↔Nature and
Public↔Domestic, which as undirected pairs give Domestic and Nature two partners each.
Read as a map from the text's category, each of the six categories needs exactly one
background category: both directions of the first two pairs, and the listed direction
(left → right) of the last two. The sub-environment keeps its index within the category
(the k-th of the text's category is mixed with the k-th of the background category).
"""


def environment(code: str) -> Environment:
    """The environment with DEMAND code ``code``."""
    for env in ENVIRONMENTS:
        if env.code == code:
            return env
    raise ConfigError(f"unknown environment {code!r}; known: "
                      f"{', '.join(e.code for e in ENVIRONMENTS)}")


def category_of(code: str) -> str:
    return environment(code).category


def _members(category: str) -> list[str]:
    return [e.code for e in ENVIRONMENTS if e.category == category]


def within_mismatch(code: str) -> str:
    """The background of a Within-Mismatch for text about ``code`` (same category).

    Appendix A.2.2: sub-environments rotate within each category, DWASHING → DKITCHEN,
    DKITCHEN → DLIVING, DLIVING → DWASHING — the next one in alphabetical order.
    """
    members = _members(category_of(code))
    return members[(members.index(code) + 1) % len(members)]


def cross_mismatch(code: str) -> str:
    """The background of a Cross-Mismatch for text about ``code`` (see CROSS_CATEGORY)."""
    category = category_of(code)
    return _members(CROSS_CATEGORY[category])[_members(category).index(code)]


LEVEL2_CROSS_CLAIMS = MappingProxyType({"Nature": "STRAFFIC", "Office": "NPARK"})
"""Background category → the environment a Level 2 Cross claim names, where Appendix A.3
names a DEMAND environment: "Background is nature → 'This audio was recorded in a busy
city with traffic noise'" (STRAFFIC) and "Background is office → '… outdoors in a forest
with birds'" (NPARK). A.3's third pair, traffic → "a quiet beach with ocean waves",
names no DEMAND environment (no clip could be its matched control), so Street
backgrounds, like the categories A.3 does not list, take A.2.2's Cross pairing."""


def level2_cross_claim(code: str) -> str:
    """The environment a Level 2 Cross-Mismatch prompt claims over background ``code``.

    §2.3 / Appendix A.3: a Level 2 prompt describes an environment the neutral-content
    audio does not carry, chosen by the background's category. The paper does not say how
    its Level 2 Within and Cross conditions (Table 4's L2 column) were built; here each
    neutral clip is asked twice, once with a Cross claim (this one, another category) and
    once with a Within claim (:func:`within_mismatch`, same category).
    """
    category = category_of(code)
    if category in LEVEL2_CROSS_CLAIMS:
        return LEVEL2_CROSS_CLAIMS[category]
    return cross_mismatch(code)


@dataclass(frozen=True)
class VoiceProfile:
    """A SIC voice profile (§2.1, Table 8): gender and age group."""

    name: str
    gender: str
    age: str


VOICE_PROFILES = (
    VoiceProfile("young_male", "male", "young"),
    VoiceProfile("young_female", "female", "young"),
    VoiceProfile("elderly_male", "male", "elderly"),
    VoiceProfile("elderly_female", "female", "elderly"),
)


def voice_profile(gender: str, age: str) -> VoiceProfile:
    """The profile with this gender and age."""
    for p in VOICE_PROFILES:
        if p.gender == gender and p.age == age:
            return p
    raise ConfigError(f"no voice profile for gender={gender!r}, age={age!r}")
