"""transformers 5.24.0 quirks the omni adapters work around (omni-qwen25omni image).

1. ``Qwen2_5OmniForConditionalGeneration.from_pretrained`` reads ``spk_dict.pt`` (the
   talker's voices) even with ``enable_audio_output=False``: the weights fetch keeps that
   file and the tiny checkpoint writes an empty one.
2. ``Gemma4AudioModel`` has no SDPA attention, so Gemma 4 cannot be loaded with
   ``attn_implementation="sdpa"``: the adapter leaves the per-tower default.
3. Gemma 4's audio sub-sampling sizes its projection for 128 mel bins halved twice
   (``subsampling_conv_channels[0] // 4``): a config with a first conv width other than 128
   breaks at the first forward; the tiny config keeps 128.

When a test here fails after a transformers bump, the quirk is gone: simplify the
adapter (or the tiny checkpoint) and delete that test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torchvision", reason="run make adapter-test IMAGE=omni-qwen25omni")
torch = pytest.importorskip("torch")
tf = pytest.importorskip("transformers", reason="run make adapter-test IMAGE=omni-qwen25omni")
if not hasattr(tf, "Gemma4ForConditionalGeneration"):
    pytest.skip("needs transformers >= 5.5: run make adapter-test IMAGE=omni-qwen25omni",
                allow_module_level=True)


def test_qwen_omni_needs_spk_dict_without_the_talker(tmp_path: Path) -> None:
    from madbench_common.models.tiny.omni import install_tiny_qwen25omni

    snap = install_tiny_qwen25omni(tmp_path)
    (snap / "spk_dict.pt").unlink()
    with pytest.raises((ValueError, OSError)):
        tf.Qwen2_5OmniForConditionalGeneration.from_pretrained(snap, enable_audio_output=False)


def test_gemma4_audio_tower_has_no_sdpa(tmp_path: Path) -> None:
    from madbench_common.models.tiny.omni import install_tiny_gemma4

    snap = install_tiny_gemma4(tmp_path)
    with pytest.raises(ValueError, match="Gemma4AudioModel does not support"):
        tf.Gemma4ForConditionalGeneration.from_pretrained(snap, attn_implementation="sdpa")


def test_gemma4_audio_projection_assumes_128_first_channels() -> None:
    cfg = tf.Gemma4AudioConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               subsampling_conv_channels=[8, 4], output_proj_dims=32)
    model = tf.Gemma4AudioModel(cfg).eval()
    features = torch.zeros(1, 50, 128)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        model(features, torch.ones(1, 50, dtype=torch.bool))
