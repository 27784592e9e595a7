"""AudioLDM2 TTA and SDEdit ATA adapters on a tiny random pipeline (``make adapter-test
IMAGE=env-audioldm2``): real offline loading from the weights root, real sampling."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("diffusers", reason="run make adapter-test IMAGE=env-audioldm2")

from madbench_common.models.adapters.audioldm2 import (
    AudioLDM2ATA,
    AudioLDM2TTA,
    log_mel,
    normalize_wav,
)
from madbench_common.models.env_common import ALWAYS_EXCLUDED
from madbench_common.models.tiny.audioldm2 import install_tiny
from madbench_common.models.weights import WeightsMissing
from tests.models.device import DEVICE
from tests.models.envdata import demo_env
from tests.models.tiny import tiny_root


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_root(tmp_path_factory, install_tiny)


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    model = AudioLDM2TTA(root=str(tmp_path), device=DEVICE)
    with pytest.raises(WeightsMissing, match="madbench weights fetch --image env-audioldm2"):
        model.generate(sample_rate=16000, duration=1.0, prompt="rain")


@pytest.mark.parametrize("rate", [16000, 24000])
def test_tta_makes_exactly_the_clip_at_the_pipeline_rate(root: Path, rate: int) -> None:
    model = AudioLDM2TTA(root=str(root), device=DEVICE, steps=3)
    audio = model.generate(sample_rate=rate, duration=1.3, prompt="rain on a window",
                           negative_prompt="traffic", seed=7)
    assert audio.dtype == np.float32 and audio.shape == (round(1.3 * rate),)
    assert np.isfinite(audio).all() and np.abs(audio).max() > 0
    s = model.last_settings
    assert (s["fit"], s["native_rate"], s["steps"], s["seed"]) == ("exact", 16000, 3, 7)
    assert s["negative_prompt"].startswith("traffic")
    assert all(c in s["negative_prompt"] for c in ALWAYS_EXCLUDED)
    json.dumps(s)


def test_tta_is_seeded(root: Path) -> None:
    model = AudioLDM2TTA(root=str(root), device=DEVICE, steps=2)
    run = [model.generate(sample_rate=16000, duration=1.0, prompt="birds", seed=s)
           for s in (1, 1, 2)]
    assert np.array_equal(run[0], run[1]) and not np.array_equal(run[0], run[2])


def test_ata_sdedit_runs_the_partial_schedule_on_the_source(root: Path) -> None:
    model = AudioLDM2ATA(root=str(root), device=DEVICE, steps=8, strength=0.5)
    env = demo_env("demo_001", 1.2)
    audio = model.generate(sample_rate=16000, duration=1.2, prompt="forest", source_env=env,
                           negative_prompt="", seed=3)
    assert audio.shape == (len(env),) and np.isfinite(audio).all()
    s = model.last_settings
    assert (s["method"], s["strength"], s["denoise_steps"], s["fit"]) == ("sdedit", 0.5, 4,
                                                                           "exact")
    assert s["input_norm"] == "audioldm_peak_0.5"
    # the input is normalised as upstream does: a 20 dB quieter ê gives the same output
    quiet = model.generate(sample_rate=16000, duration=1.2, prompt="forest",
                           source_env=0.1 * env, negative_prompt="", seed=3)
    np.testing.assert_allclose(quiet, audio, atol=1e-4)
    other = model.generate(sample_rate=16000, duration=1.2, prompt="forest",
                           source_env=demo_env("demo_020", 1.2), seed=3)
    assert not np.allclose(audio, other), "the output must depend on the source environment"


def test_ata_refuses_without_source(root: Path) -> None:
    from madbench_common.core.errors import ConfigError

    with pytest.raises(ConfigError, match="source env"):
        AudioLDM2ATA(root=str(root), device=DEVICE).generate(sample_rate=16000, duration=1.0,
                                                            prompt="x")


def test_log_mel_matches_audioldm_front_end_on_real_audio() -> None:
    """64 Slaney bands at hop 160 (the real vocoder): frame count and band of a 1 kHz tone."""
    fake = SimpleNamespace(vocoder=SimpleNamespace(config=SimpleNamespace(
        sampling_rate=16000, upsample_rates=[5, 4, 2, 2, 2], model_in_dim=64)),
        vae_scale_factor=4)
    t = np.arange(16000) / 16000
    mel = log_mel((0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32), fake)
    assert tuple(mel.shape) == (1, 1, 100, 64)
    band = int(mel[0, 0, 10:90].mean(0).argmax())
    from transformers.audio_utils import mel_filter_bank

    bank = mel_filter_bank(num_frequency_bins=513, num_mel_filters=64, min_frequency=0,
                           max_frequency=8000, sampling_rate=16000, norm="slaney",
                           mel_scale="slaney")
    assert band == int(bank[64].argmax())  # FFT bin 64 = 1 kHz
    real = log_mel(demo_env("demo_003", 1.0), fake)
    assert float(real.min()) >= np.log(1e-5) - 1e-6 and np.isfinite(real.numpy()).all()


def _upstream_normalize_wav() -> object:
    """``normalize_wav`` from haoheliu/AudioLDM2 at the pinned commit, read from the
    upstream mirror (never vendored): the function's own source, executed as is."""
    import ast
    import os
    import subprocess

    git = os.environ.get("MADBENCH_UPSTREAM_GIT", "/work/.mirror/{owner}+{name}/repo").format(
        owner="haoheliu", name="AudioLDM2")
    try:
        src = subprocess.run(["git", "--git-dir", git, "show", f"{AUDIOLDM2_COMMIT}:"
                              "audioldm2/utilities/audio/tools.py"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"haoheliu/AudioLDM2 mirror not at {git}")
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
              and n.name == "normalize_wav")
    scope: dict[str, object] = {"np": np}
    exec(compile(ast.Module([fn], []), "audioldm2/utilities/audio/tools.py", "exec"), scope)
    return scope["normalize_wav"]


AUDIOLDM2_COMMIT = "b5786c5dc0ae8f766337fdc1b67ab6046586d14d"


def test_input_normalisation_is_upstreams_normalize_wav() -> None:
    """Same input through upstream's own function and ours: a quiet, offset ê."""
    upstream = _upstream_normalize_wav()
    env = 0.02 * demo_env("demo_005", 1.0) + 0.003
    want = upstream(env.astype(np.float64))  # type: ignore[operator]
    got = normalize_wav(env)
    np.testing.assert_allclose(got, want, atol=1e-6)
    # peak 0.5 up to upstream's 1e-8 guard (relative 2.5e-6 at this quiet level), mean 0
    assert abs(float(np.max(np.abs(got))) - 0.5) < 1e-5 and abs(float(got.mean())) < 1e-5
