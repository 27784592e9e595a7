"""CPU reference face and mouth cropper (roles.FaceCropper): OpenCV's bundled Haar cascade.

Face-centric detectors (AVH-Align, BA-TFD+, AV Anomaly) read face or mouth crops. Their
upstream pipelines use dlib 68-point landmarks or a CNN face detector whose weights
cannot be fetched here; this reference uses the frontal-face Haar cascade that ships
inside the ``opencv-python-headless`` 4.x wheel (``cv2.data``), labelled as a reference.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from madbench_common.core.compat import zip_strict
from madbench_common.models.roles import Frames

__all__ = ["REGIONS", "HaarFaceCropper", "square_box"]

REGIONS = ("face", "mouth")
_DETECT_SIDE = 360
Box = tuple[float, float, float, float]
"""(x, y, w, h) in pixels of the full-size frame."""


def square_box(box: Box, region: str, height: int, width: int) -> tuple[int, int, int, int]:
    """The square crop (x0, y0, x1, y1) of ``region`` for a face box, clipped to the frame.

    ``face`` is a square of 1.3 × the larger box side around the box centre; ``mouth`` is a
    square of 0.5 × the box width centred at 78 % of the box height (where the lips sit in
    a frontal Haar box), standing in for the 68-landmark mouth ROI of AV-HuBERT's
    preprocessing."""
    x, y, w, h = box
    if region == "face":
        cx, cy, side = x + w / 2, y + h / 2, 1.3 * max(w, h)
    elif region == "mouth":
        cx, cy, side = x + w / 2, y + 0.78 * h, 0.5 * w
    else:
        raise ValueError(f"region {region!r}: expected one of {REGIONS}")
    side = max(2.0, min(side, float(height), float(width)))
    x0 = round(min(max(cx - side / 2, 0.0), width - side))
    y0 = round(min(max(cy - side / 2, 0.0), height - side))
    return x0, y0, x0 + round(side), y0 + round(side)


def _fill(boxes: list[Box | None]) -> list[Box | None]:
    """Each missing box takes the nearest detected one (earlier frame on ties)."""
    found = [i for i, b in enumerate(boxes) if b is not None]
    if not found:
        return boxes
    idx = np.asarray(found)
    return [boxes[int(idx[np.abs(idx - i).argmin()])] for i in range(len(boxes))]


class HaarFaceCropper:
    """Most confident frontal face per frame (OpenCV Haar cascade), face or mouth crops."""

    slug, version = "ref-haar-face", "1"
    reference = True

    @cached_property
    def _cascade(self) -> Any:
        import cv2

        path = f"{cv2.data.haarcascades}haarcascade_frontalface_default.xml"  # type: ignore[attr-defined]
        cascade = cv2.CascadeClassifier(path)
        if cascade.empty():
            from madbench_common.core.errors import ConfigError

            raise ConfigError(f"{path}: Haar cascade missing (opencv-python-headless 4.x ships "
                              "it; 5.0 wheels dropped cv2/data)")
        return cascade

    def detect(self, frame: npt.NDArray[np.uint8]) -> Box | None:
        """The most confident frontal face box of one RGB frame, or ``None``: the cascade's
        final-stage level weight, on a histogram-equalised grey image, detected on a copy
        scaled to at most 360 px on the short side."""
        import cv2

        h, w = frame.shape[:2]
        scale = min(1.0, _DETECT_SIDE / min(h, w))
        small = cv2.resize(frame, (max(1, round(w * scale)), max(1, round(h * scale))),
                           interpolation=cv2.INTER_AREA) if scale < 1 else frame
        grey = cv2.equalizeHist(cv2.cvtColor(np.ascontiguousarray(small), cv2.COLOR_RGB2GRAY))
        side = max(20, min(grey.shape) // 10)
        faces, _, weights = self._cascade.detectMultiScale3(
            grey, scaleFactor=1.1, minNeighbors=5, minSize=(side, side), outputRejectLevels=True)
        if len(faces) == 0:
            return None
        x, y, bw, bh = faces[int(np.argmax(np.ravel(weights)))]
        return (x / scale, y / scale, bw / scale, bh / scale)

    def crop(self, frames: Frames, fps: float, *, size: int,
             region: str = "face") -> tuple[Frames, npt.NDArray[np.bool_]]:
        """(T, size, size, 3) crops and, per frame, whether a face was detected in it.

        Frames without a detection take the box of the nearest frame that has one. A clip
        with no face at all gets a centre square crop on every frame and ``found`` all
        ``False``: the caller records that as its fallback, never silently. Crops are
        clipped to the frame and resized with area interpolation to ``size`` × ``size``."""
        import cv2

        if region not in REGIONS:
            raise ValueError(f"region {region!r}: expected one of {REGIONS}")
        frames = np.asarray(frames, dtype=np.uint8)
        if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0:
            raise ValueError(f"frames: expected (T, H, W, 3) RGB with T > 0, got {frames.shape}")
        detected = [self.detect(f) for f in frames]
        found = np.array([b is not None for b in detected], dtype=bool)
        boxes = _fill(detected)
        h, w = frames.shape[1:3]
        out = np.empty((len(frames), size, size, 3), dtype=np.uint8)
        for i, (frame, box) in enumerate(zip_strict(frames, boxes)):
            if box is None:  # no face anywhere in the clip: centre square
                side = min(h, w)
                x0, y0 = (w - side) // 2, (h - side) // 2
                x1, y1 = x0 + side, y0 + side
            else:
                x0, y0, x1, y1 = square_box(box, region, h, w)
            out[i] = cv2.resize(np.ascontiguousarray(frame[y0:y1, x0:x1]), (size, size),
                                interpolation=cv2.INTER_AREA)
        return out, found
