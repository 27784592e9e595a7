"""Bounded probing and decoding of untrusted source media (clips come from the internet).

:func:`decode_untrusted` opens a source in a child process, forked for each file by
a small single-threaded decoder server (``python -m madbench_common.media_guard``,
started once per process and fed through a pipe), so nothing of the caller's threads
or memory is shared. The child

* may grow its address space by at most ``max_memory`` bytes (``RLIMIT_AS``) and is
  killed after ``timeout`` seconds of wall-clock time;
* opens the file with FFmpeg restricted to the ``file`` protocol and to the
  container demuxers of :data:`FORMATS` (no HLS, concat, image2 or network inputs),
  and with FFmpeg's own ``max_streams`` set to ``max_streams``;
* rejects from the header, before decoding anything: too many streams, a frame size
  over ``max_width`` × ``max_height`` (or one FFmpeg cannot establish: sizes such as
  16384 × 16384 are over its own limits), a frame rate over ``max_fps``, more video
  frames than ``max_fps`` × the duration limit, or a declared duration over
  ``max_duration + slack``;
* decodes the first audio stream, stopping as soon as it exceeds ``max_duration +
  slack`` seconds (a decompression bomb is rejected after that much work, whatever
  its header claims).

Every rejection is an :class:`~madbench_common.errors.InputRejected` with a reason
code. The limits are ingest parameters (``definition.py``); the paper fixes none of
them (its clips are 4–12 s): the defaults leave ordinary clips untouched.
"""

from __future__ import annotations

import atexit
import os
import pickle
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

import av
import numpy as np

from madbench_common.audio import MediaInfo
from madbench_common.errors import InputRejected
from madbench_common.pipeline.usage import peak_rss_bytes
from madbench_common.types import Audio

__all__ = ["FORMATS", "DecodedSource", "MediaLimits", "decode_untrusted", "probe_bounded"]

FORMATS = ("mov", "mp4", "m4a", "3gp", "matroska", "webm", "avi")
"""FFmpeg demuxers a source may use (``format_whitelist``)."""
_CONTAINER_MAGIC = (b"ftyp", b"\x1aE\xdf\xa3", b"RIFF")
_SERVER_GRACE = 10.0
"""Seconds the caller waits beyond ``timeout`` before it gives up on the server itself."""


@dataclass(frozen=True)
class MediaLimits:
    """Bounds on one source file (defaults: generous for 4–12 s clips, see the module doc)."""

    max_duration: float = 12.0
    """Seconds of audio (declared or decoded) beyond which decoding stops (plus ``slack``)."""
    slack: float = 1.0
    max_streams: int = 8
    max_width: int = 4096
    max_height: int = 4096
    max_fps: float = 240.0
    max_file_bytes: int = 1 << 30
    timeout: float = 60.0
    """Wall-clock seconds for probing and decoding one file."""
    max_memory: int = 1 << 30
    """Bytes the decoding process may add to its address space."""

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> MediaLimits:
        """Limits from ingest parameters (``max_duration``, ``max_streams``, …, ``*_mb``)."""
        limits = cls()
        fields: dict[str, Any] = {k: type(getattr(limits, k))(params[k]) for k in
                  ("max_duration", "max_streams", "max_width", "max_height", "max_fps")
                  if k in params}
        if "decode_timeout" in params:
            fields["timeout"] = float(params["decode_timeout"])
        for key, name in (("max_file_mb", "max_file_bytes"), ("decode_memory_mb", "max_memory")):
            if key in params:
                fields[name] = int(float(params[key]) * (1 << 20))
        return replace(limits, **fields)


@dataclass(frozen=True)
class DecodedSource:
    """A source that passed every bound: its stream facts and mono audio."""

    info: MediaInfo
    audio: Audio
    peak_rss: int
    """Peak resident bytes of the decoding process."""


def decode_untrusted(path: Path, sample_rate: int, limits: MediaLimits,
                     name: str | None = None) -> DecodedSource:
    """Probe and decode ``path`` within ``limits`` in a child process.

    ``name`` is how errors name the file (the user's path for a downloaded copy).
    Raises :class:`InputRejected` with the reason.
    """
    where = name or str(path)
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise InputRejected(where, "file_too_large",
                            f"{size} bytes > {limits.max_file_bytes} bytes")
    result = _SERVER.call((str(path), sample_rate, limits), limits.timeout + _SERVER_GRACE)
    if result[0] == "timeout":
        raise InputRejected(where, "decode_timeout",
                            f"probing and decoding took over {limits.timeout:g}s")
    if result[0] == "crashed":
        raise InputRejected(where, "decode_crashed", f"the decoder died ({result[1]})")
    if result[0] == "rejected":
        raise InputRejected(where, result[1], result[2])
    if result[0] == "error":
        raise RuntimeError(f"{where}: the decoding process failed: {result[1]}")
    _, info, audio, peak = result
    return DecodedSource(info, audio, peak)


