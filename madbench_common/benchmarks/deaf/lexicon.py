"""Keyword readings of free-form answers: which emotions, environments, genders and ages an
answer asserts, whether it refuses or hedges, and how much of a sentence it restates.

The rule judge (:mod:`madbench_common.benchmarks.deaf.judge`) decides only when these readings are
unambiguous; everything else goes to the LLM judge. A term preceded within three words
by a negation (``not``, ``n't``, ``no``, ``never``, ``neither``, ``nor``, ``without``,
``rather than``, ``instead of``) is not an assertion.
"""

from __future__ import annotations

import re

from madbench_common.benchmarks.deaf.design import ENVIRONMENTS

__all__ = ["ages_in", "categories_in", "content_overlap", "emotions_in", "environments_in",
           "genders_in", "is_hedged", "is_refusal", "names_middle_age"]

_NEG = re.compile(r"\b(not|no|never|neither|nor|without|hardly|n't|rather than|instead of)\b"
                  r"|n't\b", re.IGNORECASE)

EMOTION_TERMS = {
    "angry": r"angry|anger|angrily|furious|fury|irritat\w*|annoy\w*|frustrat\w*|rage|enraged|"
             r"outrage\w*|livid|hostile|agitated|indignant|mad",
    "happy": r"happy|happiness|happily|joy\w*|cheerful\w*|upbeat|excited|excitement|glad|"
             r"delighted|pleased|elated|thrilled|enthusiastic|amused",
    "sad": r"sad|sadness|sadly|sorrow\w*|melanchol\w*|depress\w*|unhappy|gloomy|grief|"
           r"griev\w*|mourn\w*|somber|sombre|dejected|despair\w*|downcast|heartbroken|"
           r"disappointed",
    "neutral": r"neutral|calm\w*|flat|monoton\w*|matter-of-fact|emotionless|unemotional|"
               r"relaxed|composed|even(?:-| )toned|no (?:particular|strong|clear|obvious) "
               r"emotion",
}
ENV_TERMS = {
    "DKITCHEN": r"kitchen|cooking|dishes|kettle|stove|frying",
    "DLIVING": r"living room|lounge|sofa|couch|television|tv|sitting room",
    "DWASHING": r"laundry|washing machine|washer|dryer|utility room|spin cycle",
    "NFIELD": r"sports? (?:field|ground|pitch)|playing field|football (?:pitch|field)|stadium|"
              r"soccer|match|game in progress",
    "NPARK": r"park|forest|woods?|woodland|birds?|birdsong|garden",
    "NRIVER": r"river\w*|stream|creek|brook|waterfall|flowing water|running water",
    "OHALLWAY": r"hallway|corridor",
    "OMEETING": r"meeting|conference room|boardroom",
    "OOFFICE": r"office|typing|keyboard|workplace|cubicle",
    "PCAFETER": r"cafeteria|canteen|food court|dining hall",
    "PRESTO": r"restaurant|diner|bistro",
    "PSTATION": r"(?:train|railway|bus|subway|metro) station|station|platform|airport|terminal|"
                r"announcements?",
    "SCAFE": r"caf[eé]|coffee shop|terrace|patio|sidewalk caf[eé]",
    "SPSQUARE": r"square|plaza|market\w*",
    "STRAFFIC": r"traffic|street|road|intersection|honking|horns?|busy city|cars? passing|"
                r"urban",
    "TBUS": r"bus",
    "TCAR": r"(?:in|inside) (?:a|the) (?:moving )?car|car interior|driving|passenger seat",
    "TMETRO": r"metro|subway|underground|tube|tram|train carriage|"
              r"(?:on|inside|aboard) (?:a|the) train(?! station)",
}
CATEGORY_TERMS = {
    "Domestic": r"at home|in (?:a|the|someone's) (?:house|home|flat|apartment)|domestic|"
                r"household|indoors at home",
    "Nature": r"nature|outdoors in nature|natural (?:setting|environment)|countryside",
    "Office": r"office building|work ?place|corporate",
    "Public": r"public (?:place|space|building|venue)|crowded indoor",
    "Street": r"outdoors? (?:on|in) (?:a|the) street|city street|urban street|downtown",
    "Transportation": r"vehicle|transport\w*|in transit|commut\w*|moving vehicle",
}
GENDER_TERMS = {
    "female": r"female|woman|women|girl|lady|feminine|mother|grandmother|she",
    "male": r"male|man|men|boy|guy|gentleman|masculine|father|grandfather|he",
}
AGE_TERMS = {
    "young": r"young\w*|youth\w*|teen\w*|child|kid|boy|girl|adolescent|juvenile|student|"
             r"(?:in (?:his|her|their) )?(?:teens|twenties|20s)",
    "elderly": r"elderly|old|older|senior|elder|grandmother|grandfather|"
               r"(?:in (?:his|her|their) )?(?:sixties|seventies|eighties|nineties|"
               r"60s|70s|80s|90s)",
}
_REFUSAL = re.compile(
    r"\b(?:i (?:can ?not|can't|cannot|am unable|'m unable|am not able|'m not able|"
    r"don't have|do not have)|unable to (?:determine|tell|identify|hear|access)|"
    r"not possible to (?:determine|tell)|as an ai|no audio|cannot (?:determine|tell|hear)|"
    r"can't (?:determine|tell|hear)|i'm sorry|there is no (?:audio|recording))", re.IGNORECASE)
