"""ingest → separate → source_qc → split on real demo clips, on the file store and on S3."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import SourceQCRow, SourceRow, SplitRow, StemRow
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.testing.faults import demo_sources

pytestmark = pytest.mark.slow

DEMO = Path(__file__).resolve().parents[4] / "data" / "demo"


def _rows(run: RunStore, stage: str, cls: type) -> list:
    return read_manifest_bytes(cls, run.get_bytes(f"{stage}/manifest.parquet"))


def _check_run(run: RunStore, n: int) -> None:
    sources = _rows(run, "ingest", SourceRow)
    assert len(sources) == n and all(r.ok for r in sources)
    stems = _rows(run, "separate", StemRow)
    gains = []
    for stem, src in zip(stems, sources, strict=True):
        assert run.get_bytes(run.key_of(src.audio_uri), src.audio_sha256)
        assert stem.mixture_error < 1e-6
        assert stem.si_sdr_speech is not None and stem.si_sdr_speech_input is not None
        gains.append(stem.si_sdr_speech - stem.si_sdr_speech_input)
        if stem.si_sdr_speech_input < 10.0:  # noisy clips must get cleaner
            assert gains[-1] > 3.0, stem.clip_id
    assert np.mean(gains) > 1.0, "separation must improve SI-SDR on average"
    qc = _rows(run, "source_qc", SourceQCRow)
    assert all(0.2 < r.speech_coverage <= 1.0 for r in qc)
    assert all(r.transcript_source == "given" for r in qc)
    splits = _rows(run, "split", SplitRow)
    assert {r.clip_id for r in splits} == {r.clip_id for r in qc if r.eligible}
    assert all(len(r.embedding) == 256 for r in splits)
    for r in splits:
        norm = float(np.linalg.norm(r.embedding))
        assert abs(norm - 1.0) < 1e-3


def _run(store: str, sources: Path) -> RunStore:
    opts = RunOptions(store=store, run_id="e2e", progress=False, until="split",
                      params={"ingest": {"sources": str(sources)}})
    LocalRunner(build_graph, opts).execute()
    return RunStore(open_store(store), "e2e")


@pytest.fixture(scope="module")
def file_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunStore]:
    """The file-store run, once for both tests (they only read it): its sources CSV (the
    first four demo clips) and the run."""
    if not (DEMO / "sources.csv").exists():
        pytest.skip("data/demo not built (scripts/build_demo_corpus.py)")
    tmp = tmp_path_factory.mktemp("foundation")
    sources = demo_sources(tmp / "demo-sources", 4)
    return sources, _run(str(tmp / "store"), sources)


def test_foundation_on_file_store(file_run: tuple[Path, RunStore]) -> None:
    _check_run(file_run[1], 4)


def _ids(run: RunStore) -> dict[str, list[tuple[str, ...]]]:
    return {"split": [(r.clip_id, r.split, r.speech_sha256 if hasattr(r, "speech_sha256")
                       else "") for r in _rows(run, "split", SplitRow)],
            "stems": [(r.clip_id, r.speech_sha256, r.env_sha256)
                      for r in _rows(run, "separate", StemRow)]}


@pytest.mark.s3
def test_foundation_on_s3_matches_file_store(file_run: tuple[Path, RunStore],
                                             s3_uri: str) -> None:
    sources, file = file_run
    s3 = _run(s3_uri, sources)
    _check_run(file, 4)
    _check_run(s3, 4)
    assert _ids(file)["split"] == _ids(s3)["split"]
    assert _ids(file)["stems"] == _ids(s3)["stems"]
