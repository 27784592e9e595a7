"""What every environmental-audio adapter shares: negative prompts, devices, frames, output fit.

The environment generators of paper §3.4 differ in native sample rate (16 kHz for
AudioLDM2, AudioGen, FoleyCrafter and MMAudio's small_16k, 44.1 kHz for MMAudio's 44k
variants and AudioX) and native length (FoleyCrafter always makes 10 s; AudioX its
configured ``sample_size``). :func:`fit_output` brings any of them to exactly the clip's
duration at the pipeline rate and names what it did; fixed canvases shorter than the clip
are continued, not looped (:func:`window_starts`). Numpy, SciPy and PyAV; torch only
where a device is resolved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from madbench_common.core.compat import zip_strict
from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.media.audio import resample

__all__ = [
    "ALWAYS_EXCLUDED",
    "FrameRequest",
    "center_crop_frames",
    "fit_output",
    "frame_indices",
    "negative_prompt_for",
    "resize_frames",
    "resolve_device",
    "settings_record",
    "stitch_windows",
    "to_mono",
    "window_starts",
]

ALWAYS_EXCLUDED = ("speech", "singing", "music", "media playback")
"""Paper §3.4: every environment label excludes these; every negative prompt carries them."""

_XFADE_SECONDS = 0.05
_PAD_SECONDS = 0.05
CONTINUE_XFADE = 0.25
"""Seconds of the equal-power cross-fade between two canvases of one clip."""


@dataclass(frozen=True)
class FrameRequest:
    """The frames a video-conditioned adapter wants from the stage."""

    fps: float
    size: int
    """Shorter side in pixels (:func:`madbench_common.media.mux.sample_frames`)."""
    max_frames: int

    def __iter__(self) -> Any:
        return iter((self.fps, self.size, self.max_frames))


def negative_prompt_for(negative: str) -> str:
    """``negative`` with the always-excluded categories added where missing, in order."""
    parts = [p.strip() for p in negative.split(",") if p.strip()]
    lower = {p.lower() for p in parts}
    parts += [c for c in ALWAYS_EXCLUDED if c not in lower]
    return ", ".join(parts)


def resolve_device(device: str | None) -> str:
    """``device`` if given, else ``cuda`` when torch sees a GPU, else ``cpu``."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def to_mono(audio: npt.ArrayLike) -> Audio:
    """Float32 mono from (T,), (C, T) or (B, C, T) arrays (first item, channel mean)."""
    x = np.asarray(audio, dtype=np.float32)
    while x.ndim > 2:
        x = x[0]
    if x.ndim == 2:
        x = x.mean(axis=0) if x.shape[0] <= x.shape[1] else x.mean(axis=1)
    return np.ascontiguousarray(x, dtype=np.float32)


