"""Input preparation shared by the evaluation-model adapters: rates, lengths, frames, fusion.

Numpy and scipy only (every image has them), so the recipes are tested in the main
suite; torch is imported lazily by :func:`torch_device`.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.signal import resample_poly

from madbench_common.core.types import Audio, Hertz

__all__ = ["check_audio", "even_indices", "fuse_av", "l2_normalise", "resample", "tile_to",
           "torch_device"]

F32 = npt.NDArray[np.float32]


def check_audio(audio: Audio | None, what: str) -> npt.NDArray[np.float32]:
    """Mono float32 audio, or a ValueError naming the model (a rejected row, not a crash)."""
    if audio is None:
        raise ValueError(f"{what}: this input mode needs audio")
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    if x.size == 0 or not np.isfinite(x).all():
        raise ValueError(f"{what}: audio is empty or not finite")
    return x


def resample(audio: Audio, rate: Hertz, target: Hertz) -> F32:
    """Polyphase resampling (scipy) of mono audio from ``rate`` to ``target``."""
    x = np.asarray(audio, dtype=np.float32).reshape(-1)
    if int(rate) == int(target):
        return x
    g = int(np.gcd(int(rate), int(target)))
    return resample_poly(x, int(target) // g, int(rate) // g).astype(np.float32)


def tile_to(x: npt.NDArray[np.float32], n: int) -> F32:
    """The first ``n`` samples of ``x``, repeating ``x`` from its start when shorter.

    This is the ASVspoof recipe AASIST and DF-Arena use (``pad`` by repetition, then a
    deterministic crop of the first ``n`` samples).
    """
    if x.size == 0:
        raise ValueError("cannot tile empty audio")
    reps = int(np.ceil(n / x.size))
    return np.tile(x, reps)[:n].astype(np.float32)


def even_indices(available: int, wanted: int) -> npt.NDArray[np.int64]:
    """``wanted`` indices spread evenly over ``available`` items (repeats when fewer)."""
    if available <= 0 or wanted <= 0:
        raise ValueError(f"cannot pick {wanted} of {available} frames")
    return np.linspace(0, available - 1, wanted).round().astype(np.int64)


def l2_normalise(v: npt.ArrayLike) -> F32:
    x = np.asarray(v, dtype=np.float32).reshape(-1)
    n = float(np.linalg.norm(x))
    return x / n if n > 0 else x


def fuse_av(audio_emb: npt.ArrayLike, video_emb: npt.ArrayLike) -> F32:
    """The A-V feature of an encoder with separate audio and video embeddings.

    ``[a; v; a ⊙ v]`` of the L2-normalised embeddings: the audio and visual features
    plus their elementwise relation, whose sum is the cosine similarity the models were
    trained to align (the "visual and relation features" of paper §5.4).
    """
    a, v = l2_normalise(audio_emb), l2_normalise(video_emb)
    if a.shape != v.shape:
        raise ValueError(f"audio {a.shape} and video {v.shape} embeddings differ in size")
    return np.concatenate([a, v, a * v]).astype(np.float32)


def torch_device() -> str:
    """``cuda`` where a GPU is visible, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
