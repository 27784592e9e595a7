"""Parsing a generated answer into one of a question's labels, ``refusal`` or ``unparsed``.

The parser never guesses: an answer that does not clearly name one option is
``unparsed`` (or ``refusal`` when the model declines), and such rows are scored from the
option logits where the model exposes them, else excluded (paper §5: zero-shot prompts).
The rules, in order, are on :func:`parse_answer`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from madbench_common.benchmarks.madbench.prompts import Question

__all__ = ["REFUSAL", "UNPARSED", "parse_answer", "parse_rates"]

REFUSAL = "refusal"
UNPARSED = "unparsed"
_REFUSAL_CUES = (
    "i'm sorry", "i am sorry", "sorry,", "i cannot", "i can't", "i can not", "unable to",
    "not able to", "cannot determine", "can't determine", "cannot tell", "can't tell",
    "impossible to", "not possible to", "as an ai", "i don't know", "i do not know",
    "hard to tell", "hard to say", "difficult to determine", "difficult to tell",
    "difficult to say", "not sure",
    "no way to", "i'm not able", "无法", "不能确定", "不确定", "抱歉", "je ne peux pas",
    "no puedo", "no es posible", "ich kann nicht", "nicht möglich",
)
_NEGATIONS = frozenset({"not", "never", "no", "nicht", "pas", "isnt", "nor"})
_CJK_NEGATIONS = "不非没"
_STRIP = str.maketrans({c: " " for c in "*_`#>~\"“”«»„"})
_EXPLICIT = re.compile(
    r"(?:\banswer\s*(?:is|would be|:)|\b(?:option|choice)\s*:?|答案\s*(?:是|为|:|：)?)"
    r"\s*[\s:：(\[']*(\w[\w'-]*)", re.IGNORECASE)


def _is_cjk(text: str) -> bool:
    return any(unicodedata.category(c) == "Lo" and "\u2e80" <= c <= "\u9fff" for c in text)


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("’", "'").replace("‘", "'")
    return " ".join(text.translate(_STRIP).split())


def _forms(q: Question) -> list[tuple[str, str]]:
    """(lower-cased form, label) for every answer and synonym, longest first."""
    pairs = [(f.lower(), o.label) for o in q.options for f in (o.answer, *o.synonyms)]
    return sorted(dict.fromkeys(pairs), key=lambda p: -len(p[0]))


def _word_at(text: str, start: int, form: str) -> bool:
    """Whether ``form`` occurs at ``start`` as a whole word (CJK forms need no boundary)."""
    end = start + len(form)
    if text[start:end] != form:
        return False
    if _is_cjk(form):
        return True
    before = text[start - 1] if start else " "
    after = text[end] if end < len(text) else " "
    return not (before.isalnum() or after.isalnum())


def _leading(clean: str, q: Question) -> str | None:
    body = clean.lstrip(" .,:;!?'([{-")
    low = body.lower()
    for form, label in _forms(q):
        if not _word_at(low, 0, form):
            continue
        if len(form) == 1 and not _is_cjk(form) and not re.match(r"[A-Z](?!\.\w)", body):
            continue  # a letter option must be upper case and not an abbreviation ("e.g.")
        rest = low[len(form):].lstrip(" ,.!")
        return None if re.match(r"(or|/|或)\b", rest) else label
    return None


def _explicit(text: str, q: Question) -> str | None:
    lookup = dict((f, lab) for f, lab in _forms(q))
    for m in _EXPLICIT.finditer(text):
        label = lookup.get(m.group(1).lower())
        if label is not None:
            return label
    return None


def _negated(low: str, start: int) -> bool:
    """A negation among the two words (or the CJK character) just before ``start``."""
    if start and low[start - 1] in _CJK_NEGATIONS:
        return True
    words = re.findall(r"[\w']+", low[max(0, start - 24):start])[-2:]
    return any(w in _NEGATIONS or w.endswith("n't") for w in words)


def _mentions(low: str, q: Question) -> set[str]:
    """Labels named in the text (longest forms first, each span used once, negations out)."""
    taken = [False] * len(low)
    found: set[str] = set()
    for form, label in _forms(q):
        if len(form) < (2 if _is_cjk(form) else 4):
            continue
        for m in re.finditer(re.escape(form), low):
            s, e = m.start(), m.end()
            if any(taken[s:e]) or not _word_at(low, s, form):
                continue
            taken[s:e] = [True] * (e - s)
            if not _negated(low, s):
                found.add(label)
    return found


def _letters(text: str, q: Question) -> str | None:
    answers = {o.answer.upper(): o.label for o in q.options if len(o.answer) == 1}
    if len(answers) != len(q.options):
        return None
    hits = {answers[t] for t in re.findall(r"(?<![\w.])([A-Z])(?![\w'])", text) if t in answers}
    return hits.pop() if len(hits) == 1 else None


def _refusal(low: str) -> bool:
    return any(cue in low for cue in _REFUSAL_CUES)


def parse_answer(text: str, question: Question) -> str:
    """The label ``text`` gives for ``question``, or ``refusal`` / ``unparsed``.

    Rules, in order, on the answer with Markdown emphasis, quotes and surrounding
    punctuation removed (case-insensitive unless noted):

    1. **Leading answer**: the answer starts with an option's answer or synonym, as a whole
       word (``Fake.``, ``**Real**``, ``S``, ``No, …``; a letter option in upper case and
       not as an abbreviation like ``E.g.``), unless it goes on with "or" (``real or
       fake?`` is an echo, not an answer). Single CJK characters (``假``, ``是``) count only
       here.
    2. **Explicit answer**: "answer is X", "answer: X", "option X", "答案是X".
    3. **Refusal**: the answer declines or says it cannot tell (``I'm sorry``, ``cannot
       determine``, ``无法``…) → ``refusal``.
    4. **Single mention**: exactly one label is named in the text by an answer or synonym
       of at least four letters (or two CJK characters), not negated ("not", "n't",
       "never", "no" just before it); a longer phrase hides the shorter ones inside it
       ("not authentic" is one mention of fake, not one of real).
    5. **Single letter**: for letter options (R/S/E/Q), exactly one of the letters stands
       alone, upper case, in the text.
    6. Otherwise ``unparsed``.
    """
    clean = _normalise(text)
    low = clean.lower()
    if not low:
        return UNPARSED
    for rule in (lambda: _leading(clean, question), lambda: _explicit(clean, question)):
        if (label := rule()) is not None:
            return label
    if _refusal(low):
        return REFUSAL
    mentioned = _mentions(low, question)
    if len(mentioned) == 1:
        return mentioned.pop()
    if not mentioned and (letter := _letters(clean, question)) is not None:
        return letter
    return UNPARSED


def parse_rates(parsed: Iterable[str], labels: Sequence[str]) -> dict[str, float]:
    """Share of each label, then ``refusal`` and ``unparsed`` (all keys, zeros included)."""
    items = list(parsed)
    keys = [*labels, REFUSAL, UNPARSED]
    n = max(1, len(items))
    return {k: sum(p == k for p in items) / n for k in keys}
