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

pytestmark = pytest.mark.slow


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


def test_foundation_on_file_store(demo_sources: Path, tmp_path: Path) -> None:
    opts = RunOptions(store=str(tmp_path / "store"), run_id="e2e", progress=False,
                      params={"ingest": {"sources": str(demo_sources)}}, until="split")
    LocalRunner(build_graph, opts).execute()
    _check_run(RunStore(open_store(opts.store), "e2e"), 4)


@pytest.mark.s3
def test_foundation_on_s3_matches_file_store(demo_sources: Path, tmp_path: Path,
                                             s3_uri: str) -> None:
    results = {}
    for name, store in (("file", str(tmp_path / "store")), ("s3", s3_uri)):
        opts = RunOptions(store=store, run_id="e2e", progress=False, until="split",
                          params={"ingest": {"sources": str(demo_sources)}})
        LocalRunner(build_graph, opts).execute()
        run = RunStore(open_store(store), "e2e")
        _check_run(run, 4)
        results[name] = [(r.clip_id, r.split, r.speech_sha256 if hasattr(r, "speech_sha256")
                          else "") for r in _rows(run, "split", SplitRow)]
        results[name + "_stems"] = [(r.clip_id, r.speech_sha256, r.env_sha256)
                                    for r in _rows(run, "separate", StemRow)]
    assert results["file"] == results["s3"]
    assert results["file_stems"] == results["s3_stems"]