# ---------------------------------------------------------------- the decoder server


def _read_frame(stream: IO[bytes]) -> bytes | None:
    head = stream.read(8)
    if len(head) < 8:
        return None
    return stream.read(int.from_bytes(head, "little"))


def _write_frame(stream: IO[bytes], data: bytes) -> None:
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


class _Server:
    """The caller's end: starts the server on first use, restarts it if it dies."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, "-m", "madbench_common.media_guard"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self.proc

    def call(self, request: tuple[str, int, MediaLimits], timeout: float) -> tuple[Any, ...]:
        with self.lock:
            proc = self._start()
            assert proc.stdin is not None and proc.stdout is not None
            ready: list[Any] = []
            data = None
            try:
                _write_frame(proc.stdin, pickle.dumps(request))
                ready = select.select([proc.stdout], [], [], timeout)[0]
                data = _read_frame(proc.stdout) if ready else None
            except OSError:
                pass
            if data is None:  # the server itself hung or died: start afresh next time
                self.stop()
                return ("crashed", "decoder server exited") if ready else ("timeout",)
            reply: tuple[Any, ...] = pickle.loads(data)
            return reply

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


_SERVER = _Server()
atexit.register(_SERVER.stop)


def _serve() -> None:
    """Server loop: one request at a time, each decoded in a forked, bounded child."""
    import av.subtitles.stream  # noqa: F401 - what av.open imports lazily, loaded before
    # any child runs under its memory cap (an import there could not map its library)

    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (request := _read_frame(stdin)) is not None:
        path, rate, limits = pickle.loads(request)
        _write_frame(stdout, _forked(path, rate, limits))


def _forked(path: str, rate: int, limits: MediaLimits) -> bytes:
    """The child's pickled reply, passed through unread (the server's heap stays small)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        try:
            with os.fdopen(write_fd, "wb") as out:
                out.write(pickle.dumps(_child(path, rate, limits)))
        finally:
            os._exit(0)
    os.close(write_fd)
    data, timed_out = _read_until(read_fd, limits.timeout)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    if timed_out:
        return pickle.dumps(("timeout",))
    if not data:
        return pickle.dumps(("crashed", f"wait status {status}"))
    return data


def _read_until(fd: int, timeout: float) -> tuple[bytes, bool]:
    """Everything written to ``fd`` until EOF, or what came before ``timeout`` ran out."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    with os.fdopen(fd, "rb", buffering=0) as src:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([src], [], [], left)[0]:
                return b"".join(chunks), True
            chunk = src.read(1 << 20)
            if not chunk:
                return b"".join(chunks), False
            chunks.append(chunk)


def _limit_memory(extra: int) -> None:
    """Cap the address space at its current size plus ``extra`` bytes."""
    current = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                current = int(line.split()[1]) * 1024
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = current + extra
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard < 0 else min(cap, hard), hard))


def _child(path: str, sample_rate: int, limits: MediaLimits) -> tuple[Any, ...]:
    """Runs in the forked child: ``("ok", info, audio, peak)`` or ``("rejected", …)``."""
    try:
        _limit_memory(limits.max_memory)
        info = probe_bounded(Path(path), limits)
        audio = _decode_bounded(Path(path), sample_rate, limits)
        return ("ok", info, audio, peak_rss_bytes())
    except InputRejected as exc:
        return ("rejected", exc.reason, exc.detail)
    except (MemoryError, ImportError):  # ImportError: a library could not be mapped
        return ("rejected", "decode_memory",
                f"decoding needed more than {limits.max_memory >> 20} MiB")
    except (av.FFmpegError, UnicodeDecodeError, ValueError) as exc:
        reason = "truncated" if _looks_like_media(Path(path)) else "unreadable"
        return ("rejected", reason, str(exc))
    except Exception as exc:  # a bug here must surface, not become a rejected row
        return ("error", f"{type(exc).__name__}: {exc}")


def _looks_like_media(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(16)
    return any(m in head for m in _CONTAINER_MAGIC)


def _open_options(limits: MediaLimits) -> dict[str, str]:
    return {"protocol_whitelist": "file", "format_whitelist": ",".join(FORMATS),
            "max_streams": str(limits.max_streams)}


def _open(path: Path, limits: MediaLimits) -> Any:
    """``av.open`` with the restrictions; FFmpeg's refusals become reasons."""
    with av.logging.Capture() as logs:
        old = av.logging.get_level()
        av.logging.set_level(av.logging.ERROR)
        try:
            return av.open(str(path), options=_open_options(limits))
        except av.FFmpegError as exc:
            text = " ".join(str(m[2]) for m in logs)
            if "max_streams" in text:
                raise InputRejected(str(path), "too_many_streams",
                                    f"more than {limits.max_streams} streams") from None
            if isinstance(exc, (av.error.ArgumentError, av.error.PermissionError)) and \
                    not _looks_like_media(path):
                raise InputRejected(str(path), "unsupported_container",
                                    f"not one of {', '.join(FORMATS)} (file protocol only)"
                                    ) from None
            raise
        finally:
            av.logging.set_level(old)


