"""Video input of the face-centric A-V detectors (AVH-Align, AV Anomaly, BA-TFD+): 25 fps, crops.

All three upstream pipelines read 25 fps video of a face filling the frame (LRS3,
VoxCeleb2, FakeAVCeleb, AV-Deepfake1M, LAV-DF are face-track crops) next to 16 kHz audio.
These helpers bring the stage's frames to exactly 25 fps (:func:`at_fps`) and crop the face
or mouth with a :class:`~madbench_common.models.roles.FaceCropper` (``ref-haar-face`` by
default; :func:`face_track`). Numpy, scipy and OpenCV only (OpenCV imported on use), so the
recipes are tested in the main suite.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from madbench_common.core.types import Audio
from madbench_common.models.roles import FaceCropper, Frames

__all__ = ["FPS", "FaceTrack", "at_fps", "face_track", "int16_scale", "resize_frames"]

FPS = 25.0
"""The frame rate all three detectors were trained at (one video frame per 640 samples)."""


@dataclass(frozen=True)
class FaceTrack:
    """Per-frame crops (T, size, size, 3) and what was done where no face was found."""

    crops: Frames
    found: npt.NDArray[np.bool_]
    fallback: str = ""


def at_fps(frames: Frames, fps: float, target: float = FPS) -> Frames:
    """``frames`` at ``target`` fps: at each output time ``k / target`` the frame on screen.

    Output frame ``k`` is source frame ``floor(k · fps / target)``; the clip keeps its
    duration (``floor(T · target / fps)`` frames, at least one).
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or len(frames) == 0 or fps <= 0:
        raise ValueError(f"video: expected (T, H, W, 3) frames and fps > 0, got {frames.shape} "
                         f"at {fps}")
    n = max(1, int(np.floor(len(frames) * target / fps + 1e-6)))
    idx = np.minimum(np.floor(np.arange(n) * fps / target + 1e-6).astype(np.int64),
                     len(frames) - 1)
    return frames[idx]


def resize_frames(frames: Frames, size: int) -> Frames:
    """Every frame resized to ``size`` × ``size`` (bicubic; the aspect ratio is not kept)."""
    import cv2

    out = np.empty((len(frames), size, size, 3), dtype=np.uint8)
    for i, frame in enumerate(frames):
        out[i] = cv2.resize(np.ascontiguousarray(frame), (size, size),
                            interpolation=cv2.INTER_CUBIC)
    return out


TRACKS_KEPT = 4
"""Face tracks :func:`face_track` keeps per cropper (a clip's samples come in a row)."""

_TRACKS: weakref.WeakKeyDictionary[object, OrderedDict[tuple[object, ...], FaceTrack]] = \
    weakref.WeakKeyDictionary()
_TRACKS_LOCK = threading.Lock()


def _track_key(frames: Frames, fps: float, size: int, region: str) -> tuple[object, ...]:
    data = np.ascontiguousarray(frames)
    digest = hashlib.blake2b(data.data.cast("B"), digest_size=32).hexdigest()
    return (data.shape, str(data.dtype), float(fps), int(size), region, digest)


def _copy(track: FaceTrack) -> FaceTrack:
    return FaceTrack(np.array(track.crops, copy=True), track.found.copy(), track.fallback)


def face_track(cropper: FaceCropper, frames: Frames, fps: float, *, size: int,
               region: str = "face") -> FaceTrack:
    """Face or mouth crops of every frame, with the ``whole_frame`` fallback when no face.

    The last :data:`TRACKS_KEPT` tracks of each cropper are kept by a digest of the
    frames (with the rate, crop size and region); the caller always gets its own copy. A
    clip's four samples (R, S, E, Q: the video stays authentic, only the audio changes)
    and its perturbed copies carry the same frames, and a shard's items are sorted by
    sample id, so detection runs once per distinct video instead of once per sample (the
    Haar cropper took 36 % of AV Anomaly's shard time, and on a GPU node it runs on the
    CPU while the model waits). The result is the same array a fresh detection gives (the
    key is the exact input; croppers are deterministic).

    Where the cropper finds no face in the whole clip, the model's documented fallback is
    recorded on the row (``InputSpec.fallback``), never silent: ``whole_frame`` is the
    frame resized to the crop size, which is what each upstream data loader does with an
    uncropped video. Frames where a face was missed inside a clip with faces keep the
    nearest detection (the cropper's rule) and are counted (``face_held:<n>/<T>``)."""
    key = _track_key(frames, fps, size, region)
    try:
        with _TRACKS_LOCK:
            kept = _TRACKS.setdefault(cropper, OrderedDict())
            if key in kept:
                kept.move_to_end(key)
                return _copy(kept[key])
    except TypeError:  # a cropper that takes no weak reference: nothing kept
        return _detect_track(cropper, frames, fps, size=size, region=region)
    track = _detect_track(cropper, frames, fps, size=size, region=region)
    with _TRACKS_LOCK:
        kept[key] = _copy(track)
        while len(kept) > TRACKS_KEPT:
            kept.popitem(last=False)
    return track


def _detect_track(cropper: FaceCropper, frames: Frames, fps: float, *, size: int,
                  region: str) -> FaceTrack:
    crops, found = cropper.crop(frames, fps, size=size, region=region)
    found = np.asarray(found, dtype=bool)
    if not found.any():
        return FaceTrack(resize_frames(frames, size), found, "no_face:whole_frame")
    missed = int((~found).sum())
    return FaceTrack(np.asarray(crops, dtype=np.uint8), found,
                     f"face_held:{missed}/{len(found)}" if missed else "")


def int16_scale(audio: Audio) -> npt.NDArray[np.float32]:
    """Float audio in [-1, 1] as the int16 sample values a 16-bit PCM WAV holds."""
    x = np.asarray(audio, dtype=np.float64).reshape(-1)
    return np.clip(np.round(x * 32768.0), -32768, 32767).astype(np.float32)
