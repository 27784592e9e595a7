"""Versioned DEAF prompt files: question templates, misleading prompts, the judge prompt.

``madbench_common/data/deaf_prompts.yaml`` holds Q1/Q2 per conflict type and the claim
sentences used as Level 2 and Level 3 prompts (§2.2–2.3, Appendix A.3);
``deaf_judge.yaml`` the LLM judge's instructions (§2.4, Appendix A.5). Each loaded file
has a ``version``: the first 12 hex digits of the sha256 of its canonical JSON, which every
trial and verdict row records, so a wording change is visible in every result it touches.
A user may pass their own file of the same shape (``prompts=`` / ``judge_prompt=``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from madbench_common.benchmarks.deaf.design import CONFLICTS, EMOTIONS, ENVIRONMENTS, VOICE_PROFILES
from madbench_common.core.errors import ConfigError

__all__ = ["JudgePrompt", "PromptSet", "content_version", "load_judge_prompt", "load_prompts"]


def content_version(data: Any) -> str:
    """The version hash of a prompt file's parsed content (12 hex digits)."""
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def _read_yaml(path: str, packaged: str) -> tuple[dict[str, Any], str]:
    if path:
        text, where = Path(path).read_text(encoding="utf-8"), path
    else:
        text = resources.files("madbench_common").joinpath(f"data/{packaged}").read_text(
            encoding="utf-8")
        where = f"madbench_common/data/{packaged}"
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping")
    return data, where


@dataclass(frozen=True)
class PromptSet:
    """Questions and claims of one prompt file, with its version hash."""

    questions: dict[str, dict[str, str]]
    claims: dict[str, dict[str, str]]
    esc_level2: dict[str, str]
    version: str
    source: str

    def question(self, conflict: str, question: str) -> str:
        return self.questions[conflict][question]

    def claim(self, conflict: str, label: str) -> str:
        try:
            return self.claims[conflict][label]
        except KeyError:
            raise ConfigError(f"{self.source}: no {conflict} claim for {label!r}") from None

    def text(self, conflict: str, question: str, claim: str = "") -> str:
        """What the model is asked: the claim (if any) prepended to the question (§2.3)."""
        q = self.question(conflict, question)
        return f"{self.claim(conflict, claim)} {q}" if claim else q


def _check_prompts(p: PromptSet) -> PromptSet:
    need = {"esc": set(EMOTIONS), "bsc": {e.code for e in ENVIRONMENTS},
            "sic": {"female", "male", "young", "elderly", *(v.name for v in VOICE_PROFILES)}}
    for conflict in CONFLICTS:
        if set(p.questions.get(conflict, {})) != {"q1", "q2"}:
            raise ConfigError(f"{p.source}: questions.{conflict} needs exactly q1 and q2")
        if missing := need[conflict] - set(p.claims.get(conflict, {})):
            raise ConfigError(f"{p.source}: claims.{conflict} lacks {sorted(missing)}")
    if set(p.esc_level2) != set(EMOTIONS) - {"neutral"} or not set(
            p.esc_level2.values()) <= set(EMOTIONS):
        raise ConfigError(f"{p.source}: esc_level2 must map angry, happy, sad to emotions")
    return p


def load_prompts(path: str = "") -> PromptSet:
    """The packaged prompt file, or the user's file at ``path``."""
    data, where = _read_yaml(path, "deaf_prompts.yaml")
    try:
        p = PromptSet(dict(data["questions"]), dict(data["claims"]), dict(data["esc_level2"]),
                      content_version(data), where)
    except KeyError as exc:
        raise ConfigError(f"{where}: missing key {exc}") from None
    return _check_prompts(p)


@dataclass(frozen=True)
class JudgePrompt:
    """The LLM judge's system and user templates (``str.format`` fields) and version."""

    system: str
    user: str
    q2_user: str
    version: str

    def render(self, *, question: str, response: str, correct: str, trap: str,
               semantic_check: bool) -> str:
        template = self.q2_user if semantic_check else self.user
        return template.format(question=question, response=response, correct=correct,
                               trap=trap)


def load_judge_prompt(path: str = "") -> JudgePrompt:
    """The packaged judge prompt, or the user's file at ``path``."""
    data, where = _read_yaml(path, "deaf_judge.yaml")
    try:
        return JudgePrompt(data["system"].strip(), data["user"].strip(),
                           data["q2_user"].strip(), content_version(data))
    except (KeyError, AttributeError) as exc:
        raise ConfigError(f"{where}: needs string keys system, user, q2_user ({exc})") from None
