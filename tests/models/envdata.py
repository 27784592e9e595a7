"""Real inputs for the environment-generator and scene adapter tests: demo ambience and video.

The demo corpus (``data/demo``) holds real ambience recordings and real photographs
panned into video; adapters are tested on these arrays, not on synthetic ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from madbench_common.core.types import Audio
from madbench_common.media.audio import resample

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"


def demo_env(clip: str = "demo_001", seconds: float = 1.5, rate: int = 16000) -> Audio:
    """The first ``seconds`` of a demo clip's clean ambience stem, mono at ``rate``."""
    import soundfile as sf

    audio, sr = sf.read(DEMO / "stems" / "env" / f"{clip}.flac", dtype="float32",
                        always_2d=True)
    mono = resample(audio.mean(axis=1), sr, rate)
    return mono[: int(seconds * rate)].astype(np.float32)


def demo_frames(clip: str = "demo_001", fps: float = 8.0, size: int = 112,
                max_frames: int = 16) -> tuple[npt.NDArray[np.uint8], float]:
    """Frames of a demo video as the pipeline samples them (:func:`sample_frames`)."""
    from madbench_common.media.mux import sample_frames

    return sample_frames(DEMO / "clips" / f"{clip}.mp4", fps, size, max_frames)
