"""The one guarded path for every byte from outside: source media, stems, listings.

Clips, reference stems, the sources CSV and the names in a sources folder all come from
the internet. Each is read in a child forked per request by a small single-threaded
server (``python -m madbench_common.media.guard``, started once per process, fed through
a pipe, killed with its parent), bounded in memory and time (:class:`MediaLimits`), so
nothing of the caller's threads or memory is shared: :func:`decode_untrusted` (a source
clip), :func:`decode_stem` (a reference stem), :func:`guarded_call` (the listing helpers
of :mod:`madbench_common.media.listing`). Every rejection is an ``InputRejected`` with a reason.
"""

from __future__ import annotations

import atexit
import os
import pickle
import resource
import select
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

import av
import numpy as np

from madbench_common.core.errors import InputRejected
from madbench_common.core.types import Audio
from madbench_common.core.usage import peak_rss_bytes
from madbench_common.media.audio import MediaInfo

__all__ = ["FORMATS", "STEM_FORMATS", "DecodedSource", "MediaLimits", "decode_stem",
           "decode_untrusted", "guarded_call", "probe_bounded"]

FORMATS = ("mov", "mp4", "m4a", "3gp", "matroska", "webm", "avi")
"""FFmpeg demuxers a source may use (``format_whitelist``)."""
STEM_FORMATS = (*FORMATS, "wav", "flac", "ogg", "mp3")
"""FFmpeg demuxers a reference stem may use: audio files, or the source containers. A
stem's demuxer is chosen from its first bytes (:func:`_sniff`), never by FFmpeg's
probing, which settles for a low-score guess (random bytes "are" MP3)."""
_CONTAINER_MAGIC = (b"ftyp", b"\x1aE\xdf\xa3", b"RIFF", b"fLaC", b"OggS", b"ID3")
_FAMILIES = {"mov": (".mp4", ".mov", ".m4v", ".m4a", ".3gp"), "matroska": (".mkv", ".webm"),
             "avi": (".avi",)}
"""Container family (FFmpeg's first demuxer name) → file extensions, the first the default."""
_SERVER_GRACE = 10.0
"""Seconds the caller waits beyond ``timeout`` before it gives up on the server itself."""


