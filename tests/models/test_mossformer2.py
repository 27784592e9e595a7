"""MossFormer2 separator adapter: real ClearVoice classes at tiny dims, random weights.

The tests that need clearvoice run in ``.venvs/separator-mossformer2``
(``make adapter-test IMAGE=separator-mossformer2``); the source-choice rule needs only
Silero VAD and also runs in the main venv.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import yaml

from madbench_common.core.errors import ConfigError
from madbench_common.media.audio import decode_audio, resample
from madbench_common.models.adapters import mossformer2 as mf2
from madbench_common.models.weights import WeightsMissing
from tests.models import tiny
from tests.models.device import DEVICE

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
_VENV = "run make adapter-test IMAGE=separator-mossformer2"


def _stem(kind: str, clip: str = "demo_001") -> np.ndarray:
    audio, rate = sf.read(DEMO / "stems" / kind / f"{clip}.flac", dtype="float32")
    return resample(audio if audio.ndim == 1 else audio.mean(axis=1), rate, 16000)


@pytest.fixture(scope="module")
def vad() -> Any:
    pytest.importorskip("silero_vad", reason="silero-vad is not installed")
    from madbench_common.models.reference.vad import SileroVAD

    return SileroVAD()


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("clearvoice", reason=_VENV)
    from madbench_common.models.tiny.qc import install_tiny_mossformer2

    return tiny.tiny_root(tmp_path_factory, install_tiny_mossformer2)


@pytest.fixture(scope="module")
def separator(tiny_root: Path) -> mf2.MossFormer2Separator:
    return mf2.MossFormer2Separator(device=DEVICE, root=tiny_root)


def test_rule_picks_the_speech_output_and_fits_gains(vad: Any) -> None:
    speech, env = _stem("speech"), _stem("env")
    mixture = 0.5 * speech + 0.3 * env
    for order, expected in (([env, speech], 1), ([speech, env], 0)):
        got = mf2.pick_speech(mixture, [o.astype(np.float64) for o in order], vad)
        assert got.source == expected and got.rule == mf2.RULE
        assert got.scores[expected] > 0.5 > got.scores[1 - expected]
        assert got.gains[expected] == pytest.approx(0.5, abs=1e-4)
        assert got.gains[1 - expected] == pytest.approx(0.3, abs=1e-4)
        np.testing.assert_allclose(got.speech, 0.5 * speech, atol=1e-4)


def test_rule_on_silence_is_defined(vad: Any) -> None:
    zeros = np.zeros(16000)
    got = mf2.pick_speech(zeros, [zeros, zeros], vad)
    assert got.source == 0 and got.gains == (0.0, 0.0) and not np.any(got.speech)


def test_dims_come_from_the_state_dict_shapes() -> None:
    shapes = {"enc.conv1d.weight": (512, 1, 16), "mask_net.conv1d_encoder.weight": (512, 512, 1),
              "mask_net.conv1d_out.weight": (1024, 512, 1),
              **{f"mask_net.mdl.intra_mdl.mossformerM.layers.{i}.to_qk.mdl.1.weight": (1,)
                 for i in range(24)}}
    state = {k: np.zeros(v) for k, v in shapes.items()}
    assert mf2.read_dims(state) == {"encoder_embedding_dim": 512, "encoder_kernel_size": 16,
                                    "mossformer_sequence_dim": 512, "num_spks": 2,
                                    "num_mossformer_layer": 24}
    with pytest.raises(ConfigError, match="not a MossFormer2"):
        mf2.read_dims({})


def test_weights_yaml_pins_the_adapter_revision() -> None:
    doc = yaml.safe_load((ROOT / "images" / mf2.IMAGE / "weights.yaml").read_text())
    assert doc["hf"] == [{"repo": mf2.REPO, "revision": mf2.REVISION,
                          "files": ["last_best_checkpoint", "last_best_checkpoint.pt"]}]


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    pytest.importorskip("clearvoice", reason=_VENV)
    with pytest.raises(WeightsMissing, match="madbench weights fetch --image separator-mossf"):
        mf2.MossFormer2Separator(device=DEVICE, root=tmp_path)


def test_tiny_model_loads_through_the_real_path(separator: mf2.MossFormer2Separator) -> None:
    assert separator.dims == {"encoder_embedding_dim": 32, "encoder_kernel_size": 16,
                              "mossformer_sequence_dim": 32, "num_spks": 2,
                              "num_mossformer_layer": 1}
    assert separator.reference is False and separator.version.startswith("MossFormer2_SS_16K@")


def test_separates_demo_audio_with_exact_residual(separator: mf2.MossFormer2Separator) -> None:
    from madbench_common.benchmarks.madbench.stages.separate import separate_clip

    x = decode_audio(DEMO / "clips" / "demo_001.mp4", 16000)[:32000]
    speech, env, choice = separate_clip(separator, x, 16000)
    assert speech.shape == env.shape == x.shape and speech.dtype == np.float32
    assert np.array_equal(env, (x - speech).astype(np.float32))
    assert choice["source_rule"] == mf2.RULE and choice["speech_source"] in (0, 1)
    assert len(choice["source_scores"]) == len(choice["source_gains"]) == 2
    assert np.any(speech) and not np.allclose(speech, x)


def test_other_rates_come_back_at_the_callers_rate(separator: mf2.MossFormer2Separator) -> None:
    x = resample(decode_audio(DEMO / "clips" / "demo_002.mp4", 16000)[:24000], 16000, 44100)
    got = separator.separate_detailed(x, 44100)
    assert got.speech.shape == x.shape and np.isfinite(got.speech).all()


def test_a_checkpoint_that_does_not_fit_is_refused(tiny_root: Path, tmp_path: Path) -> None:
    import shutil

    import torch

    snap = next((tiny_root / "huggingface" / "hub").glob("models--*/snapshots/*"))
    bad = tmp_path / "snap"
    shutil.copytree(snap, bad)
    ckpt = torch.load(bad / "last_best_checkpoint.pt", weights_only=True)
    ckpt["model"].pop("mask_net.norm.weight")
    torch.save(ckpt, bad / "last_best_checkpoint.pt")
    with pytest.raises(ConfigError, match="does not fit"):
        mf2._load(bad, torch.device(DEVICE))
