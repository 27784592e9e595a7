"""Shared fixtures: a real SeaweedFS S3 server, test media, and demo-corpus subsets."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from madbench_common.testing import SeaweedS3

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"


@pytest.fixture(scope="session")
def s3_server() -> Iterator[SeaweedS3]:
    """One SeaweedFS server for the session; AWS_* variables point boto3 at it."""
    server = SeaweedS3().start()
    server.create_bucket("madbench")
    saved = {k: os.environ.get(k) for k in server.env()}
    os.environ.update(server.env())
    yield server
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop()


@pytest.fixture
def s3_uri(s3_server: SeaweedS3, request: pytest.FixtureRequest) -> str:
    """A fresh prefix in the session bucket."""
    return f"s3://madbench/{request.node.name.replace('[', '_').replace(']', '')}"


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
