"""Semantic type aliases shared across the package."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # typing.TypeAlias is 3.10+; the annotations below are never evaluated
    from typing import TypeAlias

__all__ = ["Audio", "ClipId", "Frames", "Hertz", "Key", "Seconds", "Uri"]

Seconds: TypeAlias = float
Hertz: TypeAlias = int
Uri: TypeAlias = str
"""A store address: ``file:///abs/path`` or ``s3://bucket/key``."""
Key: TypeAlias = str
"""A relative object key inside a run prefix (``ingest/audio/c01.wav``)."""
ClipId: TypeAlias = str
Audio: TypeAlias = npt.NDArray[np.float32]
"""Mono float32 samples in [-1, 1]."""
Frames: TypeAlias = npt.NDArray[np.uint8]
"""Video frames, shape (T, H, W, 3), RGB."""
