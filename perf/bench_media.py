"""Untrusted media: time to reject each hostile input, and the cost of the
bounds on ordinary clips (guarded decode vs plain PyAV). Results: ``.bench/media.json``."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from madbench_common.core.errors import InputRejected
from madbench_common.media.audio import decode_audio, probe
from madbench_common.media.guard import MediaLimits, decode_untrusted
from perf.results import save
from tests.media.clips import (
    bomb_mkv,
    huge_duration_mp4,
    huge_frame_mp4,
    many_streams_mp4,
)

REPO = Path(__file__).resolve().parents[1]

LIMITS = MediaLimits()


def _reject(path: Path) -> dict[str, object]:
    start = time.perf_counter()
    try:
        decode_untrusted(path, 16000, LIMITS)
        reason, detail = "accepted", ""
    except InputRejected as exc:
        reason, detail = exc.reason, exc.detail
    return {"bytes": path.stat().st_size, "reason": reason, "detail": detail,
            "seconds": round(time.perf_counter() - start, 3)}


def main() -> dict[str, object]:
    clips = sorted((REPO / "data" / "demo" / "clips").glob("*.mp4"))
    decode_untrusted(clips[0], 16000, LIMITS)  # start the decoder server
    start = time.perf_counter()
    for clip in clips:
        decode_untrusted(clip, 16000, LIMITS)
    guarded = (time.perf_counter() - start) / len(clips)
    start = time.perf_counter()
    for clip in clips:
        probe(clip)
        decode_audio(clip, 16000)
    plain = (time.perf_counter() - start) / len(clips)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        hostile = {
            "decompression bomb (20 min FLAC, declares 5 s)": bomb_mkv(t / "b.mkv", 1200),
            "MP4 with 3000 streams": many_streams_mp4(t / "m.mp4", 3000),
            "16384x16384 video": huge_frame_mp4(t / "h.mp4", 16384, 16384),
            "16384x8192 video": huge_frame_mp4(t / "w.mp4", 16384, 8192),
            "declared duration 58 h": huge_duration_mp4(t / "d.mp4"),
        }
        rejected = {name: _reject(path) for name, path in hostile.items()}
    result = {"limits": {k: getattr(LIMITS, k) for k in LIMITS.__dataclass_fields__},
              "demo_clips": len(clips), "guarded_s_per_clip": round(guarded, 3),
              "plain_s_per_clip": round(plain, 3), "hostile": rejected}
    return save("media", result)


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
