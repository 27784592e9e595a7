"""A private network namespace with only loopback, and the services a rehearsal needs in it.

The cluster's NetworkPolicy (``k8s/base/networkpolicy.yaml``) lets stage pods reach the
object store and nothing else (API pods: HTTPS too). On one machine the same holds by
construction: :class:`Namespace` has only loopback; SeaweedFS (:class:`NamespacedS3`) and
the local API stub (:func:`start_stub`) listen inside it on fixed ports, every pod joins it
(:mod:`madbench_common.cluster.podexec`), and the host reaches the store only through
threads that entered it (:meth:`Namespace.call`), as a user's client would.
"""

from __future__ import annotations

import ctypes
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from madbench_common.cluster.podexec import enter_netns
from madbench_common.core.errors import ConfigError
from madbench_common.testing import SeaweedS3

__all__ = ["S3_PORT", "STUB_PORT", "Namespace", "NamespacedS3", "pdeathsig", "start_stub"]

T = TypeVar("T")
S3_PORT = 8333
"""SeaweedFS's S3 port inside the namespace (fixed: the namespace is private)."""
STUB_PORT = 18080
"""The API stub's port inside the namespace; fixed, so ``base_url`` parameters (and with
them the answer stages' fingerprints) are the same in every rehearsal."""
_PR_SET_PDEATHSIG = 1
_LO_UP = """
import fcntl, signal, socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
flags = struct.unpack('16sh22x', fcntl.ioctl(s, 0x8913, struct.pack('16sh22x', b'lo', 0)))[1]
fcntl.ioctl(s, 0x8914, struct.pack('16sh22x', b'lo', flags | 1))
print('ready', flush=True)
signal.pause()
"""