_HEDGE = re.compile(r"\b(?:maybe|perhaps|possibly|might|could be|may be|either|unclear|"
                    r"hard to (?:tell|say)|difficult to (?:tell|say|determine)|not sure|"
                    r"uncertain|ambiguous|mix(?:ed|ture) of|or)\b", re.IGNORECASE)
_MIDDLE_AGE = re.compile(r"\bmiddle[- ]?aged?\b|\b(?:in (?:his|her|their) )?(?:forties|fifties|"
                         r"40s|50s)\b", re.IGNORECASE)
_AGE_NUMBER = re.compile(r"\b(\d{1,3})[- ]?(?:years?|yrs?)[- ]old\b|\baged (?:about |around |"
                         r"roughly |approximately )?(\d{1,3})\b", re.IGNORECASE)
_STOP = frozenset([
    "that", "this", "with", "have", "from", "they", "them", "their", "there", "what", "when",
    "where", "which", "while", "about", "would", "could", "should", "your", "just", "been",
    "were", "will", "into", "than", "then", "some", "very", "also", "only", "over", "after",
    "before", "because", "again", "still", "every"])


def _asserted(text: str, terms: dict[str, str]) -> set[str]:
    found = set()
    for label, pattern in terms.items():
        for m in re.finditer(rf"\b(?:{pattern})\b", text, re.IGNORECASE):
            window = text[max(0, m.start() - 40): m.start()]
            if not _NEG.search(" ".join(window.split()[-3:])):
                found.add(label)
                break
    return found


def emotions_in(text: str) -> set[str]:
    return _asserted(text, EMOTION_TERMS)


def environments_in(text: str) -> set[str]:
    """DEMAND codes the answer names (``car`` alone and ``train`` alone name none)."""
    return _asserted(text, ENV_TERMS)


def categories_in(text: str) -> set[str]:
    """Categories named directly, plus those of the environments named."""
    cats = _asserted(text, CATEGORY_TERMS)
    by_code = {e.code: e.category for e in ENVIRONMENTS}
    return cats | {by_code[c] for c in environments_in(text)}


def genders_in(text: str) -> set[str]:
    return _asserted(text, GENDER_TERMS)


def ages_in(text: str) -> set[str]:
    """``young`` / ``elderly`` the answer asserts. A middle age (``middle-aged``, ``in his
    forties``, 40–59 years) is neither (:func:`names_middle_age`), and ``aged`` is no age
    word: ``middle-aged`` and ``aged 30`` must not read as elderly."""
    found = _asserted(re.sub(_AGE_NUMBER, "", text), AGE_TERMS)
    for m in _AGE_NUMBER.finditer(text):
        years = int(m.group(1) or m.group(2))
        found |= {"young"} if years < 40 else {"elderly"} if years >= 60 else set()
    return found


def names_middle_age(text: str) -> bool:
    """Whether the answer places the speaker in middle age (neither SIC age group)."""
    if _MIDDLE_AGE.search(text):
        return True
    return any(40 <= int(m.group(1) or m.group(2)) < 60 for m in _AGE_NUMBER.finditer(text))


def is_refusal(text: str) -> bool:
    return not text.strip() or bool(_REFUSAL.search(text))


def is_hedged(text: str) -> bool:
    return bool(_HEDGE.search(text))


def _content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z']+", text.lower()) if len(w) >= 4 and w not in _STOP}


def content_overlap(sentence: str, answer: str) -> float:
    """Share of the sentence's content words (≥ 4 letters, not stop words) in the answer."""
    words = _content_words(sentence)
    return len(words & _content_words(answer)) / len(words) if words else 0.0
