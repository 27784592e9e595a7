"""DEAF trials: the test query, its matched-audio control query and the answer key, per level.

A *query* is one model input: a clip, a question (Q1 acoustic, Q2 semantic) and an
optional misleading claim prepended to it (§2.3). A *trial* is a test query on mismatched
audio and, for ASS (§2.5: "the same text and question under two conditions: matched audio
and mismatched audio"), the control query on matched audio. Both answers are judged
against the test's key, so a model that answers from the words gets the same label twice
(ASS 0). Levels: L1 and L3 (:func:`_level1_3`), L2 (:func:`_level2_claims`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Protocol

from madbench_common.benchmarks.deaf.design import (
    BEACH,
    EXTENSION_LEVEL,
    VOICE_PROFILES,
    level2_bsc_claim,
    level2_extension_claims,
)
from madbench_common.benchmarks.deaf.prompts import PromptSet
from madbench_common.benchmarks.deaf.rows import TrialRow

__all__ = ["Clip", "build_trials", "query_id", "sic_conflict_attrs"]


class Clip(Protocol):
    """What trials need of a stimulus (a :class:`StimulusRow` or a :class:`ClipSpec`)."""

    @property
    def stimulus_id(self) -> str: ...
    @property
    def conflict(self) -> str: ...
    @property
    def sentence_id(self) -> str: ...
    @property
    def subdim(self) -> str: ...
    @property
    def condition(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def semantic(self) -> str: ...
    @property
    def acoustic(self) -> str: ...
    @property
    def matched(self) -> bool: ...
    @property
    def setting(self) -> str: ...
    @property
    def pairing(self) -> str: ...
    @property
    def snr_db(self) -> int: ...


def query_id(stimulus_id: str, question: str, claim: str = "") -> str:
    """``<stimulus>|<question>|<claim or ->``: one model input."""
    return f"{stimulus_id}|{question}|{claim or '-'}"


def sic_conflict_attrs(voice: str, claim: str) -> tuple[str, ...]:
    """The attributes (``gender``, ``age``) on which a SIC claim contradicts the voice."""
    profile = next(p for p in VOICE_PROFILES if p.name == voice)
    parts = claim.split("_")
    attrs = []
    if any(g in parts for g in ("female", "male")) and profile.gender not in parts:
        attrs.append("gender")
    if any(a in parts for a in ("young", "elderly")) and profile.age not in parts:
        attrs.append("age")
    return tuple(attrs)


class _Index:
    """Clips by the keys that find a trial's control clip."""

    def __init__(self, clips: Iterable[Clip]) -> None:
        self.by_key: dict[tuple[str, str, str, int], Clip] = {}
        for c in clips:
            self.by_key[(c.sentence_id, c.setting, c.acoustic, c.snr_db)] = c

    def find(self, like: Clip, acoustic: str) -> Clip | None:
        """``like``'s sentence (and setting, SNR) with audio class ``acoustic``."""
        return self.by_key.get((like.sentence_id, like.setting, acoustic, like.snr_db))


def _is_conflict(c: Clip) -> bool:
    return not c.matched and (c.conflict == "esc" or c.semantic != "neutral")


def _subdim(c: Clip) -> str:
    return c.pairing if c.conflict == "bsc" else c.subdim


def _trial(c: Clip, control: Clip | None, level: str, question: str, claim: str,
           trap: str, prompts: PromptSet, subdim: str = "") -> TrialRow:
    attrs = sic_conflict_attrs(c.acoustic, trap) if c.conflict == "sic" and trap else ()
    test_q = query_id(c.stimulus_id, question, claim)
    return TrialRow(
        trial_id=f"{level}|{test_q}", conflict=c.conflict, level=level, question=question,
        subdim=subdim or _subdim(c), condition=c.condition, setting=c.setting, snr_db=c.snr_db,
        sentence_id=c.sentence_id, sentence=c.text, claim=claim,
        prompt=prompts.text(c.conflict, question, claim), prompt_version=prompts.version,
        test_query=test_q, test_stimulus=c.stimulus_id,
        control_query=query_id(control.stimulus_id, question, claim) if control else "",
        control_stimulus=control.stimulus_id if control else "",
        correct=c.acoustic if question == "q1" else c.text,
        trap=trap if question == "q1" else "", attrs=attrs)


