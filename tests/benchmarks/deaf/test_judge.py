"""The DEAF judges on constructed answers: clear, trap, other, refusals, hedges, negations."""

from __future__ import annotations

import pytest

from madbench_common.benchmarks.deaf.judge import (
    LLMJudge,
    RuleJudge,
    Verdict,
    describe,
    judge_answer,
    parse_label,
)
from madbench_common.benchmarks.deaf.prompts import load_judge_prompt
from madbench_common.benchmarks.deaf.rows import TrialRow
from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters.openai_compat import ChatClient
from madbench_common.models.api_stub import STUB_KEY, stub_server

ESC = TrialRow(trial_id="t-esc", conflict="esc", level="L1", question="q1", correct="angry",
               trap="happy", prompt="What emotion does the speaker express in this recording?")
SIC = TrialRow(trial_id="t-sic", conflict="sic", level="L1", question="q1",
               correct="young_male", trap="female", attrs=("gender",))
SIC_BOTH = TrialRow(trial_id="t-sic2", conflict="sic", level="L1", question="q1",
                    correct="young_male", trap="elderly_female", attrs=("gender", "age"))
SIC_AGE = TrialRow(trial_id="t-sic3", conflict="sic", level="L2", question="q1",
                   correct="young_male", trap="elderly", attrs=("age",))
BSC_CROSS = TrialRow(trial_id="t-bx", conflict="bsc", level="L1", question="q1",
                     subdim="cross", correct="DLIVING", trap="SPSQUARE")
BSC_WITHIN = TrialRow(trial_id="t-bw", conflict="bsc", level="L1", question="q1",
                      subdim="within", correct="DLIVING", trap="DKITCHEN")
Q2 = TrialRow(trial_id="t-q2", conflict="esc", level="L1", question="q2",
              sentence="I lost my job today, and I don't know how to tell my family.",
              prompt="What is the speaker mainly talking about?")

RULE = RuleJudge()


def _label(trial: TrialRow, answer: str) -> str | None:
    v = RULE.judge(trial, answer)
    return None if v is None else v.label


@pytest.mark.parametrize(("answer", "label"), [
    ("The speaker sounds angry.", "C"),
    ("**Angry.**", "C"),
    ("They sound happy and excited.", "T"),
    ("The speaker sounds sad.", "O"),
    ("The speaker does not sound happy at all; the voice is furious.", "C"),
    ("I'm sorry, I can't determine emotions from audio.", "O"),
    ("", "O"),
    ("The speaker is talking about a flight.", None),  # names no emotion: not a refusal
    ("It could be happy or angry, hard to tell.", None),
    ("Maybe angry.", None),
    ("The words are happy but the tone sounds angry.", None),
    ("I cannot be certain, but it sounds angry.", None),
])
def test_rule_judge_esc(answer: str, label: str | None) -> None:
    assert _label(ESC, answer) == label


@pytest.mark.parametrize(("trial", "answer", "label"), [
    (SIC, "A young man.", "C"),
    (SIC, "An elderly woman.", "T"),
    (SIC, "The speaker is a young person.", None),  # names no gender: the LLM decides
    (SIC_AGE, "A middle-aged man.", None),  # was T: "aged" counted as elderly
    (SIC_AGE, "An elderly man.", "T"),
    (SIC_AGE, "He sounds about 45 years old.", None),
    (SIC_BOTH, "A middle-aged man.", None),
    (SIC_BOTH, "A man aged 30.", "C"),
    (SIC, "Hard to say whether male or female.", None),
    (SIC_BOTH, "A young man, maybe a student.", None),
    (SIC_BOTH, "A young man.", "C"),
    (SIC_BOTH, "He sounds like a 20-year-old man.", "C"),
    (SIC_BOTH, "An old woman.", "T"),
    (SIC_BOTH, "A young woman.", "O"),
    (SIC_BOTH, "A man.", "O"),
])
def test_rule_judge_sic(trial: TrialRow, answer: str, label: str | None) -> None:
    assert _label(trial, answer) == label


@pytest.mark.parametrize(("trial", "answer", "label"), [
    (BSC_CROSS, "In a living room with the TV on.", "C"),
    (BSC_CROSS, "In a crowded public square.", "T"),
    (BSC_CROSS, "Somewhere at home.", "C"),
    (BSC_CROSS, "Outdoors in a forest with birds.", "O"),
    (BSC_WITHIN, "Somewhere at home.", "O"),
    (BSC_WITHIN, "In the kitchen, someone is cooking.", "T"),
    (BSC_WITHIN, "There is no background noise at all, just speech.", None),
    (BSC_CROSS, "I hear a vacuum cleaner.", None),  # was O without the LLM: a home sound
])
def test_rule_judge_bsc(trial: TrialRow, answer: str, label: str | None) -> None:
    assert _label(trial, answer) == label


def test_rule_judge_semantic_check() -> None:
    assert _label(Q2, "They lost their job today and don't know how to tell the family.") == "C"
    assert _label(Q2, "I'm sorry, I cannot hear the audio.") == "O"
    assert _label(Q2, "Something about work.") is None  # little overlap: the LLM decides


