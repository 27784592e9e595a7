"""F5-TTS adapter on a tiny random ``CFM(DiT)`` + tiny Vocos, through the real loading code.

Runs in ``.venvs/tts-f5`` (``make adapter-test IMAGE=tts-f5``). The checkpoint and vocoder
are built from upstream's own classes with random weights, written where the real ones go
(``SWivid/F5-TTS`` ``F5TTS_v1_Base/model_1250000.safetensors``, ``charactr/vocos-mel-24khz``
``config.yaml`` + ``pytorch_model.bin``) in a temporary weights root, and loaded by the
adapter through :func:`madbench_common.weights.hf_path` and upstream's loaders; sampling
is upstream's ``infer_process`` (2 Euler steps).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("f5_tts", reason="run make adapter-test IMAGE=tts-f5")

import torch
import yaml

from madbench_common.speech_prep import GenerationFailed
from madbench_common.stages.speech_gen import generate_speech
from madbench_common.weights import WeightsMissing, install_local_snapshot

from .speech_cases import RATE, assert_placed, demo_case

TINY_ARCH = {"dim": 64, "depth": 2, "heads": 2, "ff_mult": 2, "text_dim": 32, "conv_layers": 1}
_VOCOS = {
    "feature_extractor": {"class_path": "vocos.feature_extractors.MelSpectrogramFeatures",
                          "init_args": {"sample_rate": 24000, "n_fft": 1024, "hop_length": 256,
                                        "n_mels": 100, "padding": "center"}},
    "backbone": {"class_path": "vocos.models.VocosBackbone",
                 "init_args": {"input_channels": 100, "dim": 32, "intermediate_dim": 64,
                               "num_layers": 1}},
    "head": {"class_path": "vocos.heads.ISTFTHead",
             "init_args": {"dim": 32, "n_fft": 1024, "hop_length": 256, "padding": "center"}},
}


def _write_tiny_checkpoints(root: Path, work: Path) -> None:
    """Tiny random F5 and Vocos, saved in the upstream file layout under ``root``."""
    from importlib.resources import files

    from f5_tts.model import CFM, DiT
    from f5_tts.model.utils import get_tokenizer
    from safetensors.torch import save_file
    from vocos import Vocos

    torch.manual_seed(1234)
    vocab, size = get_tokenizer(str(files("f5_tts").joinpath("infer/examples/vocab.txt")),
                                "custom")
    cfm = CFM(transformer=DiT(**TINY_ARCH, text_num_embeds=size, mel_dim=100),
              mel_spec_kwargs={"n_fft": 1024, "hop_length": 256, "win_length": 1024,
                               "n_mel_channels": 100, "target_sample_rate": 24000,
                               "mel_spec_type": "vocos"}, vocab_char_map=vocab)
    f5 = work / "f5" / "F5TTS_v1_Base"
    f5.mkdir(parents=True)
    save_file({f"ema_model.{k}": v.contiguous() for k, v in cfm.state_dict().items()},
              str(f5 / "model_1250000.safetensors"))
    install_local_snapshot(root, "SWivid/F5-TTS", work / "f5")
    voc_dir = work / "vocos"
    voc_dir.mkdir()
    (voc_dir / "config.yaml").write_text(yaml.safe_dump(_VOCOS))
    torch.save(Vocos.from_hparams(str(voc_dir / "config.yaml")).state_dict(),
               voc_dir / "pytorch_model.bin")
    install_local_snapshot(root, "charactr/vocos-mel-24khz", voc_dir)


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("weights")
    _write_tiny_checkpoints(root, tmp_path_factory.mktemp("build"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MADBENCH_WEIGHTS", str(root))
        yield root


@pytest.fixture(scope="module")
def same(weights: Path):
    from madbench_common.models.f5tts import F5SameTTS

    return F5SameTTS(device="cpu", nfe_step=2, arch=TINY_ARCH)


def test_missing_weights_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from madbench_common.models.f5tts import F5SameTTS

    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    with pytest.raises(WeightsMissing, match="madbench weights fetch --image tts-f5"):
        F5SameTTS(device="cpu")


def test_duration_rate_and_determinism(same) -> None:
    case = demo_case("demo_002")
    kw = {"sample_rate": RATE, "duration": 2.5, "ref_audio": case.active,
          "ref_text": case.transcript, "text": case.transcript}
    a = same.generate(**kw, seed=7)
    report = same.last_report
    b = same.generate(**kw, seed=7)
    c = same.generate(**kw, seed=8)
    assert a.dtype == np.float32 and len(a) == round(2.5 * RATE)
    assert np.array_equal(a, b), "same seed must give the same audio"
    assert not np.array_equal(a, c), "another seed must give other audio"
    assert report is not None and report.model_rate == 24000
    assert report.duration_control == "model:fix_duration"
    # The model itself made (nearly) the asked length: one mel frame is 10.7 ms.
    assert report.length_correction == pytest.approx(1.0, abs=0.05)
    settings = same.last_settings
    assert settings["seed"] == 8 and settings["nfe_step"] == 2 and settings["cfg_strength"] == 2.0


def test_placed_in_speech_regions_same_and_cross(same, weights: Path) -> None:
    from madbench_common.models.f5tts import F5CrossTTS

    case, target = demo_case("demo_002"), demo_case("demo_010")
    track = generate_speech(same, source=case.speech, reference=case.speech, rate=RATE,
                            starts=case.starts, ends=case.ends, text=case.transcript, seed=3)
    assert_placed(track, case)
    cross = F5CrossTTS(device="cpu", nfe_step=2, arch=TINY_ARCH)
    track = generate_speech(cross, source=case.speech, reference=target.active, rate=RATE,
                            starts=case.starts, ends=case.ends, text=case.transcript, seed=3,
                            ref_text=target.transcript)
    assert_placed(track, case)


@pytest.mark.parametrize(("text", "ref_s", "why"), [
    ("   ", 3.0, "empty_text"),
    ("สวัสดีครับ", 3.0, "unsupported_characters"),
    ("Hello there.", 0.4, "reference_too_short"),
])
def test_failures_are_per_component(same, text: str, ref_s: float, why: str) -> None:
    case = demo_case("demo_002")
    with pytest.raises(GenerationFailed, match=why):
        same.generate(sample_rate=RATE, duration=2.0, ref_audio=case.active[: int(ref_s * RATE)],
                      ref_text=case.transcript, text=text, seed=0)

