"""DEAF judges: label an open answer Correct, Trap or Other against a trial's key (§2.4).

The paper's judge is an LLM: "All Audio MLLMs' responses are evaluated by DeepSeek-R1
serving as the LLM judge" (§3.1), into C (aligns with the acoustic ground truth), T
(aligns with the textual bias, semantic or prompt) or O (incorrect otherwise, vague, or
a refusal) (§2.4). :class:`LLMJudge` is that judge, :class:`RuleJudge` an offline keyword
option, and :func:`judge_answer` applies them by mode.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from madbench_common.benchmarks.deaf import lexicon
from madbench_common.benchmarks.deaf.design import VOICE_PROFILES, environment
from madbench_common.benchmarks.deaf.prompts import JudgePrompt
from madbench_common.benchmarks.deaf.rows import TrialRow
from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters.openai_compat import ChatClient

__all__ = ["DEFAULT_MODE", "JUDGE_MAX_TOKENS", "MODES", "R1_BASE_URL", "R1_MODEL", "LLMJudge",
           "RuleJudge", "Verdict", "describe", "judge_answer", "parse_label"]

MODES = ("llm", "rule+llm", "rule")
DEFAULT_MODE = "llm"
"""Every answer to the LLM judge (§2.4, §3.1)."""
R1_BASE_URL = "https://openrouter.ai/api/v1"
R1_MODEL = "deepseek/deepseek-r1"
"""DeepSeek-R1 (Guo et al. 2025; the 671B MoE released 20 January 2025) as OpenRouter names
it; ``deepseek/deepseek-r1-0528`` is its May 2025 update."""
JUDGE_MAX_TOKENS = 8192
_LABEL = re.compile(r"LABEL\s*[:=]\s*\**\s*([CTO])\b", re.IGNORECASE)


@dataclass(frozen=True)
class Verdict:
    label: str
    judge: str
    rationale: str = ""


def _decide(found: set[str], correct: str, trap: str) -> str | None:
    if len(found) != 1:
        return None
    (only,) = found
    return "C" if only == correct else "T" if only == trap else "O"


class RuleJudge:
    """Keyword rules for unambiguous answers; ``None`` when undecided.

    An **offline option**, not the paper's judge. It decides only exactly one asserted
    class (no hedge, no refusal) that is the acoustic truth (C), the text's class (T) or
    another class (O), or an empty answer or a bare refusal (O). Anything else (no class
    named: ``"I hear a vacuum cleaner"`` names an environment only by its sound; several
    classes, a hedge, a refusal with a class, a middle age on an age question, a Q2 answer
    with little overlap) it leaves undecided. Keys: ESC classes are emotions; BSC classes
    are DEMAND environments, and on a Cross-Mismatch (categories differ) an answer naming
    only a category decides by category; SIC compares, for each attribute in conflict
    (``attrs``), the answer's gender or age with the voice's (C) and the text's (T); mixed
    or missing attributes are undecided.
    """

    name = "rule"

    def judge(self, trial: TrialRow, response: str) -> Verdict | None:
        refusal = lexicon.is_refusal(response)
        if trial.question == "q2":
            return self._semantic(trial, response, refusal)
        found = self._classes(trial, response)
        if not found:  # an empty answer or a bare refusal; else it may describe a class
            return Verdict("O", self.name, "refusal") if refusal else None
        if refusal or lexicon.is_hedged(response):
            return None
        if trial.conflict == "sic" and "age" in trial.attrs and lexicon.names_middle_age(
                response):
            return None  # neither age group: the LLM weighs it
        label = self._label(trial, response, found)
        return None if label is None else Verdict(label, self.name, f"asserts {sorted(found)}")

    def _classes(self, trial: TrialRow, response: str) -> set[str]:
        if trial.conflict == "esc":
            return lexicon.emotions_in(response)
        if trial.conflict == "bsc":
            return lexicon.environments_in(response) or lexicon.categories_in(response)
        attrs = trial.attrs or ("gender", "age")
        found = set()
        if "gender" in attrs:
            found |= lexicon.genders_in(response)
        if "age" in attrs:
            found |= lexicon.ages_in(response)
        return found

    def _label(self, trial: TrialRow, response: str, found: set[str]) -> str | None:
        if trial.conflict == "esc":
            return _decide(found, trial.correct, trial.trap)
        if trial.conflict == "bsc":
            return _bsc_label(trial, response)
        return _sic_label(trial, response)

    def _semantic(self, trial: TrialRow, response: str, refusal: bool) -> Verdict | None:
        overlap = lexicon.content_overlap(trial.sentence, response)
        if overlap >= 0.4:
            return Verdict("C", self.name, f"restates {overlap:.0%} of the content words")
        if refusal:
            return Verdict("O", self.name, "refusal")
        return None


def _bsc_label(trial: TrialRow, response: str) -> str | None:
    envs = lexicon.environments_in(response)
    if envs:
        return _decide(envs, trial.correct, trial.trap)
    cats = lexicon.categories_in(response)
    correct, trap = environment(trial.correct).category, environment(trial.trap).category
    if correct == trap:
        return "O"  # a category cannot tell a Within-Mismatch apart: vague
    return _decide(cats, correct, trap)


def _sic_label(trial: TrialRow, response: str) -> str | None:
    voice = next(p for p in VOICE_PROFILES if p.name == trial.correct)
    trap = trial.trap.split("_")
    votes = []
    for attr in trial.attrs:
        said = lexicon.genders_in(response) if attr == "gender" else lexicon.ages_in(response)
        if len(said) != 1:
            return None if said else "O"
        (value,) = said
        truth = voice.gender if attr == "gender" else voice.age
        votes.append("C" if value == truth else "T" if value in trap else "O")
    return votes[0] if len(set(votes)) == 1 else "O"


def describe(trial: TrialRow, label: str) -> str:
    """A plain description of a class for the judge prompt."""
    if trial.conflict == "esc":
        return f"{label} (the speaker's emotion)"
    if trial.conflict == "bsc":
        env = environment(label)
        return f"{env.name} ({env.category} environment)"
    parts = label.split("_")
    if trial.attrs == ("gender",):
        parts = [p for p in parts if p in ("female", "male")]
    elif trial.attrs == ("age",):
        parts = [p for p in parts if p in ("young", "elderly")]
    return " ".join(parts) + " speaker"


def parse_label(text: str) -> str | None:
    """The last ``LABEL: X`` of a judge reply, else a lone C/T/O on the last line."""
    found = _LABEL.findall(text)
    if found:
        return str(found[-1]).upper()
    last = text.strip().splitlines()[-1].strip(" *.`").upper() if text.strip() else ""
    return last if last in ("C", "T", "O") else None


class LLMJudge:
    """An OpenAI-compatible chat model grading with the versioned judge prompt.

    Reads ``LABEL: C|T|O``. The default judge is DeepSeek-R1 (:data:`R1_MODEL` at
    :data:`R1_BASE_URL`, key in ``$JUDGE_API_KEY``): DeepSeek's own ``deepseek-reasoner``
    no longer serves R1 (it names the thinking mode of V3.1 and later), so the default is
    R1 (the January 2025 open weights) behind OpenRouter's OpenAI-compatible endpoint. Any
    other endpoint serving R1 works the same way, e.g. a self-hosted vLLM
    (``judge_base_url=http://<host>:8000/v1``, ``judge_model_id=deepseek-ai/DeepSeek-R1``).
    R1 thinks before it answers and its thinking counts against ``max_tokens`` on most
    servers, hence the default of 8,192.
    """

    def __init__(self, client: ChatClient, prompt: JudgePrompt,
                 max_tokens: int = JUDGE_MAX_TOKENS) -> None:
        self.client, self.prompt, self.max_tokens = client, prompt, max_tokens
        self.name = f"llm:{client.model}"

    def messages(self, trial: TrialRow, response: str) -> list[dict[str, str]]:
        semantic = trial.question == "q2"
        user = self.prompt.render(
            question=trial.prompt, response=response or "(empty response)",
            correct=trial.sentence if semantic else describe(trial, trial.correct),
            trap="" if semantic else describe(trial, trial.trap), semantic_check=semantic)
        return [{"role": "system", "content": self.prompt.system},
                {"role": "user", "content": user}]

    def judge(self, trial: TrialRow, response: str) -> Verdict:
        reply = self.client.complete(self.messages(trial, response),
                                     max_tokens=self.max_tokens)
        label = parse_label(reply)
        if label is None or (trial.question == "q2" and label == "T"):
            return Verdict("O", self.name, f"unparsed judge reply: {reply[-120:]!r}")
        return Verdict(label, self.name, reply.strip().splitlines()[0][:200] if reply else "")


def judge_answer(trial: TrialRow, response: str, mode: str,
                 rule: RuleJudge, llm: LLMJudge | None) -> Verdict:
    """One verdict by ``mode``: ``llm`` (default: every answer to the LLM, as the paper
    does), ``rule+llm`` (rules first, the LLM for the rest: cheaper, not the paper's
    protocol) or ``rule`` (offline: an undecided answer is labelled O by judge ``none``, and
    the report counts those)."""
    if mode not in MODES:
        raise ConfigError(f"judge mode {mode!r} not in {MODES}")
    if mode != "llm":
        verdict = rule.judge(trial, response)
        if verdict is not None:
            return verdict
    if llm is None:
        if mode == "llm":
            raise ConfigError("judge mode 'llm' needs judge_base_url and judge_model_id")
        return Verdict("O", "none", "undecided by the rules; no LLM judge configured")
    return llm.judge(trial, response)