def _level1_3(c: Clip, index: _Index, prompts: PromptSet) -> list[TrialRow]:
    """L1: a mismatched clip, no prompt; Q1 with its control, and Q2 (the semantic check)
    without one. Mismatched means the audio's class differs from a class the words imply;
    ESC's neutral sentences count (neutral is an ESC class, as in the paper's 936
    mismatched clips), BSC's and SIC's neutral sentences do not (they imply no environment
    or voice) and serve Level 2. L3: the same clips with the claim of the words' own
    class; the control is the matched clip under the same claim."""
    control = index.find(c, _matched_acoustic(c, index))
    q1 = [_trial(c, control, "L1", "q1", "", c.semantic, prompts),
          _trial(c, control, "L3", "q1", c.semantic, c.semantic, prompts)]
    if control is None:  # its matched clip was quarantined (e.g. a missing background)
        q1 = [dataclasses.replace(t, status="rejected", reason="control_missing",
                                  detail=f"no matched clip of {c.sentence_id}") for t in q1]
    return [*q1, _trial(c, None, "L1", "q2", "", "", prompts)]


def _matched_acoustic(c: Clip, index: _Index) -> str:
    if c.conflict == "sic":
        for p in VOICE_PROFILES:
            m = index.find(c, p.name)
            if m is not None and m.matched:
                return p.name
        return ""
    return c.semantic


def _level2_claims(c: Clip, prompts: PromptSet) -> list[tuple[str, str, str, str]]:
    """(level, claim, acoustic label of the control clip, subdim) for a neutral clip.

    The control is the *same sentence* whose audio has the claimed property (eq. 2: "the
    same text and question under two conditions"). ESC: each non-neutral prosody with the
    Appendix A.3 claim (happy → sad, sad → happy, angry → calm). SIC: each voice twice,
    once claiming the other gender and once the other age group. BSC: each neutral clip
    with A.3's claim for its background's category (:data:`~.design.LEVEL2_BSC_CLAIMS`:
    traffic → beach, nature → city traffic, office → forest), its control the same
    sentence mixed over the claimed environment (the clip plan adds those clips). A beach
    is no DEMAND environment, so those trials are built as ``rejected``
    (``control_unavailable``) and counted, never scored. This project's own Within/Cross
    claims (:func:`~.design.level2_extension_claims`) go to level
    :data:`~.design.EXTENSION_LEVEL` (``L2x``), out of the paper's tables.
    """
    if c.conflict == "esc":
        if c.acoustic == "neutral":
            return []
        claim = prompts.esc_level2[c.acoustic]
        return [("L2", claim, claim, "")]
    if c.conflict == "bsc":
        paper = level2_bsc_claim(c.acoustic)
        own = [(EXTENSION_LEVEL, env, env, sub) for env, sub in level2_extension_claims(c.acoustic)]
        return [("L2", paper, paper, "cross"), *own] if paper else own
    voice = next(p for p in VOICE_PROFILES if p.name == c.acoustic)
    gender = "female" if voice.gender == "male" else "male"
    age = "young" if voice.age == "elderly" else "elderly"
    return [("L2", gender, f"{voice.age}_{gender}", ""), ("L2", age, f"{age}_{voice.gender}", "")]


def _level2(c: Clip, index: _Index, prompts: PromptSet) -> list[TrialRow]:
    out = []
    for level, claim, control_label, subdim in _level2_claims(c, prompts):
        control = index.find(c, control_label)
        t = _trial(c, control, level, "q1", claim, claim, prompts, subdim)
        if control_label == BEACH:
            t = dataclasses.replace(t, status="rejected", reason="control_unavailable",
                                    detail="A.3's claim names a beach, which no DEMAND "
                                           "environment records: no same-sentence control")
        elif control is None:
            t = dataclasses.replace(t, status="rejected", reason="control_missing",
                                    detail=f"no clip of {c.sentence_id} over {control_label}")
        out.append(t)
    return out


def build_trials(clips: Sequence[Clip], prompts: PromptSet) -> list[TrialRow]:
    """Every trial of levels L1–L3 over ``clips`` (the ok stimuli of one run), sorted by id.

    A trial whose control clip is missing from the run (quarantined upstream, or left out
    of a subset) is kept as a ``rejected`` row (``control_missing``) and scored nowhere, so
    Acc and ASS are computed over the same trials."""
    index = _Index(clips)
    out: list[TrialRow] = []
    for c in clips:
        if c.pairing == "control":  # a control-only clip: never a test clip
            continue
        if (c.semantic == "neutral" and c.conflict in ("bsc", "sic")) or (
                c.conflict == "esc" and c.semantic == "neutral" and not c.matched):
            out += _level2(c, index, prompts)
        if _is_conflict(c):
            out += _level1_3(c, index, prompts)
    return sorted(out, key=lambda t: t.trial_id)
