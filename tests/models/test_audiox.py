"""AudioX audio-to-audio adapter on a tiny random model in the real checkpoint layout
(``make adapter-test IMAGE=a2a-audiox``): ``get_pretrained_model`` offline, its CLIP/T5/
audio conditioners, k-diffusion sampling from the source environment."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("stable_audio_tools", reason="run make adapter-test IMAGE=a2a-audiox")

from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters.audiox import AudioXA2A, audio_prompt
from madbench_common.models.tiny.audiox import install_tiny
from madbench_common.models.weights import WeightsMissing, weights_root
from tests.models.device import DEVICE
from tests.models.envdata import demo_env


@pytest.fixture(scope="module")
def model() -> AudioXA2A:
    """Tiny checkpoints in the weights root HF_HOME names (the conditioners load CLIP and
    T5 by id through transformers' cache, as in the pods)."""
    if not os.environ.get("MADBENCH_WEIGHTS"):
        pytest.skip("needs MADBENCH_WEIGHTS and HF_HOME on one temp root (adapter-test.sh)")
    install_tiny(weights_root())
    return AudioXA2A(device=DEVICE, steps=3)


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    with pytest.raises(WeightsMissing, match="--image a2a-audiox"):
        AudioXA2A(root=str(tmp_path)).generate(sample_rate=16000, duration=1.0, prompt="x",
                                               source_env=np.ones(16000, np.float32))


def test_regenerates_the_source_env_on_the_10s_canvas(model: AudioXA2A) -> None:
    env = demo_env("demo_001", 3.0)
    audio = model.generate(sample_rate=16000, duration=3.0, prompt="forest birds",
                           negative_prompt="traffic", source_env=env, seed=1)
    assert audio.shape == (48000,) and audio.dtype == np.float32 and np.isfinite(audio).all()
    s = model.last_settings
    assert (s["native_rate"], s["fit"], s["sampler_type"], s["init_noise_level"]) == (
        44100, "trim", "dpmpp-3m-sde", 0.0)
    assert s["audio_prompt"] and s["init_audio"] == "" and s["windows"] == [0.0]
    assert s["native_seconds"] == pytest.approx(215 * 2048 / 44100, abs=1e-3)
    assert s["negative_prompt"].startswith("traffic, speech")


def test_seeded_and_the_init_audio_option_follows_the_source(model: AudioXA2A) -> None:
    kw = {"sample_rate": 16000, "duration": 2.0, "prompt": "rain"}
    a = model.generate(source_env=demo_env("demo_001", 2.0), seed=4, **kw)
    b = model.generate(source_env=demo_env("demo_001", 2.0), seed=4, **kw)
    assert np.array_equal(a, b)
    init = AudioXA2A(device=DEVICE, steps=3, init_noise_level=1.0)
    a = init.generate(source_env=demo_env("demo_001", 2.0), seed=4, **kw)
    c = init.generate(source_env=demo_env("demo_020", 2.0), seed=4, **kw)
    # random tiny VAE weights barely separate the two latents, but the output follows them
    assert not np.array_equal(a, c) and init.last_settings["init_audio"]


def test_source_canvas_is_tiled_stereo_at_the_model_rate(model: AudioXA2A) -> None:
    env = demo_env("demo_003", 3.0)
    canvas = model._canvas(env, 16000, 44100, 441000).numpy()
    assert canvas.shape == (2, 441000) and np.array_equal(canvas[0], canvas[1])
    period = 3 * 44100  # 3 s resampled, then repeated
    assert np.array_equal(canvas[0, :1000], canvas[0, period:period + 1000])


def test_long_clips_continue_on_a_second_canvas_and_empty_sources_are_refused(
        model: AudioXA2A) -> None:
    """11 s on the 10 s canvas (sample_size 441000): a second window conditioned on ê's
    last 10 s (start 1 s), cross-faded in; no loop."""
    audio = model.generate(sample_rate=8000, duration=11.0, prompt="wind",
                           source_env=demo_env("demo_002", 11.0, 8000), seed=2)
    s = model.last_settings
    assert audio.shape == (88000,) and s["fit"] == "continued"
    assert s["windows"] == [0.0, 1.0]  # the config's 441000-sample (10 s) canvas
    with pytest.raises(ConfigError, match="source env"):
        model.generate(sample_rate=16000, duration=1.0, prompt="x")


def test_audio_prompt_is_upstreams_load_and_process_audio(tmp_path: Path) -> None:
    """Same input through upstream's own loader (a 44.1 kHz stereo file of ê) and ours:
    a 3 s ê, 10 s window from 0 s (front zero-padding) and a 2 s window from 1 s. At
    ca179cc ``stable_audio_tools/data/utils.py`` uses ``torchaudio`` and ``F`` without
    importing them (the README's script imports torchaudio itself); they are supplied."""
    import soundfile as sf
    import torch.nn.functional as F
    import torchaudio
    from stable_audio_tools.data import utils

    utils.torchaudio, utils.F = torchaudio, F  # type: ignore[attr-defined]
    env = demo_env("demo_004", 3.0, 44100)
    path = tmp_path / "env.wav"
    sf.write(path, np.stack([env, env], axis=1), 44100, subtype="FLOAT")
    for start, seconds in ((0, 10), (1, 2)):
        want = utils.load_and_process_audio(str(path), 44100, start, seconds).numpy()
        got = audio_prompt(env, 44100, 44100, start, seconds).numpy()
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=1e-7)


def test_the_audio_prompt_reaches_the_sampler(model: AudioXA2A,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Without init_audio the path from ê to the output is the audio conditioner: its
    tokens (the VAE latents of ê, projected) go to the sampler, differ between two ê and
    are not the learned empty feature. (The tiny model's transformer zero-initialises its
    branch outputs, so no conditioning moves its output; the tokens are checked instead.)"""
    from stable_audio_tools.inference import generation

    seen = []
    original = generation.generate_diffusion_cond

    def spy(model_, **kw):
        seen.append(kw["conditioning_tensors"]["audio_prompt"][0].detach().clone())
        return original(model_, **kw)

    monkeypatch.setattr(generation, "generate_diffusion_cond", spy)
    kw = {"sample_rate": 16000, "duration": 2.0, "prompt": "rain", "seed": 4}
    model.generate(source_env=demo_env("demo_001", 2.0), **kw)
    model.generate(source_env=demo_env("demo_020", 2.0), **kw)
    assert model.last_settings["init_audio"] == "" and len(seen) == 2
    empty = model._load()[0].conditioner.conditioners["audio_prompt"].empty_audio_feat
    assert not torch_equal(seen[0], seen[1])
    assert not torch_equal(seen[0], empty.expand_as(seen[0]).to(seen[0].dtype))


def torch_equal(a: object, b: object) -> bool:
    import torch

    return bool(torch.equal(a, b))  # type: ignore[arg-type]
