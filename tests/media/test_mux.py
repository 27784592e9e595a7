"""Muxing: the video stream is copied packet for packet; the new audio track is decodable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from madbench_common.media.audio import decode_audio, probe
from madbench_common.media.mux import remux_with_audio, sample_frames, video_packets
from tests.media.clips import make_clip, speechlike

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo" / "clips"


@pytest.mark.parametrize("rate,channels", [(48000, 2), (44100, 1)])
def test_remux_keeps_video_packets_byte_identical(tmp_path: Path, rate: int,
                                                  channels: int) -> None:
    src = make_clip(tmp_path / "src.mp4", speechlike(3.0, rate), rate=rate, channels=channels)
    new = speechlike(3.0, 16000, seed=5) * 0.5
    out = tmp_path / "out.mp4"
    res = remux_with_audio(src, new, 16000, out)
    assert video_packets(out) == video_packets(src)
    assert res.video_packets == len(video_packets(src))
    info = probe(out)
    assert (info.audio_codec, info.sample_rate, info.channels) == ("aac", rate, channels)
    back = decode_audio(out, 16000)
    n = min(len(back), len(new)) - 4000
    assert np.corrcoef(back[2000:n], new[2000:n])[0, 1] > 0.9  # same audio, AAC-coded


def test_remux_of_a_demo_clip(tmp_path: Path) -> None:
    clip = DEMO / "demo_002.mp4"
    if not clip.exists():
        pytest.skip("data/demo not built")
    out = tmp_path / "o.mp4"
    audio = decode_audio(clip, 16000)
    remux_with_audio(clip, audio[::-1].copy(), 16000, out)
    assert video_packets(out) == video_packets(clip)
    assert abs(probe(out).duration - probe(clip).duration) < 0.1


def test_sample_frames_rate_and_size(tmp_path: Path) -> None:
    src = make_clip(tmp_path / "v.mp4", speechlike(2.0, 16000), rate=16000, fps=10)
    frames, fps = sample_frames(src, fps=2.0, size=24)
    assert frames.ndim == 4 and frames.shape[-1] == 3 and min(frames.shape[1:3]) == 24
    assert fps == pytest.approx(2.0) and len(frames) == 4