def probe_bounded(path: Path, limits: MediaLimits) -> MediaInfo:
    """Stream facts of ``path``, or :class:`InputRejected` if a header exceeds ``limits``."""
    with _open(path, limits) as container:
        if len(container.streams) > limits.max_streams:
            raise InputRejected(str(path), "too_many_streams",
                                f"{len(container.streams)} streams > {limits.max_streams}")
        duration = container.duration / av.time_base if container.duration else 0.0
        for stream in container.streams.video:
            _check_video(path, stream, max(duration, 0.0), limits)
        if duration > limits.max_duration + limits.slack:
            raise InputRejected(str(path), "too_long", f"declared duration {duration:.1f}s > "
                                f"{limits.max_duration}s")
        return _info(container, duration)


def _check_video(path: Path, stream: Any, duration: float, limits: MediaLimits) -> None:
    width, height = stream.codec_context.width, stream.codec_context.height
    if width <= 0 or height <= 0:
        raise InputRejected(str(path), "video_size_invalid",
                            "FFmpeg reports no frame size: the declared size is over its "
                            "limits (e.g. 16384x16384) or the header is damaged")
    if width > limits.max_width or height > limits.max_height:
        raise InputRejected(str(path), "resolution_too_high",
                            f"{width}x{height} > {limits.max_width}x{limits.max_height}")
    fps = float(stream.average_rate or stream.guessed_rate or 0)
    if fps > limits.max_fps:
        raise InputRejected(str(path), "too_many_frames", f"{fps:.1f} fps > {limits.max_fps}")
    max_frames = int(limits.max_fps * (limits.max_duration + limits.slack))
    frames = int(stream.frames or 0) or int(fps * duration)
    if frames > max_frames:
        raise InputRejected(str(path), "too_many_frames", f"{frames} frames > {max_frames}")


def _info(container: Any, duration: float) -> MediaInfo:
    video = container.streams.video[0] if container.streams.video else None
    audio = container.streams.audio[0] if container.streams.audio else None
    return MediaInfo(
        duration=float(duration), has_video=video is not None, has_audio=audio is not None,
        video_codec=video.codec_context.name if video else "",
        width=video.codec_context.width if video else 0,
        height=video.codec_context.height if video else 0,
        fps=float(video.average_rate or Fraction(0)) if video else 0.0,
        audio_codec=audio.codec_context.name if audio else "",
        sample_rate=audio.codec_context.sample_rate if audio else 0,
        channels=audio.codec_context.channels if audio else 0,
    )


def _decode_bounded(path: Path, sample_rate: int, limits: MediaLimits) -> Audio:
    """The first audio stream as mono float32; stops past ``max_duration + slack``."""
    budget = int((limits.max_duration + limits.slack) * sample_rate)
    resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
    chunks: list[np.ndarray] = []
    total = 0
    with _open(path, limits) as container:
        if not container.streams.audio:
            return np.zeros(0, dtype=np.float32)
        for frame in container.decode(container.streams.audio[0]):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
                total += chunks[-1].size
            if total > budget:
                raise InputRejected(str(path), "too_long",
                                    f"decoded more than {budget / sample_rate:.1f}s of audio "
                                    "(stopped there)")
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(chunks).astype(np.float32, copy=False)


if __name__ == "__main__":
    _serve()
