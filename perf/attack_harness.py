"""The harness of ``perf/attack_inputs.py``: a child ``madbench run --until ingest`` of
the tree under test with a wall-clock limit (:class:`Ctx`), what came out of it
(:class:`Outcome`), and the hostile media and files the attacks are built from (MP4 and
MKV headers that lie about their duration, a local HTTP server that records every fetch).
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"
GOOD = DEMO / "clips" / "demo_001.mp4"
GOOD2 = DEMO / "clips" / "demo_002.mp4"
GOOD3 = DEMO / "clips" / "demo_003.mp4"
STEM = DEMO / "stems" / "speech" / "demo_001.flac"
LIMIT_S = 180
"""Wall-clock limit of one madbench run; a run past it is reported as a hang."""


def _ffmpeg() -> str:
    import imageio_ffmpeg

    return str(imageio_ffmpeg.get_ffmpeg_exe())


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Outcome:
    rc: int | None
    """Exit code; ``None`` when the run was killed at :data:`LIMIT_S`."""
    rows: list[tuple[str, str, str]]
    """(clip_id, status, reason) of every ingest row."""
    stderr: str
    seconds: float

    def row(self, clip: str) -> str:
        found = [f"{s}/{r}" if r else s for c, s, r in self.rows if c == clip]
        return ",".join(found) if found else "absent"

    def ok(self, clip: str) -> bool:
        return self.row(clip) == "ok"

    def quarantined(self, clip: str) -> bool:
        return self.row(clip).startswith("rejected/")

    def rc_text(self) -> str:
        return "hang" if self.rc is None else str(self.rc)

    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.stderr

    def last_error(self) -> str:
        lines = [ln for ln in self.stderr.splitlines() if ln.strip()]
        errs = [ln for ln in lines if ln.startswith("error")]
        return (errs or lines or [""])[-1][:160]


@dataclass
class Ctx:
    tree: Path
    base: Path
    env: dict[str, str]
    http_hits: list[str] = field(default_factory=list)
    http_port: int = 0

    @property
    def python(self) -> str:
        own = self.tree / ".venv" / "bin" / "python"
        return str(own) if own.exists() else sys.executable  # a worktree without a venv

    def madbench(self, args: list[str], env: dict[str, str] | None = None,
                 cwd: Path | None = None, timeout: float = LIMIT_S
                 ) -> tuple[int | None, str, str, float]:
        start = time.monotonic()
        proc = subprocess.Popen([self.python, "-m", "madbench_common.cli", *args],
                                cwd=cwd or self.base, env={**self.env, **(env or {})},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace", start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, err = proc.communicate()
            rc = None
        return rc, out, err, time.monotonic() - start

    def ingest(self, where: Path, sources: str, env: dict[str, str] | None = None,
               cwd: Path | None = None, run_id: str = "a") -> Outcome:
        rc, _, err, secs = self.madbench(
            ["run", "--sources", sources, "--store", str(where / "store"), "--run-id", run_id,
             "--until", "ingest", "--workers", "1", "--no-progress"], env, cwd)
        return Outcome(rc, _rows(where / "store" / run_id), err, secs)


def _rows(run: Path) -> list[tuple[str, str, str]]:
    path = run / "ingest" / "manifest.parquet"
    if not path.exists():
        return []
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=["clip_id", "status", "reason"]).to_pylist()
    except Exception:
        return []
    return [(r["clip_id"], r["status"], r["reason"]) for r in table]


def write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    from madbench_common.testing.faults import write_sources

    return write_sources(path, rows, ["clip_id", "path", "transcript", "speech_stem",
                                      "env_stem"])


def make_src(where: Path) -> Path:
    src = where / "src"
    src.mkdir(parents=True, exist_ok=True)
    shutil.copy(GOOD, src / "ok.mp4")
    return src


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()
            or p.is_symlink()}


def written_outside_run(where: Path, before: set[str], run_id: str = "a") -> list[str]:
    """Files that appeared under ``where`` but outside ``store/<run_id>``."""
    inside = f"store{os.sep}{run_id}{os.sep}"
    return sorted(p for p in files_under(where) - before if not p.startswith(inside))


def store_contains(where: Path, needle: bytes) -> bool:
    store = where / "store"
    return store.exists() and any(needle in p.read_bytes() for p in store.rglob("*")
                                  if p.is_file())


# ---------------------------------------------------------------- media made here


def make_av(path: Path, seconds: float, audio: bool = True, video: bool = True,
             extra: tuple[str, ...] = ()) -> Path:
    args = [_ffmpeg(), "-v", "error", "-y"]
    if video:
        args += ["-f", "lavfi", "-i", f"testsrc=size=64x48:rate=10:duration={seconds}"]
    if audio:
        args += ["-f", "lavfi", "-i",
                 f"sine=frequency=300:sample_rate=16000:duration={seconds}"]
    if video:
        args += ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "50"]
    if audio:
        args += ["-c:a", "aac" if path.suffix == ".mp4" else "flac"]
    subprocess.run([*args, *extra, str(path)], check=True)
    return path


def mp4_lying_duration(path: Path, claim: float) -> None:
    """Rewrite every duration an MP4 header states (mvhd, tkhd, mdhd) to ``claim`` s."""
    data = bytearray(path.read_bytes())
    movie_scale = [1]

    def walk(start: int, end: int) -> None:
        while start + 8 <= end:
            size = int.from_bytes(data[start:start + 4], "big")
            kind = bytes(data[start + 4:start + 8])
            if size < 8:
                return
            body = start + 8
            if kind in (b"moov", b"trak", b"mdia"):
                walk(body, start + size)
            elif kind in (b"mvhd", b"mdhd"):
                v1 = data[body] == 1
                ts_at = body + (20 if v1 else 12)
                scale = int.from_bytes(data[ts_at:ts_at + 4], "big")
                if kind == b"mvhd":
                    movie_scale[0] = scale
                width = 8 if v1 else 4
                data[ts_at + 4:ts_at + 4 + width] = int(claim * scale).to_bytes(width, "big")
            elif kind == b"tkhd":
                v1 = data[body] == 1
                at = body + (28 if v1 else 20)
                width = 8 if v1 else 4
                data[at:at + width] = int(claim * movie_scale[0]).to_bytes(width, "big")
            start += size

    walk(0, len(data))
    path.write_bytes(bytes(data))


def mkv_lying_duration(path: Path, claim_ms: float) -> None:
    data = bytearray(path.read_bytes())
    at = data.find(b"\x44\x89\x88")  # Segment Info / Duration, an 8-byte float (ms)
    assert at > 0, "no Duration element"
    data[at + 3:at + 11] = struct.pack(">d", claim_ms)
    path.write_bytes(bytes(data))


@contextlib.contextmanager
def http_server(ctx: Ctx) -> Iterator[None]:
    """A local HTTP server that records every request (a fetch is the attack's success)."""
    hits = ctx.http_hits

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "video/mp2t")
            self.end_headers()
            self.wfile.write(GOOD.read_bytes())

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx.http_port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
