"""PE-AV and WavLM adapters on tiny random models built from transformers' own configs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers", reason="run make adapter-test IMAGE=enc-tf5")
pytest.importorskip("timm", reason="run make adapter-test IMAGE=enc-tf5")

import torch

from madbench_common.weights import WeightsMissing

from .tiny import demo_audio, demo_frames, install

TEXT = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
            vocab_size=16, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
            sep_token_id=2)
ENC = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
           head_dim=16)


def _tokenizer():  # the processor needs one; embeddings never use it
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel({"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3},
                                    unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", unk_token="[UNK]")


def _tiny_peav(dest: Path) -> None:
    from transformers import (
        PeAudioFeatureExtractor,
        PeAudioVideoConfig,
        PeAudioVideoModel,
        PeAudioVideoProcessor,
        PeVideoVideoProcessor,
    )

    torch.manual_seed(0)
    dac = dict(encoder_hidden_size=4, downsampling_ratios=[2, 8, 10, 12], decoder_hidden_size=4,
               codebook_dim=8, hidden_size=16)
    vision = dict(architecture="vit_pe_core_base_patch16_224", num_classes=16,
                  model_args=dict(depth=1, embed_dim=32, num_heads=2, img_size=32))
    cfg = PeAudioVideoConfig(text_config=TEXT, audio_video_config=dict(
        audio_config=dict(dac_config=dac, **ENC), video_config=dict(vision_config=vision, **ENC),
        **ENC))
    PeAudioVideoModel(cfg).save_pretrained(dest)
    video = PeVideoVideoProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3,
                                  image_std=[0.5] * 3)
    PeAudioVideoProcessor(feature_extractor=PeAudioFeatureExtractor(), video_processor=video,
                          tokenizer=_tokenizer()).save_pretrained(dest)


def _tiny_wavlm(dest: Path) -> None:
    from transformers import Wav2Vec2FeatureExtractor, WavLMConfig, WavLMModel

    torch.manual_seed(0)
    cfg = WavLMConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2),
                      conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                      num_conv_pos_embedding_groups=2)
    WavLMModel(cfg).save_pretrained(dest)
    Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True).save_pretrained(dest)


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("weights")
    for repo, build in (("facebook/pe-av-base", _tiny_peav),
                        ("microsoft/wavlm-base-plus", _tiny_wavlm)):
        src = tmp_path_factory.mktemp(repo.split("/")[1])
        build(src)
        install(root, repo, src)
    return root


@pytest.fixture
def env(weights: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(weights))
    return weights


def test_peav_modes_shapes_and_recorded_input(env: Path) -> None:
    from madbench_common.models.tf5 import PeAvEncoder

    enc = PeAvEncoder()
    audio, rate = demo_audio(1, 2.0)
    frames, fps = demo_frames(1, fps=4.0, size=48, max_frames=6)
    a = enc.embed(mode="A", audio=audio, sample_rate=rate)
    v = enc.embed(mode="V", frames=frames, fps=fps)
    av = enc.embed(mode="AV", audio=audio, sample_rate=rate, frames=frames, fps=fps)
    assert a.vector.shape == (32,) and v.vector.shape == (32,) and av.vector.shape == (128,)
    assert np.isclose(np.linalg.norm(a.vector), 1, atol=1e-5)
    # the A-V audio part equals the audio-only embedding: one tower, one input
    assert np.allclose(av.vector[:32], a.vector, atol=1e-4)
    assert np.allclose(av.vector[64:96], av.vector[:32] * av.vector[32:64])
    assert a.spec.audio_rate == 48000 and a.spec.audio_seconds == pytest.approx(2.0, abs=0.05)
    assert (av.spec.video_frames, av.spec.video_size) == (len(frames), 32)
    assert av.spec.video_fps == pytest.approx(fps) and "no crop" in av.spec.crop
    assert a.score is None


def test_peav_av_depends_on_the_video_and_a_does_not(env: Path) -> None:
    from madbench_common.models.tf5 import PeAvEncoder

    enc = PeAvEncoder()
    audio, rate = demo_audio(2, 2.0)
    f1, fps = demo_frames(1, size=48, max_frames=4)
    f2, _ = demo_frames(12, size=48, max_frames=4)
    paired = enc.embed(mode="AV", audio=audio, sample_rate=rate, frames=f1, fps=fps).vector
    shuffled = enc.embed(mode="AV", audio=audio, sample_rate=rate, frames=f2, fps=fps).vector
    again = enc.embed(mode="AV", audio=audio, sample_rate=rate, frames=f1, fps=fps).vector
    assert np.array_equal(paired, again)
    assert not np.allclose(paired[32:64], shuffled[32:64])  # the video part changed
    with pytest.raises(ValueError, match="needs video"):
        enc.embed(mode="AV", audio=audio, sample_rate=rate)
    with pytest.raises(ValueError, match="needs audio"):
        enc.embed(mode="A")


def test_wavlm_mean_pools_16k(env: Path) -> None:
    from madbench_common.models.tf5 import WavLMEncoder

    enc = WavLMEncoder()
    audio, rate = demo_audio(3, 1.5)
    out = enc.embed(mode="A", audio=audio, sample_rate=rate)
    assert out.vector.shape == (32,) and np.isfinite(out.vector).all()
    assert out.spec.audio_rate == 16000 and "mean over" in out.spec.pooling
    at_48k = np.interp(np.arange(int(audio.size * 3)) / 3, np.arange(audio.size), audio)
    resampled = enc.embed(mode="A", audio=at_48k.astype(np.float32), sample_rate=48000)
    assert resampled.spec.audio_seconds == pytest.approx(out.spec.audio_seconds, abs=1e-3)
    assert np.corrcoef(out.vector, resampled.vector)[0, 1] > 0.9  # same speech, resampled
    with pytest.raises(ValueError, match="audio only"):
        enc.embed(mode="AV", audio=audio, sample_rate=rate)


def test_missing_weights_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from madbench_common.models.tf5 import WavLMEncoder

    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    with pytest.raises(WeightsMissing, match="madbench weights fetch --image enc-tf5"):
        WavLMEncoder()
