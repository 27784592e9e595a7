"""A real OCI registry on loopback for tests: the CNCF distribution registry (Debian
``docker-registry``) on 127.0.0.1, a free port and a temporary storage folder; and a
private containers-storage (``CONTAINERS_STORAGE_CONF``) so builds, pulls and runs in
tests never touch the machine's shared image store.
"""

from __future__ import annotations

import secrets
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from madbench_common.core.environ import environ
from madbench_common.testing import free_port

__all__ = ["local_registry", "private_storage"]


def _up(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v2/", timeout=2) as resp:
            return int(resp.status) == 200
    except OSError:
        return False


@contextmanager
def local_registry(root: Path) -> Iterator[str]:
    """``127.0.0.1:<port>`` of a started registry storing under ``root``; stopped by PID."""
    for _attempt in range(5):
        port = free_port()
        config = root / "registry.yml"
        (root / "storage").mkdir(parents=True, exist_ok=True)
        config.write_text(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'storage'}\n"
            f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n"
            f"  secret: {secrets.token_hex(16)}\n")
        log = (root / "registry.log").open("wb")
        proc = subprocess.Popen(["docker-registry", "serve", str(config)], stdout=log,
                                stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline and not _up(url):
            time.sleep(0.1)
        if proc.poll() is None and _up(url):
            try:
                yield f"127.0.0.1:{port}"
            finally:
                proc.terminate()
                proc.wait(timeout=20)
                log.close()
            return
        proc.kill()
        proc.wait()
        log.close()
    raise RuntimeError(f"docker-registry did not start: {(root / 'registry.log').read_text()}")


@contextmanager
def private_storage(root: Path) -> Iterator[dict[str, str]]:
    """Environment that gives buildah/skopeo their own containers-storage under ``root``
    (vfs driver); applied to ``os.environ`` for the duration, and returned."""
    conf = root / "storage.conf"
    (root / "graph").mkdir(parents=True, exist_ok=True)
    (root / "run").mkdir(parents=True, exist_ok=True)
    conf.write_text(f'[storage]\ndriver = "vfs"\ngraphroot = "{root / "graph"}"\n'
                    f'runroot = "{root / "run"}"\n')
    env = {"CONTAINERS_STORAGE_CONF": str(conf)}
    with environ(env):
        yield env
