"""Shared helpers for the QC adapter tests: demo audio and the adapter-test hint."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from madbench_common.media.audio import decode_audio, resample

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
VENV = "run make adapter-test IMAGE=qc"


def demo_mixture(clip: str = "demo_001", rate: int = 16000) -> np.ndarray:
    """The demo clip's real soundtrack (speech over ambience), mono at ``rate``."""
    return decode_audio(DEMO / "clips" / f"{clip}.mp4", rate)


def demo_stem(kind: str, clip: str = "demo_001", rate: int = 16000) -> np.ndarray:
    """The demo clip's clean ``speech`` or ``env`` stem, mono at ``rate``."""
    audio, sr = sf.read(DEMO / "stems" / kind / f"{clip}.flac", dtype="float32")
    return resample(audio if audio.ndim == 1 else audio.mean(axis=1), sr, rate)
