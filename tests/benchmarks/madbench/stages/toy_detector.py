"""A test double for the detector plumbing (never registered outside tests): its "native
score" is the logistic of the clip's RMS level in dB, a documented function of the input."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.roles import Embedding, Frames, InputSpec


class RmsDetector:
    slug, version, reference = "test-rms-detector", "1", True
    modes: tuple[str, ...] = ("A", "AV")

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if audio is None:
            raise ValueError("audio needed")
        x = np.asarray(audio, dtype=np.float64)
        db = 20 * np.log10(np.sqrt(np.mean(x ** 2)) + 1e-9)
        nframes = 0 if frames is None else len(frames)
        vec = np.array([db, x.std(), float(nframes)], dtype=np.float32)
        spec = InputSpec(audio_rate=sample_rate, audio_seconds=x.size / sample_rate,
                         video_frames=nframes, video_fps=fps if nframes else 0.0,
                         pooling="whole clip", fallback="" if nframes or mode == "A" else "x")
        return Embedding(vec, spec, score=float(1 / (1 + np.exp(-(db + 20) / 5))),
                         score_kind="prob")


class FlakyDetector(RmsDetector):
    """Fails on its A-V inputs, as a model can on one item (a CUDA assert, a shape bug)."""

    slug = "test-flaky-detector"

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode == "AV":
            raise RuntimeError("CUDA error: device-side assert triggered")
        return super().embed(mode=mode, audio=audio, sample_rate=sample_rate, frames=frames,
                             fps=fps)


class UnloadableDetector(RmsDetector):
    """Cannot load at all: its weights are not where it looks."""

    slug = "test-unloadable-detector"

    def __init__(self) -> None:
        raise OSError("/weights/huggingface/hub/models--x/model.safetensors: no such file")


class ModulelessDetector(RmsDetector):
    """Imports a module the environment lacks only when first used."""

    slug = "test-moduleless-detector"

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        import madbench_no_such_module  # noqa: F401

        raise AssertionError("unreachable")


class BatchedRmsDetector(RmsDetector):
    """Takes whole batches (``embed_batch``: one call per batch, its size recorded in
    ``calls``, 1 for ``embed``) and gives each input what ``embed`` gives it alone.
    Silent audio is bad input, alone or anywhere in a batch (the whole batch raises)."""

    slug = "test-batched-detector"
    calls: ClassVar[list[int]] = []

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if audio is not None and not np.any(audio):
            raise ValueError("silent input")
        self.calls.append(1)
        return super().embed(mode=mode, audio=audio, sample_rate=sample_rate, frames=frames,
                             fps=fps)

    def embed_batch(self, inputs: Sequence[Mapping[str, Any]]) -> list[Embedding]:
        if any(kw.get("audio") is not None and not np.any(kw["audio"]) for kw in inputs):
            raise ValueError("silent input in the batch")
        self.calls.append(len(inputs))
        return [RmsDetector.embed(self, **kw) for kw in inputs]