def test_middle_age_is_neither_age_group() -> None:
    from madbench_common.benchmarks.deaf import lexicon

    assert lexicon.ages_in("A middle-aged man.") == set()
    assert lexicon.names_middle_age("A middle-aged man.")
    assert lexicon.ages_in("an old man aged 70") == {"elderly"}
    assert lexicon.ages_in("a woman aged 30") == {"young"}


def test_default_mode_sends_every_answer_to_the_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The paper's protocol (§2.4, §3.1): the LLM labels every answer, even one the rules
    would call clear; the rules never answer in this mode."""
    from madbench_common.benchmarks.deaf.graph import build_deaf_graph
    from madbench_common.benchmarks.deaf.judge import DEFAULT_MODE, R1_BASE_URL, R1_MODEL
    from madbench_common.pipeline.stage import stage_params

    seen: list[str] = []

    def reply(kind: str, prompt: str, seconds: float) -> str:
        seen.append(prompt)
        return "It names a home appliance: the living room.\nLABEL: C"

    assert DEFAULT_MODE == "llm"
    for profile in ("embedded", "full"):
        # what a pod runs with: the implementation's defaults under the graph's overrides
        p = stage_params(build_deaf_graph(("qwen2_audio",)).profiled(profile)["deaf_judge"], {})
        assert (p["mode"], p["judge_base_url"], p["judge_model_id"]) == (
            "llm", R1_BASE_URL, R1_MODEL)
    assert R1_MODEL != "deepseek-reasoner"
    monkeypatch.setenv("JUDGE_API_KEY", STUB_KEY)
    with stub_server(reply=reply) as stub:
        llm = LLMJudge(ChatClient(f"{stub.url}/v1", R1_MODEL, rpm=0), load_judge_prompt())
        vacuum = judge_answer(BSC_CROSS, "I hear a vacuum cleaner", DEFAULT_MODE, RULE, llm)
        clear = judge_answer(ESC, "The speaker sounds angry.", DEFAULT_MODE, RULE, llm)
        middle = judge_answer(SIC_AGE, "A middle-aged man.", "rule+llm", RULE, llm)
    assert vacuum == Verdict("C", f"llm:{R1_MODEL}", "It names a home appliance: the living room.")
    assert clear.judge == middle.judge == f"llm:{R1_MODEL}" and len(seen) == 3
    assert "Model response: I hear a vacuum cleaner" in seen[0]
    assert stub.requests[0]["body"]["max_tokens"] == 8192  # R1 thinks within max_tokens


def test_offline_mode_labels_undecided_answers_other_by_judge_none() -> None:
    v = judge_answer(ESC, "Maybe angry.", "rule", RULE, None)
    assert v == Verdict("O", "none", "undecided by the rules; no LLM judge configured")
    assert judge_answer(ESC, "Angry.", "rule+llm", RULE, None).judge == "rule"
    with pytest.raises(ConfigError, match="needs judge_base_url"):
        judge_answer(ESC, "Angry.", "llm", RULE, None)


@pytest.mark.parametrize(("reply", "label"), [
    ("The response names the tone.\nLABEL: C", "C"),
    ("label = t", "T"),
    ("Reasoning... LABEL: O\nLABEL: **T**", "T"),
    ("The answer is\nO", "O"),
    ("I am not sure.", None),
])
def test_parse_label(reply: str, label: str | None) -> None:
    assert parse_label(reply) == label


def test_llm_judge_over_the_chat_api(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []

    def reply(kind: str, prompt: str, seconds: float) -> str:
        seen.append(prompt)
        return "<think>it follows the words</think>The response follows the text.\nLABEL: T"

    monkeypatch.setenv("JUDGE_API_KEY", STUB_KEY)
    with stub_server(reply=reply) as stub:
        llm = LLMJudge(ChatClient(f"{stub.url}/v1", "deepseek-reasoner", rpm=0),
                       load_judge_prompt())
        v = judge_answer(ESC, "It could be happy or angry.", "rule+llm", RULE, llm)
        direct = judge_answer(ESC, "Angry.", "llm", RULE, llm)
    assert v == Verdict("T", "llm:deepseek-reasoner", "The response follows the text.")
    assert direct.judge == "llm:deepseek-reasoner"  # mode llm sends every answer
    assert "Ground truth from the audio: angry (the speaker's emotion)" in seen[0]
    assert "Text-suggested (trap) answer: happy" in seen[0]


def test_llm_judge_unparsed_reply_is_other(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_API_KEY", STUB_KEY)
    with stub_server(reply=lambda *_: "I cannot grade this.") as stub:
        llm = LLMJudge(ChatClient(f"{stub.url}/v1", "r1", rpm=0), load_judge_prompt())
        v = llm.judge(ESC, "whatever")
    assert v.label == "O" and v.rationale.startswith("unparsed")


def test_describe_names_the_classes_in_conflict() -> None:
    assert describe(SIC, "young_male") == "male speaker"
    assert describe(SIC_BOTH, "elderly_female") == "elderly female speaker"
    assert describe(BSC_CROSS, "SPSQUARE") == "public square (Street environment)"