def pdeathsig(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A preexec_fn: ``sig`` to the child when the thread that started it dies."""
    def arm() -> None:
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, sig)

    return arm


class Namespace:
    """A network namespace with only ``lo`` (up), held by a sleeping child process.

    Needs root (``unshare --net``, ``setns``). The holder and the servers get SIGTERM when
    the process that started them dies (``PR_SET_PDEATHSIG``), so a killed rehearsal
    leaves nothing listening."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.path = ""
        self._thread: ThreadPoolExecutor | None = None

    def start(self) -> Namespace:
        if os.geteuid() != 0 or not shutil.which("unshare"):
            raise ConfigError("a private network namespace needs root and util-linux's "
                              "unshare (the rehearsal's pods and object store run in one)")
        self.proc = subprocess.Popen(["unshare", "--net", "--", sys.executable, "-c", _LO_UP],
                                     stdout=subprocess.PIPE, text=True,
                                     preexec_fn=pdeathsig())
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            self.stop()
            raise ConfigError("could not make a private network namespace (unshare --net)")
        self.path = f"/proc/{self.proc.pid}/ns/net"
        self._thread = self.pool(1, "netns")
        return self

    def pool(self, workers: int, prefix: str) -> ThreadPoolExecutor:
        """Threads that run inside the namespace (and so do their sockets and children)."""
        return ThreadPoolExecutor(workers, thread_name_prefix=prefix, initializer=enter_netns,
                                  initargs=(self.path,))

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on a thread inside the namespace; return its result."""
        assert self._thread is not None, "namespace not started"
        return self._thread.submit(fn, *args, **kwargs).result()

    def popen(self, argv: list[str], kill_signal: int = signal.SIGTERM, **kwargs: Any
              ) -> subprocess.Popen[bytes]:
        """Start a long-running process inside the namespace (``nsenter --net``); it gets
        ``kill_signal`` when this process dies."""
        return subprocess.Popen(["nsenter", f"--net={self.path}", "--", *argv],
                                preexec_fn=pdeathsig(kill_signal), **kwargs)

    def check_isolated(self) -> dict[str, Any]:
        """Interfaces seen inside, and that an outside address is unreachable from there."""
        def probe() -> dict[str, Any]:
            names = [n for _, n in socket.if_nameindex()]
            try:
                socket.create_connection(("192.0.2.1", 80), timeout=2).close()
                outside = "reachable"
            except OSError as exc:
                outside = errno.errorcode.get(exc.errno or 0, str(exc))
            return {"interfaces": names, "outside": outside}

        found = self.call(probe)
        if found["interfaces"] != ["lo"] or found["outside"] == "reachable":
            raise ConfigError(f"the rehearsal namespace is not isolated: {found}")
        return found

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=False)
            self._thread = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None


class NamespacedS3(SeaweedS3):
    """SeaweedFS inside a :class:`Namespace`, on fixed ports, its data kept in ``workdir``
    (a resumed rehearsal finds its run there). Credentials are new at every start."""

    def __init__(self, workdir: str | Path, ns: Namespace) -> None:
        super().__init__(workdir)
        self.ns = ns
        self.port = S3_PORT
        self.ports = {"master": 9333, "volume": 8080, "filer": 8888}
        self.grpc = {"master": 19333, "volume": 18081, "filer": 18888, "s3": 18333}

    def start(self, timeout: float = 90.0) -> NamespacedS3:
        log = open(self.dir / "weed.log", "ab")  # noqa: SIM115 - lives as long as the server
        command = self._command()
        (self.dir / "s3.json").chmod(0o600)  # the server's own copy of its credentials
        # SeaweedFS takes its time over SIGTERM; if the rehearsal dies, it is killed at
        # once (its data survives that, as the restart tests of SeaweedS3 show)
        self.proc = self.ns.popen(command, signal.SIGKILL, stdout=log,
                                  stderr=subprocess.STDOUT, cwd=self.dir)
        proc = self.proc
        try:
            self.ns.call(self._wait, timeout)
        except BaseException:  # not up, or Ctrl-C while waiting: no server is left behind
            # (_wait's own stop() on a timeout has already cleared self.proc)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            raise
        return self

    def _command(self) -> list[str]:
        """``weed server`` in a mount namespace of its own with a private ``/tmp``.

        SeaweedFS also listens on Unix sockets named after its ports
        (``/tmp/seaweedfs-<role>-grpc-<port>.sock``, a fixed path in its source), and its
        components dial a local peer through them. The network namespace keeps the fixed
        TCP ports apart, but not the file system: a second rehearsal (or the opt-in smoke
        rehearsal test) replaced the first one's sockets, its master talked to the other's
        filer, and its probes used up the first store's volumes. A tmpfs on ``/tmp`` in a
        private mount namespace gives each server its own sockets. The server starts in
        its work folder and names it ``/proc/self/cwd``, which still resolves when that
        folder lies under ``/tmp`` (as a test's does) and the tmpfs hides its path.
        """
        weed = super()._command()
        for here in {str(self.dir), str(self.dir.resolve())}:
            weed = [a.replace(f"={here}/", "=/proc/self/cwd/") for a in weed]
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                # the binary is opened before the tmpfs hides it (a venv under /tmp)
                'exec 3<"$1" && shift && '
                'mount -t tmpfs -o size=16m,mode=1777 madbench-weed-tmp /tmp && '
                'exec /proc/self/fd/3 "$@"',
                "weed-private-tmp", *weed]


def start_stub(ns: Namespace, workdir: Path, timeout: float = 30.0) -> subprocess.Popen[bytes]:
    """The local API stub inside ``ns`` on :data:`STUB_PORT`."""
    port_file = workdir / "stub.port"
    port_file.unlink(missing_ok=True)
    proc = ns.popen([sys.executable, "-m", "madbench_common.models.api_stub", "--port-file",
                     str(port_file), "--port", str(STUB_PORT)])
    deadline = time.monotonic() + timeout
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise ConfigError("the API stub did not start in the rehearsal namespace")
        time.sleep(0.1)
    return proc
