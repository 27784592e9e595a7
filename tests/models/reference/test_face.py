"""The CPU reference face/mouth cropper on a real face photograph and on faceless demo clips."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from madbench_common.media.mux import sample_frames
from madbench_common.models.reference.face import HaarFaceCropper, square_box

cv2 = pytest.importorskip("cv2")

ROOT = Path(__file__).resolve().parents[3]
FACE = ROOT / "tests" / "fixtures" / "faces" / "astronaut.jpg"


H, W = 420, 560


def _face_frames(n: int = 4) -> np.ndarray:
    """The portrait (scaled ×2 to 384 px) on a wider grey canvas, drifting right 6 px a frame."""
    face = cv2.cvtColor(cv2.imread(str(FACE)), cv2.COLOR_BGR2RGB)
    face = cv2.resize(face, (384, 384), interpolation=cv2.INTER_CUBIC)
    frames = np.full((n, H, W, 3), 90, dtype=np.uint8)
    for i in range(n):
        frames[i, 18:402, 20 + 6 * i:404 + 6 * i] = face
    return frames


@pytest.fixture(scope="module")
def cropper() -> HaarFaceCropper:
    return HaarFaceCropper()


def test_finds_the_face_and_follows_it(cropper: HaarFaceCropper) -> None:
    frames = _face_frames()
    boxes = [cropper.detect(f) for f in frames]
    assert all(b is not None for b in boxes)
    xs = [b[0] for b in boxes if b is not None]
    assert np.allclose(np.diff(xs), 6, atol=3)  # the box moves with the face
    x, y, w, _h = boxes[0]  # the portrait's face: upper middle of the photo
    assert 20 + 80 < x < 20 + 220 and 18 < y < 18 + 160 and 50 < w < 180


def test_face_and_mouth_crops(cropper: HaarFaceCropper) -> None:
    frames = _face_frames()
    face, found = cropper.crop(frames, 25.0, size=96, region="face")
    mouth, found_m = cropper.crop(frames, 25.0, size=88, region="mouth")
    assert face.shape == (4, 96, 96, 3) and mouth.shape == (4, 88, 88, 3)
    assert found.all() and found_m.all()
    assert face.dtype == np.uint8 and face.std() > 10  # real image content, not a fill
    box = cropper.detect(frames[0])
    assert box is not None
    fx0, fy0, fx1, fy1 = square_box(box, "face", H, W)
    mx0, my0, mx1, my1 = square_box(box, "mouth", H, W)
    assert fx0 <= mx0 and mx1 <= fx1 and fy0 <= my0 and my1 <= fy1  # mouth inside face
    assert my0 > (fy0 + fy1) / 2 - 5  # …in its lower half


def test_frames_without_a_face_hold_the_nearest_box(cropper: HaarFaceCropper) -> None:
    frames = _face_frames(3)
    frames[1] = 90  # a blank frame between two faces
    crops, found = cropper.crop(frames, 25.0, size=64)
    assert found.tolist() == [True, False, True]
    # the blank frame is cropped at the nearest detected box (frame 0's, earlier on ties)
    box = cropper.detect(frames[0])
    assert box is not None
    x0, y0, x1, _y1 = square_box(box, "face", H, W)
    assert np.array_equal(crops[1], np.full((64, 64, 3), 90, np.uint8))
    assert (x0, y0) != (0, 0) and x1 - x0 < min(H, W)  # a face box, not the centre fallback


def test_faceless_demo_clip_gets_centre_crops_and_no_found(cropper: HaarFaceCropper) -> None:
    frames, fps = sample_frames(ROOT / "data" / "demo" / "clips" / "demo_001.mp4", fps=2.0,
                                size=180, max_frames=4)
    crops, found = cropper.crop(frames, fps, size=64)
    assert not found.any()
    h, w = frames.shape[1:3]
    side = min(h, w)
    x0, y0 = (w - side) // 2, (h - side) // 2
    expect = cv2.resize(np.ascontiguousarray(frames[0, y0:y0 + side, x0:x0 + side]), (64, 64),
                        interpolation=cv2.INTER_AREA)
    assert np.array_equal(crops[0], expect)


def test_bad_input_is_a_clear_error(cropper: HaarFaceCropper) -> None:
    with pytest.raises(ValueError, match="expected"):
        cropper.crop(np.zeros((0, 8, 8, 3), np.uint8), 25.0, size=8)
    with pytest.raises(ValueError, match="region"):
        cropper.crop(_face_frames(1), 25.0, size=8, region="eyes")


def test_square_box_stays_inside_the_frame() -> None:
    assert square_box((0, 0, 50, 50), "face", 60, 80) == (0, 0, 60, 60)
    x0, y0, x1, y1 = square_box((70, 40, 20, 20), "face", 60, 80)
    assert (x1, y1) == (80, 60) and x1 - x0 == y1 - y0 == 26
