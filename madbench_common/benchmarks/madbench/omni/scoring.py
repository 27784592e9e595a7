"""Label probabilities from an omni model's next-token logits at the answer position.

Paper §5: AUC needs a score, not an answer: each option is scored by the probability of
the **first token** of its answer string at the position right after the prompt, where
the answer starts, then renormalised among the options (:func:`label_probs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from madbench_common.benchmarks.madbench.prompts import Question
from madbench_common.core.errors import ConfigError
from madbench_common.models.roles import OmniAnswer, OptionLogprob

__all__ = ["LabelProbs", "label_probs", "positive_score"]


@dataclass(frozen=True)
class LabelProbs:
    """Probabilities of a question's labels (summing to 1) and the options' total mass."""

    probs: dict[str, float]
    mass: float

    def ordered(self, labels: Sequence[str]) -> tuple[float, ...]:
        return tuple(self.probs[lab] for lab in labels)


def _token_labels(question: Question, options: Sequence[OptionLogprob]) -> dict[int, str]:
    """First token → the label it stands for; tokens two labels share are left out.

    A token shared by two options' surface forms (say a bare leading space) cannot tell
    them apart; an option left with no token of its own is a configuration error of the
    prompt for that tokenizer (:class:`ConfigError`)."""
    owners: dict[int, set[str]] = {}
    for opt in options:
        owners.setdefault(opt.token_id, set()).add(question.label_of(opt.text))
    owner = {t: next(iter(labs)) for t, labs in owners.items() if len(labs) == 1}
    if missing := [lab for lab in question.labels if lab not in owner.values()]:
        raise ConfigError(
            f"prompt {question.prompt} ({question.hash}), task {question.task}: every first "
            f"token of {missing} is shared with another option, so their scores cannot be "
            "told apart with this tokenizer")
    return owner


def label_probs(question: Question, answer: OmniAnswer) -> LabelProbs | None:
    """Each label's probability from ``answer.options`` (``None`` when none were exposed).

    An option's probability is the sum over the distinct first tokens of its surface forms
    (``fake``, ``Fake``, `` fake``…: a model may start its answer with any of them), and the
    options' probabilities are then renormalised among themselves: for two options
    ``P(positive) = P(pos) / (P(pos) + P(neg))``; for four letters the softmax over their
    log-probabilities (R, S, E, Q). ``mass`` (how much next-token probability the options
    hold together) is kept as a diagnostic: a small mass means the model meant to say
    something else first."""
    if not answer.options:
        return None
    owner = _token_labels(question, answer.options)
    logprob = {o.token_id: o.logprob for o in answer.options}
    per_label = {lab: [logprob[t] for t, owner_lab in owner.items() if owner_lab == lab]
                 for lab in question.labels}
    lp = np.array([np.logaddexp.reduce(v) if v else -np.inf for v in per_label.values()])
    if not np.isfinite(lp).any():
        return None
    top = lp.max()
    p = np.exp(lp - top)
    probs = p / p.sum()
    mass = float(np.exp(top) * p.sum())
    return LabelProbs({lab: float(x) for lab, x in zip(per_label, probs)}, mass)


def positive_score(probs: LabelProbs | None, positive: str) -> float | None:
    """P(positive label) among the options, or ``None`` without probabilities."""
    return None if probs is None else probs.probs[positive]
