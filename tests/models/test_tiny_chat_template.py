"""The tiny omni models' ChatML template renders a conversation as Qwen2.5-Omni's released
template lays it out, with any set of media markers, none included."""

from __future__ import annotations

import pytest

from madbench_common.models.tiny.omni import QWEN_CHAT_TEMPLATE, chatml

jinja2 = pytest.importorskip("jinja2", reason="jinja2 renders chat templates (transformers')")

_TURN = [{"role": "user", "content": [{"type": "audio"}, {"type": "video"},
                                      {"type": "text", "text": "Is it real?"}]}]


def _render(template: str) -> str:
    return jinja2.Template(template).render(messages=_TURN, add_generation_prompt=True)


def test_media_parts_become_markers_in_order_then_the_text() -> None:
    assert _render(QWEN_CHAT_TEMPLATE) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        "<|audio_bos|><|AUDIO|><|audio_eos|><|vision_bos|><|VIDEO|><|vision_eos|>"
        "Is it real?<|im_end|>\n<|im_start|>assistant\n")


def test_a_template_without_markers_is_valid_and_keeps_the_text() -> None:
    assert _render(chatml({})).endswith("<|im_start|>user\nIs it real?<|im_end|>\n"
                                        "<|im_start|>assistant\n")