@dataclass(frozen=True)
class MediaLimits:
    """Bounds on one source file (defaults: generous for 4–12 s clips).

    The limits are ingest parameters (``benchmarks/madbench/graph.py``); the paper fixes
    none of them (its clips are 4–12 s): the defaults leave ordinary clips untouched. The
    child may grow its address space by at most ``max_memory`` bytes (``RLIMIT_AS``) and is
    killed after ``timeout`` seconds of wall-clock time.
    """

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
    max_listing_bytes: int = 64 << 20
    """Bytes of a sources CSV."""
    max_sources: int = 1_000_000
    """Rows of a sources CSV, or entries under a sources folder."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> MediaLimits:
        """Limits from ingest parameters (``max_duration``, ``max_streams``, …, ``*_mb``)."""
        limits = cls()
        fields: dict[str, Any] = {k: type(getattr(limits, k))(params[k]) for k in
                  ("max_duration", "max_streams", "max_width", "max_height", "max_fps")
                  if k in params}
        if "decode_timeout" in params:
            fields["timeout"] = float(params["decode_timeout"])
        if "max_sources" in params:
            fields["max_sources"] = int(params["max_sources"])
        for key, name in (("max_file_mb", "max_file_bytes"), ("decode_memory_mb", "max_memory"),
                          ("max_listing_mb", "max_listing_bytes")):
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
    extension: str = ".mp4"
    """The file name extension of its container as FFmpeg identified it (``.mp4``,
    ``.mkv``, …), whatever its name says."""


def _size_checked(path: Path, limits: MediaLimits, where: str) -> None:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise InputRejected(where, "missing", "file does not exist") from None
    if size > limits.max_file_bytes:
        raise InputRejected(where, "file_too_large",
                            f"{size} bytes > {limits.max_file_bytes} bytes")


def decode_untrusted(path: Path, sample_rate: int, limits: MediaLimits,
                     name: str | None = None, exact: bool = False) -> DecodedSource:
    """Probe and decode ``path`` within ``limits`` in a child process.

    ``name`` is how errors name the file (the user's path for a downloaded copy);
    ``exact``: ``path`` is resolved already and must still be (no link swapped in).
    Raises :class:`InputRejected` with the reason.
    """
    where = name or str(path)
    _size_checked(path, limits, where)
    info, audio, peak, ext = guarded_call("media", (os.path.abspath(path), sample_rate, limits,
                                                    exact), limits, where)
    return DecodedSource(info, audio, peak, ext)


def decode_stem(path: Path, sample_rate: int, limits: MediaLimits,
                name: str | None = None, exact: bool = False) -> Audio:
    """A reference stem's first audio stream as mono float32, bounded as a source's is
    (formats :data:`STEM_FORMATS`); :class:`InputRejected` with the reason."""
    where = name or str(path)
    _size_checked(path, limits, where)
    audio: Audio = guarded_call("stem", (os.path.abspath(path), sample_rate, limits, exact),
                                limits, where)
    return audio


def guarded_call(kind: str, args: tuple[Any, ...], limits: MediaLimits, name: str,
                 timeout: float | None = None) -> Any:
    """Run the child handler ``kind`` on ``args`` under ``limits`` (memory; ``timeout``
    or ``limits.timeout`` seconds); its result, or :class:`InputRejected` naming ``name``
    (reasons ``decode_timeout``, ``decode_crashed``, ``decode_memory`` or the handler's)."""
    seconds = limits.timeout if timeout is None else timeout
    result = _SERVER.call((kind, args, limits.max_memory, seconds), seconds + _SERVER_GRACE)
    if result[0] == "timeout":
        raise InputRejected(name, "decode_timeout", f"reading it took over {seconds:g}s")
    if result[0] == "crashed":
        raise InputRejected(name, "decode_crashed", f"the decoder died ({result[1]})")
    if result[0] == "rejected":
        raise InputRejected(name, result[1], result[2])
    if result[0] == "error":
        raise RuntimeError(f"{name}: the guarded process failed: {result[1]}")
    return result[1]


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
    """The caller's end: starts the server on first use, restarts it if it dies.

    A forked copy of the caller (a shard worker) starts a server of its own: it never
    writes into its parent's pipe, nor stops its parent's server.
    """

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.owner = 0
        self.lock = threading.Lock()

    def _start(self) -> subprocess.Popen[bytes]:
        if self.owner != os.getpid():
            self.proc, self.owner = None, os.getpid()
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "madbench_common.media.guard", str(os.getpid())],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self.proc

    def call(self, request: tuple[Any, ...], timeout: float) -> tuple[Any, ...]:
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
        if self.owner == os.getpid() and self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


_SERVER = _Server()
atexit.register(_SERVER.stop)


def _serve(parent: int | None) -> None:
    """Server loop: one request at a time, each handled in a forked, bounded child."""
    # What av.open and the listing helpers import lazily, loaded before any child runs
    # under its memory cap (an import there could not map its library).
    import av.subtitles.stream  # noqa: F401

    from madbench_common.core.orphans import die_with_parent
    from madbench_common.media import listing  # noqa: F401

    die_with_parent(parent)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (request := _read_frame(stdin)) is not None:
        kind, args, memory, timeout = pickle.loads(request)
        _write_frame(stdout, _forked(kind, args, memory, timeout))


def _forked(kind: str, args: tuple[Any, ...], memory: int, timeout: float) -> bytes:
    """The child's pickled reply, passed through unread (the server's heap stays small)."""
    read_fd, write_fd = os.pipe()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        try:
            from madbench_common.core.orphans import die_with_parent

            die_with_parent(server)
            with os.fdopen(write_fd, "wb") as out:
                out.write(pickle.dumps(_child(kind, args, memory)))
        finally:
            os._exit(0)
    os.close(write_fd)
    data, timed_out = _read_until(read_fd, timeout)
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


def _child_media(path: str, rate: int, limits: MediaLimits, exact: bool = False
                 ) -> tuple[Any, ...]:
    _check_file(Path(path), exact)
    info, ext = probe_bounded(Path(path), limits)
    audio = _decode_bounded(Path(path), rate, limits, FORMATS, video=True)
    return info, audio, peak_rss_bytes(), ext


def _child_stem(path: str, rate: int, limits: MediaLimits, exact: bool = False) -> Audio:
    _check_file(Path(path), exact)
    demuxer = _sniff(Path(path))
    if demuxer is None:
        raise InputRejected(path, "unsupported_container",
                            "not a WAV, FLAC, Ogg, MP3 (ID3) or MP4/Matroska/AVI file")
    audio = _decode_bounded(Path(path), rate, limits, (demuxer,), video=False)
    if audio.size == 0:  # padded to the clip, it would pass for a silent reference
        raise InputRejected(path, "no_audio", "no audio stream, or one without samples")
    _check_finite(audio, path)
    return audio


def _check_finite(audio: Audio, path: str) -> None:
    """NaN or Inf samples (a float WAV may hold them) would be stored and turn every
    metric computed from them (SI-SDR, levels) into NaN: the file is refused instead."""
    bad = int(audio.size - np.count_nonzero(np.isfinite(audio)))
    if bad:
        raise InputRejected(path, "non_finite_audio",
                            f"{bad} of {audio.size} decoded samples are NaN or Inf")


def _sniff(path: Path) -> str | None:
    """The demuxer a stem's first bytes call for, or ``None``."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head[:4] == b"RIFF":
        return {b"WAVE": "wav", b"AVI ": "avi"}.get(head[8:12])
    if head[4:8] == b"ftyp":
        return "mov"
    return {b"fLaC": "flac", b"OggS": "ogg", b"\x1aE\xdf\xa3": "matroska"}.get(
        head[:4], "mp3" if head[:3] == b"ID3" else None)


def _child_call(target: str, *args: Any) -> Any:
    from madbench_common.media import listing

    try:
        return getattr(listing, target)(*args)
    except ValueError as exc:
        raise InputRejected("", "bad_listing", str(exc)) from None


_HANDLERS: dict[str, Any] = {"media": _child_media, "stem": _child_stem}


def _child(kind: str, args: tuple[Any, ...], memory: int) -> tuple[Any, ...]:
    """Runs in the forked child: ``("ok", result)``, ``("rejected", reason, detail)`` or
    ``("error", text)``."""
    path = Path(str(args[0])) if kind in _HANDLERS else None
    try:
        _limit_memory(memory)
        if path is not None:
            return ("ok", _HANDLERS[kind](*args))
        return ("ok", _child_call(kind, *args))
    except InputRejected as exc:
        return ("rejected", exc.reason, exc.detail)
    except (MemoryError, ImportError):  # ImportError: a library could not be mapped
        return ("rejected", "decode_memory",
                f"decoding needed more than {memory >> 20} MiB")
    except (av.FFmpegError, UnicodeDecodeError, ValueError, OSError) as exc:
        reason = "truncated" if path is not None and _looks_like_media(path) else "unreadable"
        return ("rejected", reason, str(exc))
    except Exception as exc:  # a bug here must surface, not become a rejected row
        return ("error", f"{type(exc).__name__}: {exc}")


def _check_file(path: Path, exact: bool) -> None:
    """Only a regular file is read (never a FIFO or a device); ``exact``: a path the caller
    vetted (resolved, inside its root) must still resolve to itself (a link put in its
    place since is refused)."""
    if exact and os.path.realpath(path) != str(path):
        raise InputRejected(str(path), "outside_sources",
                            "the path became a symbolic link after it was checked")
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise InputRejected(str(path), "not_a_file", "not a regular file")


def _looks_like_media(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    return any(m in head for m in _CONTAINER_MAGIC)


def _open_options(limits: MediaLimits, formats: tuple[str, ...]) -> dict[str, str]:
    return {"protocol_whitelist": "file", "format_whitelist": ",".join(formats),
            "max_streams": str(limits.max_streams)}


def _open(path: Path, limits: MediaLimits, formats: tuple[str, ...] = FORMATS) -> Any:
    """``av.open`` with the restrictions; FFmpeg's refusals become reasons.

    FFmpeg is restricted to the ``file`` protocol and to the container demuxers of
    :data:`FORMATS` (no HLS, concat, image2 or network inputs), with its own
    ``max_streams`` set to ``max_streams``. The header is then checked before decoding
    anything (:func:`probe_bounded`): too many streams, a frame size over ``max_width`` ×
    ``max_height`` (or one FFmpeg cannot establish: sizes such as 16384 × 16384 are over
    its own limits), a frame rate over ``max_fps``, more video frames than ``max_fps`` ×
    the duration limit, or a declared duration over ``max_duration + slack``.
    """
    with av.logging.Capture() as logs:
        old = av.logging.get_level()
        av.logging.set_level(av.logging.ERROR)
        try:
            return av.open(str(path), options=_open_options(limits, formats))
        except av.FFmpegError as exc:
            text = " ".join(str(m[2]) for m in logs)
            if "max_streams" in text:
                raise InputRejected(str(path), "too_many_streams",
                                    f"more than {limits.max_streams} streams") from None
            if isinstance(exc, (av.error.ArgumentError, av.error.PermissionError)) and \
                    not _looks_like_media(path):
                raise InputRejected(str(path), "unsupported_container",
                                    f"not one of {', '.join(formats)} (file protocol only)"
                                    ) from None
            raise
        finally:
            av.logging.set_level(old)


def probe_bounded(path: Path, limits: MediaLimits) -> tuple[MediaInfo, str]:
    """Stream facts of ``path`` and its container's file extension, or
    :class:`InputRejected` if a header exceeds ``limits``."""
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
        return _info(container, duration), _extension(container.format.name, path)


def _extension(format_name: str, path: Path) -> str:
    """The file's own extension if it is one of its container's (``.mov``, ``.webm``…),
    else the container's usual one (``.mp4``, ``.mkv``, ``.avi``): never an arbitrary
    suffix such as ``.mp4;x``."""
    family = _FAMILIES.get(format_name.split(",")[0], (".mp4",))
    suffix = path.suffix.lower()
    return suffix if suffix in family else family[0]


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
        audio_streams=len(container.streams.audio),
        audio_offset=_audio_offset(audio, video),
    )


_MIN_OFFSET = 0.05
"""Seconds: a later start of the audio than this is padded (encoder priming and
container rounding are smaller)."""


def _start(stream: Any) -> float:
    if stream is None or stream.start_time is None or not stream.time_base:
        return 0.0
    return float(stream.start_time * stream.time_base)


def _audio_offset(audio: Any, video: Any) -> float:
    """Seconds the audio stream starts after the video stream (0 when it does not)."""
    if audio is None or video is None:
        return 0.0
    offset = _start(audio) - _start(video)
    return offset if offset > _MIN_OFFSET else 0.0


class _VideoMeter:
    """Counts decoded video frames and the span of their times against the bounds."""

    def __init__(self, path: Path, limits: MediaLimits) -> None:
        self.path, self.seconds = path, limits.max_duration + limits.slack
        self.max_frames = int(limits.max_fps * self.seconds)
        self.frames = 0
        self.first: float | None = None

    def add(self, frame: Any) -> None:
        self.frames += 1
        if self.frames > self.max_frames:
            raise InputRejected(str(self.path), "too_many_frames",
                                f"decoded more than {self.max_frames} video frames "
                                "(stopped there)")
        if frame.time is None:
            return
        self.first = frame.time if self.first is None else min(self.first, frame.time)
        if frame.time - self.first > self.seconds:
            raise InputRejected(str(self.path), "too_long",
                                f"decoded video frames over more than {self.seconds:.1f}s "
                                "(stopped there)")


def _decode_bounded(path: Path, sample_rate: int, limits: MediaLimits,
                    formats: tuple[str, ...], video: bool) -> Audio:
    """The first audio stream as mono float32, and (``video``) the first video stream's
    frames counted and timed; stops past ``max_duration + slack`` either way.

    Measures what the headers only claim: it stops as soon as the audio exceeds
    ``max_duration + slack`` seconds, or the video more frames than ``max_fps`` × that, or
    a span of frame times over it (a decompression bomb, or a 30-minute video that declares
    no duration and no frame count, is rejected after that much work, whatever its header
    claims)."""
    budget = int((limits.max_duration + limits.slack) * sample_rate)
    resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
    chunks: list[np.ndarray] = []
    total = 0
    meter = _VideoMeter(path, limits)
    with _open(path, limits, formats) as container:
        audio = container.streams.audio[0] if container.streams.audio else None
        first_video = container.streams.video[0] if container.streams.video else None
        streams = [s for s in (audio, first_video if video else None) if s is not None]
        lead = round(_audio_offset(audio, first_video if video else None) * sample_rate)
        if lead > budget:
            raise InputRejected(str(path), "too_long", f"the audio starts "
                                f"{lead / sample_rate:.1f}s after the video")
        if lead:  # silence until the audio starts, so sample 0 is the video's first frame
            chunks.append(np.zeros(lead, dtype=np.float32))
            total = lead
        for packet in container.demux(*streams) if streams else ():
            for frame in packet.decode():
                if packet.stream is not audio:
                    meter.add(frame)
                    continue
                for out in resampler.resample(frame):
                    chunks.append(out.to_ndarray().reshape(-1))
                    total += chunks[-1].size
            if total > budget:
                raise InputRejected(str(path), "too_long",
                                    f"decoded more than {budget / sample_rate:.1f}s of audio "
                                    "(stopped there)")
        if audio is not None:
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
    if not chunks:
        return np.zeros(0, dtype=np.float32)
    return np.concatenate(chunks).astype(np.float32, copy=False)


if __name__ == "__main__":
    _serve(int(sys.argv[1]) if len(sys.argv) > 1 else None)
