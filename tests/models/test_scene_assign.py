"""The Qwen2.5-VL labeller's text side (prompt and answer parsing); runs in the main venv."""

from __future__ import annotations

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters.qwen25vl import (
    Qwen25VLSceneLabeller,
    assign_prompt,
    parse_label,
)
from madbench_common.models.taxonomy import load_taxonomy

LABELS = list(load_taxonomy().fine)


@pytest.mark.parametrize(("answer", "label"), [
    ("forest", "forest"), ("Forest.", "forest"), ("city street", "city_street"),
    ("The label is: metro_station", "metro_station"), ("  Car interior\n", "car_interior"),
    ("school corridor", "school_corridor"),  # not also "school_corridor" ⊃ nothing shorter
])
def test_parse_label_accepts_one_label(answer: str, label: str) -> None:
    assert parse_label(answer, LABELS) == label


@pytest.mark.parametrize("answer", ["", "a kitchen or a bathroom", "somewhere nice", "pool"])
def test_parse_label_refuses_ambiguous_or_unknown(answer: str) -> None:
    assert parse_label(answer, LABELS) is None


def test_assign_prompt_lists_every_fine_label_once() -> None:
    tax = load_taxonomy()
    prompt = assign_prompt("A quiet library.", tax)
    assert "A quiet library." in prompt
    assert all(prompt.count(f"- {name} (") == 1 for name in tax.fine)


def test_unknown_assign_method_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="assign_method"):
        Qwen25VLSceneLabeller(assign_method="vote")
