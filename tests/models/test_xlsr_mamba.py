"""XLSR-Mamba adapter on a tiny model from the upstream classes (XLSR-Mamba's MixerModel over
mamba_ssm's Mamba blocks, transformers' Wav2Vec2Model), saved in the hub release's layout
with fairseq front-end names, run on mamba_ssm's PyTorch reference path."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

if importlib.util.find_spec("mamba_blocks") is None:  # importing it needs the reference path
    pytest.skip("run make adapter-test IMAGE=det-xlsr-mamba", allow_module_level=True)
pytest.importorskip("transformers", reason="run make adapter-test IMAGE=det-xlsr-mamba")


from madbench_common.models.adapters.xlsr_mamba import (
    NB_SAMP,
    XlsrMambaDetector,
    build_modules,
    fairseq_to_hf,
    merge_arch,
)
from madbench_common.models.tiny.det import XLSR_MAMBA_TINY, hf_to_fairseq, xlsr_mamba

from .tiny import assert_refused, demo_audio, tiny_root, weights_env

FAIRSEQ_KEYS = {
    # fairseq a54021305 Wav2Vec2Model(extractor_mode="layer_norm", conv_bias=True,
    # layer_norm_first=True) with XLSR_MAMBA_TINY's sizes, quantizer/project_q/final_proj
    # left out (the adapter drops them): listed from fairseq's own module.
    *(f"feature_extractor.conv_layers.{i}.{p}" for i in range(3)
      for p in ("0.weight", "0.bias", "2.1.weight", "2.1.bias")),
    "layer_norm.weight", "layer_norm.bias", "post_extract_proj.weight", "post_extract_proj.bias",
    "mask_emb", "encoder.pos_conv.0.bias", "encoder.pos_conv.0.weight_g",
    "encoder.pos_conv.0.weight_v", "encoder.layer_norm.weight", "encoder.layer_norm.bias",
    *(f"encoder.layers.0.{m}.{p}" for m in ("self_attn.k_proj", "self_attn.v_proj",
                                            "self_attn.q_proj", "self_attn.out_proj",
                                            "self_attn_layer_norm", "fc1", "fc2",
                                            "final_layer_norm") for p in ("weight", "bias")),
}


@pytest.fixture(scope="module")
def detector(tmp_path_factory: pytest.TempPathFactory) -> XlsrMambaDetector:
    with weights_env(tiny_root(tmp_path_factory, xlsr_mamba)):
        return XlsrMambaDetector()  # the tiny arch comes from the checkpoint's sidecar


def test_the_release_layout_uses_fairseq_names_and_maps_back() -> None:
    front, _ = build_modules(merge_arch(XLSR_MAMBA_TINY))
    hf = front.state_dict()
    fs = hf_to_fairseq(hf)
    assert set(fs) == FAIRSEQ_KEYS
    norm = ("parametrizations.weight.original0", "parametrizations.weight.original1")
    back = fairseq_to_hf({**fs, "quantizer.vars": 0, "project_q.weight": 0}, norm)
    assert set(back) == set(hf)
    assert all(back[k] is hf[k] for k in hf)


def test_mamba_runs_upstreams_reference_path(detector: XlsrMambaDetector) -> None:
    import selective_scan_cuda
    from mamba_ssm.modules import mamba_simple
    from mamba_ssm.ops.selective_scan_interface import selective_scan_ref

    assert mamba_simple.selective_scan_fn is selective_scan_ref
    assert mamba_simple.causal_conv1d_fn is None
    mixers = [m for m in detector.head.modules() if isinstance(m, mamba_simple.Mamba)]
    assert len(mixers) == 2 and not any(m.use_fast_path for m in mixers)
    with pytest.raises(RuntimeError, match="reference path"):
        selective_scan_cuda.fwd  # noqa: B018  (the stand-in refuses any use)


def test_score_and_features_on_the_in_the_wild_crop(detector: XlsrMambaDetector) -> None:
    import torch

    audio, rate = demo_audio(3, 6.0)
    out = detector.embed(mode="A", audio=audio, sample_rate=rate)
    assert out.vector.shape == (16,) and out.score_kind == "prob"
    assert out.score is not None and 0.0 < out.score < 1.0
    assert out.spec.audio_seconds == pytest.approx(NB_SAMP / 16000)
    # the features are the classifier's input: its output is the score's logits
    with torch.no_grad():
        logits = detector.head["conformer"].classifier(torch.from_numpy(out.vector))
    assert float(torch.softmax(logits, -1)[0]) == pytest.approx(out.score, abs=1e-6)
    # only the first 64,600 samples count
    tail = np.random.default_rng(0).normal(size=16000).astype(np.float32)
    same = detector.embed(mode="A", audio=np.concatenate([audio[:NB_SAMP], tail]),
                          sample_rate=rate)
    assert same.score == pytest.approx(out.score) and np.allclose(same.vector, out.vector)
    # short clips repeat from their start; 48 kHz input is resampled to 16 kHz first
    short = detector.embed(mode="A", audio=audio[:16000], sample_rate=rate)
    tiled = detector.embed(mode="A", audio=np.tile(audio[:16000], 5), sample_rate=rate)
    assert short.score == pytest.approx(tiled.score, abs=1e-6)
    assert detector.score(audio, rate) == pytest.approx(out.score)
    assert np.array_equal(detector.features(audio, rate), out.vector)
    with pytest.raises(ValueError, match="audio only"):
        detector.embed(mode="AV", audio=audio, sample_rate=rate)


def test_a_checkpoint_without_the_back_end_is_refused(tmp_path: Path) -> None:
    xlsr_mamba(tmp_path, keep="ssl_model.")
    assert_refused(XlsrMambaDetector, tmp_path, "not the released XLSR-Mamba checkpoint")
