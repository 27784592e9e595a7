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
    "BEACH",
    "CATEGORIES",
    "CONFLICTS",
    "CROSS_CATEGORY",
    "ELEVENLABS_VOICES",
    "EMOTIONS",
    "ENVIRONMENTS",
    "EXTENSION_LEVEL",
    "LEVEL2_BSC_CLAIMS",
    "LEVELS",
    "SNRS_DB",
    "VOICE_PROFILES",
    "Environment",
    "VoiceProfile",
    "category_of",
    "cross_mismatch",
    "environment",
    "level2_bsc_claim",
    "level2_extension_claims",
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


LEVEL2_BSC_CLAIMS = MappingProxyType({"Street": "beach", "Nature": "STRAFFIC",
                                      "Office": "NPARK"})
"""Background category → what a Level 2 BSC prompt claims (Appendix A.3, "BSC prompts"):
"Background is traffic → 'This audio was recorded at a quiet beach with ocean waves'",
"Background is nature → '… in a busy city with traffic noise'" (DEMAND's STRAFFIC) and
"Background is office → '… outdoors in a forest with birds'" (DEMAND's NPARK). "Traffic" is
read as DEMAND's Street category, as "nature" and "office" name categories. A beach is no
DEMAND environment, so a traffic-background trial has no same-sentence control clip (eq. 2)
and is quarantined (``control_unavailable``). A.3 names no claim for the Domestic, Public
and Transportation categories: they have no paper Level 2 trial."""

BEACH = "beach"
"""The one A.3 claim that names no DEMAND environment."""

EXTENSION_LEVEL = "L2x"
"""Level 2 trials of this project's own, kept out of the paper's tables: each neutral clip
asked with a Within claim (:func:`within_mismatch`) and, over the categories A.3 does not
cover, a Cross claim (:func:`cross_mismatch`), so that an EDI under a misleading prompt
(Table 4's L2 column, whose construction the paper does not give) can be reported apart."""


def level2_bsc_claim(code: str) -> str | None:
    """The environment a paper Level 2 BSC prompt claims over background ``code``, or None.

    §2.3 / Appendix A.3: a Level 2 prompt describes an environment the neutral-content
    audio does not carry, chosen by the background's category (:data:`LEVEL2_BSC_CLAIMS`).
    """
    return LEVEL2_BSC_CLAIMS.get(category_of(code))


def level2_extension_claims(code: str) -> list[tuple[str, str]]:
    """``(claim, subdim)`` of this project's own Level 2 BSC trials over ``code``
    (:data:`EXTENSION_LEVEL`): a Within claim always, a Cross claim where A.3 has none."""
    out = [(within_mismatch(code), "within")]
    if level2_bsc_claim(code) is None:
        out.append((cross_mismatch(code), "cross"))
    return out


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
