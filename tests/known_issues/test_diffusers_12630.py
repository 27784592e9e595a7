"""diffusers#12630: AudioLDM2 with a plain ``GPT2Model`` language model breaks on recent
transformers (no ``_update_model_kwargs_for_generation``); loading it as ``GPT2LMHeadModel``
works. When a diffusers/transformers bump fixes the bug, the first test fails: then drop
the workaround in :func:`madbench_common.models.adapters.audioldm2.load_pipeline`."""

from __future__ import annotations

import pytest

pytest.importorskip("diffusers", reason="run make adapter-test IMAGE=env-audioldm2")

from madbench_common.models.tiny.audioldm2 import build_pipeline


def _generate(pipe: object) -> object:
    import torch

    return pipe(  # type: ignore[operator]
        "rain", num_inference_steps=2, audio_length_in_s=0.5,
        generator=torch.Generator().manual_seed(0))


def test_gpt2model_language_model_still_breaks() -> None:
    with pytest.raises(AttributeError, match="_update_model_kwargs_for_generation"):
        _generate(build_pipeline("GPT2Model"))


def test_gpt2lmheadmodel_workaround_generates() -> None:
    out = _generate(build_pipeline("GPT2LMHeadModel"))
    assert out.audios.shape[-1] == 8000  # type: ignore[attr-defined]