def _loop(x: Audio, n: int, rate: Hertz) -> Audio:
    """Repeat ``x`` to ``n`` samples with an equal-power crossfade at each seam."""
    fade = min(int(_XFADE_SECONDS * rate), len(x) // 4)
    if fade < 1:
        return np.resize(x, n).astype(np.float32)
    t = np.linspace(0.0, np.pi / 2, fade, dtype=np.float64)
    fade_in, fade_out = np.sin(t), np.cos(t)
    out = x.astype(np.float64)
    while len(out) < n:
        seam = out[-fade:] * fade_out + x[:fade] * fade_in
        out = np.concatenate([out[:-fade], seam, x[fade:]])
    return out[:n].astype(np.float32)


def fit_output(audio: npt.ArrayLike, native_rate: Hertz, sample_rate: Hertz,
               n: int) -> tuple[Audio, str]:
    """``audio`` (any layout, ``native_rate``) as exactly ``n`` mono samples at ``sample_rate``.

    Returns the signal and how its length was fitted: ``exact`` (the model made the
    requested length), ``trim`` (longer, cut at the end), ``pad`` (at most 50 ms short,
    e.g. a codec frame: the tail is continued by its mirror image) or ``loop`` (shorter,
    repeated from the start with a 50 ms equal-power crossfade at each seam). A resampled
    length within one output sample of ``n`` counts as exact. Resampling is polyphase
    (:func:`madbench_common.media.audio.resample`).
    """
    x = resample(to_mono(audio), int(native_rate), int(sample_rate))
    if len(x) == 0:
        raise ValueError("the model returned no audio")
    if abs(len(x) - n) <= 1:
        out = np.zeros(n, np.float32)
        out[: min(n, len(x))] = x[:n]
        if len(x) < n:
            out[-1] = x[-1]
        return out, "exact"
    if len(x) > n:
        return x[:n].copy(), "trim"
    short = n - len(x)
    if short <= min(_PAD_SECONDS * sample_rate, len(x)):
        return np.concatenate([x, x[::-1][:short]]).astype(np.float32), "pad"
    return _loop(x, n, sample_rate), "loop"


def frame_indices(n_frames: int, fps: float, target_fps: float, duration: Seconds) -> list[int]:
    """Indices into frames sampled at ``fps`` nearest to a ``target_fps`` grid over ``duration``.

    The last frame repeats where the video is shorter than ``duration``.
    """
    if n_frames < 1 or fps <= 0:
        raise ValueError("video-to-audio generation needs frames and their rate")
    count = max(1, round(duration * target_fps))
    times = np.arange(count) / target_fps
    return [min(n_frames - 1, round(t * fps)) for t in times]


def resize_frames(frames: npt.NDArray[np.uint8],
                  size: tuple[int, int] | int) -> npt.NDArray[np.uint8]:
    """Bicubic resize of (T, H, W, 3) frames (FFmpeg's swscale through PyAV): to
    ``(width, height)``, or so that the shorter side is ``size``."""
    import av

    h, w = frames.shape[1:3]
    if isinstance(size, int):
        scale = size / min(h, w)
        size = (max(size, round(w * scale)), max(size, round(h * scale)))
    out = [av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")
           .reformat(width=size[0], height=size[1], interpolation="BICUBIC")
           .to_ndarray(format="rgb24") for f in frames]
    return np.stack(out)


def center_crop_frames(frames: npt.NDArray[np.uint8], size: int) -> npt.NDArray[np.uint8]:
    """The central ``size`` × ``size`` window of (T, H, W, 3) frames."""
    h, w = frames.shape[1:3]
    top, left = max(0, (h - size) // 2), max(0, (w - size) // 2)
    return frames[:, top:top + size, left:left + size]


def settings_record(*, seed: int, native_rate: Hertz, native_seconds: Seconds, fit: str,
                    **extra: Any) -> dict[str, Any]:
    """The ``last_settings`` dict an adapter reports: common keys first, then its own."""
    return {"seed": int(seed), "native_rate": int(native_rate),
            "native_seconds": round(float(native_seconds), 4), "fit": fit, **extra}



def window_starts(duration: Seconds, canvas: Seconds,
                  xfade: Seconds = CONTINUE_XFADE) -> list[float]:
    """Start times of the canvases that cover ``duration``.

    A generator with a fixed canvas shorter than the clip (FoleyCrafter and AudioX: 10 s;
    clips run to 12 s) does not loop its output: a repeated tail is out of sync with the
    video, an artefact a detector can learn (paper §3.4 asks for "full-duration background
    components"). It generates the remainder instead, a second canvas conditioned on the
    *end* of the clip, and :func:`stitch_windows` cross-fades it in (equal power,
    ``CONTINUE_XFADE`` seconds, ending where the first canvas ends); the fit is recorded
    as ``continued``.

    One canvas when it fits; else each next canvas starts ``xfade`` before the previous
    one ends, and the last one ends exactly at ``duration`` (so it sees the clip's end).
    """
    if duration <= canvas:
        return [0.0]
    starts = [0.0]
    while starts[-1] + canvas < duration:
        starts.append(min(starts[-1] + canvas - xfade, duration - canvas))
    return starts


def stitch_windows(windows: list[Audio], starts: list[float], rate: Hertz, n: int,
                   xfade: Seconds = CONTINUE_XFADE) -> Audio:
    """Canvases (at ``rate``, each starting at ``starts[i]`` s) cross-faded into ``n`` samples.

    Each seam is an equal-power fade of ``xfade`` seconds that ends where the earlier
    canvas ends; after it the later canvas alone is used.
    """
    out = np.asarray(windows[0], np.float64)
    end = len(out)
    for w, start in zip_strict(windows[1:], starts[1:]):
        off = round(start * rate)
        fade = max(1, min(round(xfade * rate), end - off))
        t = np.linspace(0.0, np.pi / 2, fade)
        w64 = np.asarray(w, np.float64)
        seam = out[end - fade:end] * np.cos(t) + w64[end - fade - off:end - off] * np.sin(t)
        out = np.concatenate([out[:end - fade], seam, w64[end - off:]])
        end = off + len(w64)
    res = np.zeros(n, np.float32)
    res[:min(n, len(out))] = out[:n]
    return res
