"""Shared fixtures: a real SeaweedFS S3 server, test media, and demo-corpus subsets."""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.environ import environ
from madbench_common.core.store import RunStore, open_store
from madbench_common.models.catalog import demo_params
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.testing import SeaweedS3, faults

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[SeaweedS3]:
    """One SeaweedFS server for the session; AWS_* variables point boto3 at it."""
    server = SeaweedS3().start()
    server.create_bucket("madbench")
    with environ(server.env()):
        yield server
    server.stop()


@pytest.fixture
def s3_uri(s3_server: SeaweedS3, request: pytest.FixtureRequest) -> str:
    """A fresh prefix in the session bucket."""
    return f"s3://madbench/{request.node.name.replace('[', '_').replace(']', '')}"


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def http_folder(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A loopback HTTP server on a free port serving ``tmp_path/www``: its URL and the
    folder, which the test fills."""
    folder = tmp_path / "www"
    folder.mkdir(exist_ok=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 functools.partial(_QuietFiles, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", folder
    finally:
        server.shutdown()
        server.server_close()


def demo_subset(dest: Path, n: int) -> Path:
    """A sources CSV with the first ``n`` demo clips, copied beside it (sources are
    confined to the CSV's folder)."""
    from madbench_common.testing.faults import demo_sources

    return demo_sources(dest / "demo-sources", n)


@pytest.fixture
def demo_sources(tmp_path: Path) -> Path:
    if not (DEMO / "sources.csv").exists():
        pytest.skip("data/demo not built (scripts/build_demo_corpus.py)")
    return demo_subset(tmp_path, 4)


# The whole build graph on six demo clips, once per session (tests/pipeline/test_build_e2e.py,
# tests/benchmarks/madbench/release/test_export_demo.py).
CLIPS = ("demo_002", "demo_003", "demo_004", "demo_007", "demo_011", "demo_027")
DEMO_PARAMS = demo_params()
"""make demo's model lists (the cards: ref-dnsmos is too slow for it)."""


def shared_once(factory: pytest.TempPathFactory, name: str,
                make: Callable[[Path], object]) -> Path:
    """``make(folder)`` once per test session, even across pytest-xdist workers: the first
    worker builds ``folder`` under a lock in the temporary root the workers share, the others
    wait and reuse it (a build is marked done only once complete)."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # each worker's basetemp is a child of the session's
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".done").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            (folder / ".done").touch()
    return folder


@pytest.fixture(scope="session")
def demo_sources_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sources CSV (the demo's licence columns) with six demo clips."""
    if not (DEMO / "sources.csv").exists():
        pytest.skip("data/demo not built")
    # the clips and stems copied beside the CSV: sources are confined to its folder
    folder = shared_once(tmp_path_factory, "demo-sources",
                         lambda f: faults.demo_sources(f / "sources", CLIPS))
    return folder / "sources" / "sources.csv"


@pytest.fixture(scope="session")
def demo_build(demo_sources_csv: Path, tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    """The demo's plan (make demo) on six clips, every stage of the graph (built once per
    session: tests/pipeline/test_build_e2e.py and release/test_export_demo.py read it)."""
    def build(folder: Path) -> None:
        opts = RunOptions(store=str(folder / "store"), run_id="b", workers=2, progress=False,
                          params={"ingest": {"sources": str(demo_sources_csv)},
                                  # the demo's plan (make demo): 6 speech + 8 env per clip
                                  "plan_components": {"targets": 1, "mismatch_prompts": 1},
                                  # and its models (make demo's: the cards' demo lists)
                                  **DEMO_PARAMS,
                                  # one robustness condition of 14 (the tests here check the
                                  # build; tests/benchmarks/madbench/stages/
                                  # test_perturb_stage.py checks all 14)
                                  "perturb": {"conditions": faults.ONE_CONDITION}})
        LocalRunner(build_graph, opts).execute()

    folder = shared_once(tmp_path_factory, "demo-build", build)
    return RunStore(open_store(str(folder / "store")), "b")


# ---------------------------------------------------------------- external programs
# A test that runs an external program says so with ``@pytest.mark.needs_tools(*programs,
# root=...)``: where one is missing it is skipped with a reason naming it and its Debian
# package, of the same name (``make test`` installs them as root, as ``make sysdeps`` does
# espeak-ng), never failed with FileNotFoundError.


def tools_missing(*tools: str, root: bool = False) -> str | None:
    """Why a test that runs ``tools`` (as root when ``root``) cannot run here, else None."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        return (f"needs {', '.join(missing)}: not on PATH (make test installs them as root; "
                f"or: apt-get install {' '.join(missing)})")
    if root and os.geteuid() != 0:
        return f"needs root to run {', '.join(tools)} (buildah's chroot isolation)"
    if "buildah" in tools:
        return _buildah_problem()
    if "unshare" in tools:
        return _unshare_problem()
    return None


@functools.cache
def _unshare_problem() -> str | None:
    """Why ``unshare`` cannot make private network and mount namespaces here, else None:
    inside a container (make fresh-check) it is refused ("Operation not permitted")."""
    out = subprocess.run(["unshare", "--net", "--mount", "--", "true"], capture_output=True,
                         text=True, timeout=60)
    lines = out.stderr.strip().splitlines()
    return None if out.returncode == 0 else (
        f"unshare cannot make namespaces here (inside a container?): "
        f"{lines[0] if lines else f'exit {out.returncode}'}")


@functools.cache
def _buildah_problem() -> str | None:
    """Why buildah, on PATH, cannot make containers here, else None: nested in another
    container (make fresh-check) it cannot open its storage or make one. Probed once, with
    the machine's storage (read only) and a private one (a container FROM scratch)."""
    def fails(cmd: list[str]) -> str | None:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        # the first line says why ("Error during unshare(CLONE_NEWUSER): Operation not
        # permitted"); the log lines after it do not
        lines = (out.stderr or out.stdout).strip().splitlines()
        return None if out.returncode == 0 else (lines[0] if lines else f"exit {out.returncode}")

    with tempfile.TemporaryDirectory(prefix="madbench-buildah-probe-") as tmp:
        private = ["buildah", "--root", f"{tmp}/graph", "--runroot", f"{tmp}/run",
                   "--storage-driver", "vfs"]
        error = fails(["buildah", "containers", "--quiet"]) or fails(
            [*private, "from", "--name", "probe", "scratch"]) or fails([*private, "rm", "probe"])
    return f"buildah cannot make containers here (inside a container?): {error}" if error \
        else None


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs_tools"):
        if reason := tools_missing(*mark.args, root=bool(mark.kwargs.get("root"))):
            pytest.skip(reason)
