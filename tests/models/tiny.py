"""Helpers for the adapter tests: demo media as model input, tiny checkpoints in place."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
import pytest
import soundfile as sf

from madbench_common.core.errors import ConfigError
from madbench_common.media.mux import sample_frames
from madbench_common.models.roles import Frames
from madbench_common.models.weights import WeightsMissing, install_local_snapshot

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"


def demo_audio(clip: int = 1, seconds: float = 3.0) -> tuple[np.ndarray, int]:
    """Real speech of a demo clip (mono float32) and its rate."""
    x, rate = sf.read(DEMO / "stems" / "speech" / f"demo_{clip:03d}.flac", dtype="float32")
    x = x if x.ndim == 1 else x.mean(axis=1)
    return x[: int(seconds * rate)], int(rate)


def demo_frames(clip: int = 1, fps: float = 4.0, size: int = 64,
                max_frames: int = 8) -> tuple[Frames, float]:
    """RGB frames of a demo clip, decoded the way the feature stage does."""
    return sample_frames(DEMO / "clips" / f"demo_{clip:03d}.mp4", fps=fps, size=size,
                         max_frames=max_frames)


class Modes(NamedTuple):
    """An encoder's A, V and A-V embeddings of one demo clip, and the inputs they came from."""

    a: Any
    v: Any
    av: Any
    audio: np.ndarray
    rate: int
    frames: Frames
    fps: float


def embed_modes(encoder: Any, clip: int, seconds: float, fps: float, size: int,
                max_frames: int) -> Modes:
    """The A, V and A-V embeddings of demo clip ``clip`` (``seconds`` of its speech, frames
    as :func:`demo_frames` samples them), with those inputs."""
    audio, rate = demo_audio(clip, seconds)
    frames, fps = demo_frames(clip, fps=fps, size=size, max_frames=max_frames)
    return Modes(encoder.embed(mode="A", audio=audio, sample_rate=rate),
                 encoder.embed(mode="V", frames=frames, fps=fps),
                 encoder.embed(mode="AV", audio=audio, sample_rate=rate, frames=frames,
                               fps=fps),
                 audio, rate, frames, fps)

def install(root: Path, repo: str, src: Path) -> Path:
    """Put a tiny ``save_pretrained`` folder where ``hf_path(repo)`` finds it offline."""
    return install_local_snapshot(root, repo, src)


def tiny_root(factory: pytest.TempPathFactory, install: Callable[[Path], Any]) -> Path:
    """A fresh weights root holding the tiny checkpoint that ``install`` writes into it."""
    root = factory.mktemp("weights")
    install(root)
    return root


@contextmanager
def weights_env(root: Path) -> Iterator[Path]:
    """``MADBENCH_WEIGHTS`` names ``root`` while open: for adapters that find their weights
    through the environment, as the registry builds them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MADBENCH_WEIGHTS", str(root))
        yield root


def assert_fetch_named(build: Callable[[], Any], image: str, empty: Path) -> None:
    """Building the adapter (``build``) on an ``empty`` weights root fails with the command
    that fetches its image's weights."""
    with weights_env(empty), pytest.raises(WeightsMissing,
                                           match=f"madbench weights fetch --image {image}"):
        build()


def assert_refused(build: Callable[[], Any], root: Path, match: str) -> None:
    """Building the adapter (``build``) on the weights ``root``, which holds a checkpoint
    that is not the released one, fails with a ConfigError that says ``match``."""
    with weights_env(root), pytest.raises(ConfigError, match=match):
        build()
