"""Inputs of the face-centric A-V detectors (25 fps, crops, fallbacks) and BA-TFD+'s
proposal score: numpy/OpenCV recipes that run in the main suite on real demo frames."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.models.adapters.batfd import max_proposal
from madbench_common.models.av_prep import at_fps, face_track, int16_scale, resize_frames
from madbench_common.models.reference.face import HaarFaceCropper

from .tiny import demo_frames


def test_at_fps_shows_the_frame_on_screen() -> None:
    frames = np.arange(12, dtype=np.uint8).reshape(12, 1, 1, 1).repeat(3, axis=3)
    out = at_fps(frames, 12.0, 25.0)  # 1 s at 12 fps → 25 frames
    assert len(out) == 25
    assert [int(f[0, 0, 0]) for f in out[:5]] == [0, 0, 0, 1, 1]
    assert int(out[-1, 0, 0, 0]) == 11
    same = at_fps(frames, 25.0, 25.0)
    assert np.array_equal(same, frames)
    with pytest.raises(ValueError, match="fps > 0"):
        at_fps(frames, 0.0)


def test_face_track_records_the_whole_frame_fallback() -> None:
    frames, fps = demo_frames(2, fps=4.0, size=96, max_frames=4)
    blank = np.zeros_like(frames)  # no face anywhere: the whole frame, resized
    track = face_track(HaarFaceCropper(), blank, fps, size=32)
    assert track.fallback == "no_face:whole_frame" and not track.found.any()
    assert track.crops.shape == (len(frames), 32, 32, 3)
    assert np.array_equal(track.crops, resize_frames(blank, 32))


class _Counting(HaarFaceCropper):
    """The Haar cropper, counting the clips it detects in."""

    def __init__(self) -> None:
        self.calls = 0

    def crop(self, frames, fps, *, size, region="face"):  # type: ignore[no-untyped-def]
        self.calls += 1
        return super().crop(frames, fps, size=size, region=region)


def test_a_clips_samples_share_one_face_detection() -> None:
    """R, S, E and Q of a clip carry the same frames: the track is detected once, and every
    sample gets the array a fresh detection gives, as its own copy."""
    frames, fps = demo_frames(2, fps=4.0, size=96, max_frames=4)
    cropper = _Counting()
    first = face_track(cropper, frames, fps, size=32)
    fresh = face_track(HaarFaceCropper(), frames, fps, size=32)
    for _ in range(3):  # the other three samples of the clip
        again = face_track(cropper, frames.copy(), fps, size=32)
        assert np.array_equal(again.crops, fresh.crops)
        assert np.array_equal(again.found, fresh.found) and again.fallback == fresh.fallback
    assert cropper.calls == 1
    again.crops[:] = 0  # a caller writing into its crops changes nobody else's
    assert np.array_equal(face_track(cropper, frames, fps, size=32).crops, first.crops)
    assert cropper.calls == 1
    # another crop size, region, rate or video is another track
    face_track(cropper, frames, fps, size=48)
    face_track(cropper, frames, fps, size=32, region="mouth")
    face_track(cropper, frames, fps * 2, size=32)
    other = frames.copy()
    other[0, 0, 0, 0] ^= 1
    face_track(cropper, other, fps, size=32)
    assert cropper.calls == 5


def test_only_the_last_few_tracks_are_kept() -> None:
    from madbench_common.models.av_prep import TRACKS_KEPT

    frames, fps = demo_frames(2, fps=4.0, size=64, max_frames=2)
    cropper = _Counting()
    clips = [frames + np.uint8(i) for i in range(TRACKS_KEPT + 1)]
    for clip in clips:
        face_track(cropper, clip, fps, size=16)
    face_track(cropper, clips[-1], fps, size=16)  # kept
    assert cropper.calls == TRACKS_KEPT + 1
    face_track(cropper, clips[0], fps, size=16)  # the oldest went
    assert cropper.calls == TRACKS_KEPT + 2


def test_int16_scale_is_what_a_pcm_s16le_wav_holds() -> None:
    x = np.array([0.0, 0.5, -1.0, 1.0, 1e-5], dtype=np.float32)
    assert int16_scale(x).tolist() == [0.0, 16384.0, -32768.0, 32767.0, 0.0]


def test_max_proposal_follows_the_proposal_filter() -> None:
    bm = np.zeros((4, 10))
    bm[0, 2] = 0.99  # duration 0: not a proposal
    bm[3, 8] = 0.98  # ends at frame 11 > 9 frames
    bm[2, 3] = 0.7
    assert max_proposal(bm, 9) == pytest.approx(0.7)
    start, end = np.full(10, 0.5), np.full(10, 0.5)
    assert max_proposal(bm, 9, start, end) == pytest.approx(0.7 * 0.25)
    with pytest.raises(ValueError, match="no proposal"):
        max_proposal(bm, 0)
