"""Answer parsing on constructed answers: plain, Markdown, refusals, hedges, other languages."""

from __future__ import annotations

import pytest

from madbench_common.benchmarks.madbench.omni.parse import (
    REFUSAL,
    UNPARSED,
    parse_answer,
    parse_rates,
)
from madbench_common.benchmarks.madbench.prompts import load_prompt
from tests.benchmarks.madbench.omni.questions import BIN, FOUR, SC

SPEECH = load_prompt("P_comp").question("speech")


@pytest.mark.parametrize(("text", "want"), [
    ("Fake.", "fake"),
    ("fake", "fake"),
    ("**Real**", "real"),
    ("REAL", "real"),
    ("  'Fake' ", "fake"),
    ("Real. The speech and the ambience sound natural.", "real"),
    ("The answer is fake.", "fake"),
    ("Answer: real", "real"),
    ("This recording sounds synthesized.", "fake"),
    ("It is an authentic recording.", "real"),
    ("The audio is not authentic.", "fake"),
    ("It sounds genuine, not generated.", "real"),
    ("Gefälscht.", "fake"),
    ("Faux.", "fake"),
    ("Echt", "real"),
    ("假", "fake"),
    ("这段音频是假的。", "fake"),
    ("这是真实的录音。", "real"),
    ("I'm sorry, but I can't determine whether the audio is real or fake.", REFUSAL),
    ("I cannot tell from this audio.", REFUSAL),
    ("As an AI, I am unable to verify recordings.", REFUSAL),
    ("无法判断。", REFUSAL),
    ("Lo siento, no puedo saberlo.", REFUSAL),
    ("Real or fake? Hard to say.", REFUSAL),
    ("It could be real, or it could be fake.", UNPARSED),
    ("It is not real.", UNPARSED),
    ("Maybe.", UNPARSED),
    ("", UNPARSED),
    ("The recording has birds and a car.", UNPARSED),
])
def test_binary_answers(text: str, want: str) -> None:
    assert parse_answer(text, BIN) == want


@pytest.mark.parametrize(("text", "want"), [
    ("S", "S"),
    ("**Q**", "Q"),
    ("E.", "E"),
    ("R: both are authentic.", "R"),
    ("(S) the speech is fake", "S"),
    ("The answer is E.", "E"),
    ("Option Q", "Q"),
    ("答案是S。", "S"),
    ("Both are fake.", "Q"),
    ("I think it is S because the voice sounds robotic.", "S"),
    ("I would say E, maybe Q.", UNPARSED),
    ("I'm not able to analyse audio.", REFUSAL),
    ("e.g. the speech", UNPARSED),
    ("None of these.", UNPARSED),
])
def test_fourway_answers(text: str, want: str) -> None:
    assert parse_answer(text, FOUR) == want


@pytest.mark.parametrize(("text", "want"), [
    ("Yes.", "consistent"),
    ("No, the sound of traffic does not match a forest.", "inconsistent"),
    ("**No**", "inconsistent"),
    ("The background sound is consistent with the scene.", "consistent"),
    ("The background sound is inconsistent with the scene.", "inconsistent"),
    ("It doesn't match the beach shown.", "inconsistent"),
    ("是的，声音与场景一致。", "consistent"),
    ("否", "inconsistent"),
    ("声音与画面不一致。", "inconsistent"),
    ("Nein.", "inconsistent"),
    ("Oui", "consistent"),
    ("There is no video.", UNPARSED),
    ("Sorry, I cannot see the video.", REFUSAL),
])
def test_scene_answers(text: str, want: str) -> None:
    assert parse_answer(text, SC) == want


def test_component_question_parses_like_binary() -> None:
    assert parse_answer("Fake", SPEECH) == "fake"
    assert parse_answer("The speech is genuine.", SPEECH) == "real"


def test_parse_rates_cover_every_outcome() -> None:
    rates = parse_rates(["fake", "fake", "real", REFUSAL], BIN.labels)
    assert rates == {"fake": 0.5, "real": 0.25, REFUSAL: 0.25, UNPARSED: 0.0}
