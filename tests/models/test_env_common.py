"""Shared environment-adapter helpers on real arrays (main venv): output fit, frames, prompts."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.models.env_common import (
    ALWAYS_EXCLUDED,
    center_crop_frames,
    fit_output,
    frame_indices,
    negative_prompt_for,
    resize_frames,
    stitch_windows,
    to_mono,
    window_starts,
)
from tests.models.envdata import demo_env, demo_frames


def test_negative_prompt_always_carries_the_paper_exclusions() -> None:
    assert negative_prompt_for("") == ", ".join(ALWAYS_EXCLUDED)
    out = negative_prompt_for("speech, singing, music, media playback, talking, human voice")
    assert out == "speech, singing, music, media playback, talking, human voice"
    assert negative_prompt_for("Traffic").startswith("Traffic, speech")


def test_fit_output_resamples_and_names_the_fit() -> None:
    env = demo_env("demo_002", 2.0, 44100)  # a 44.1 kHz model output, real ambience
    exact, how = fit_output(env, 44100, 16000, 32000)
    assert (exact.shape, how) == ((32000,), "exact")
    ref = demo_env("demo_002", 2.0, 16000)
    assert np.corrcoef(exact[:31000], ref[:31000])[0, 1] > 0.99  # same signal, resampled
    trimmed, how = fit_output(env, 44100, 16000, 16000)
    assert (trimmed.shape, how) == ((16000,), "trim") and np.allclose(trimmed, exact[:16000])
    padded, how = fit_output(env, 44100, 16000, 32000 + 400)
    assert how == "pad" and np.array_equal(padded[:32000], exact)
    looped, how = fit_output(env, 44100, 16000, 80000)
    assert how == "loop" and looped.shape == (80000,)
    assert np.allclose(looped[:31000], exact[:31000])  # starts with the model's output
    assert np.isfinite(looped).all() and np.abs(looped).max() <= np.abs(exact).max() * 1.5


def test_fit_output_accepts_model_layouts() -> None:
    stereo = np.stack([np.ones(100), -np.ones(100)])[None]  # (B, C, T)
    assert np.allclose(to_mono(stereo), 0.0)
    with pytest.raises(ValueError, match="no audio"):
        fit_output(np.zeros(0), 16000, 16000, 10)


def test_frame_indices_pick_the_nearest_frame_on_the_model_grid() -> None:
    frames, fps = demo_frames("demo_004", fps=25.0, size=64, max_frames=50)
    idx = frame_indices(len(frames), fps, 8.0, 2.0)
    assert len(idx) == 16 and idx[0] == 0 and idx == sorted(idx)
    assert max(idx) <= len(frames) - 1
    assert frame_indices(3, 1.0, 2.0, 4.0)[-1] == 2  # short video: last frame repeats
    with pytest.raises(ValueError):
        frame_indices(0, 25.0, 8.0, 1.0)


def test_resize_and_crop_real_frames() -> None:
    frames, _ = demo_frames("demo_005", fps=2.0, size=112, max_frames=2)
    square = resize_frames(frames, (384, 384))
    assert square.shape == (len(frames), 384, 384, 3) and square.dtype == np.uint8
    short = resize_frames(frames, 224)
    assert min(short.shape[1:3]) == 224
    assert center_crop_frames(short, 224).shape[1:3] == (224, 224)


def test_window_starts_end_the_last_canvas_at_the_clip_end() -> None:
    """10 s canvases: 9 s needs one; 11.5 s a second starting at 1.5 s (ending at 11.5);
    25 s three, each next one starting 0.25 s before the previous one ends (9.75), the
    last clamped to end at 25 s (15.0)."""
    assert window_starts(9.0, 10.0) == [0.0]
    assert window_starts(11.5, 10.0) == [0.0, 1.5]
    assert window_starts(25.0, 10.0) == [0.0, 9.75, 15.0]


def test_stitch_windows_cross_fades_into_the_continuation_without_a_repeat() -> None:
    """Hand-worked at 100 Hz: canvas A = 1000 samples of 1.0 covering [0, 10 s), canvas B
    = 1000 samples of 2.0 covering [1.5 s, 11.5 s); 0.25 s fade ending at 10 s. Samples
    before 9.75 s are A, after 10 s are B, the seam is cos·A + sin·B (equal power), and
    nothing repeats A's start (no loop)."""
    a, b = np.ones(1000, np.float32), np.full(1000, 2.0, np.float32)
    out = stitch_windows([a, b], [0.0, 1.5], 100, 1150, xfade=0.25)
    assert out.shape == (1150,)
    assert np.all(out[:975] == 1.0) and np.all(out[1000:] == 2.0)
    t = np.linspace(0.0, np.pi / 2, 25)
    np.testing.assert_allclose(out[975:1000], np.cos(t) + 2.0 * np.sin(t), rtol=1e-6)
    # B is the same recording offset by 1.5 s, so the stitch is the recording itself
    env = np.resize(demo_env("demo_002", 6.0, 16000), 184000)  # an 11.5 s signal
    first, second = env[:160000], env[24000:184000]
    got = stitch_windows([first, second], [0.0, 1.5], 16000, len(env))
    assert np.max(np.abs(got[:156000] - env[:156000])) == 0.0
    assert np.max(np.abs(got[160000:] - env[160000:])) == 0.0
