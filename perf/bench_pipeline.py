"""Pipeline throughput on the demo corpus: per stage, and S3 (SeaweedFS) vs the file store.

Throughput is source-audio seconds per wall second on this machine. Floors:
ingest + source_qc together ≥ 50× real time; S3/file wall-time ratio ≤ 1.3.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
import time
from pathlib import Path

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.media.audio import probe
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.testing import SeaweedS3
from perf.corpus import replicated_sources
from perf.results import save

REPO = Path(__file__).resolve().parents[1]

UNTIL = os.environ.get("MADBENCH_BENCH_UNTIL", "split")
COPIES = int(os.environ.get("MADBENCH_BENCH_COPIES", "4"))
WORKERS = int(os.environ.get("MADBENCH_BENCH_WORKERS", "2"))
FLOORS = {"ingest+source_qc": 50.0, "s3_over_file": 1.3}


def _source_seconds(sources: Path) -> float:
    """Seconds of audio the sources list; its paths are relative to the CSV's folder."""
    with open(sources, newline="") as fh:
        return sum(probe(sources.parent / r["path"]).duration for r in csv.DictReader(fh))


def _run(store: str, run_id: str, sources: Path) -> tuple[float, dict[str, float]]:
    opts = RunOptions(store=store, run_id=run_id, until=UNTIL, workers=WORKERS, progress=False,
                      params={"ingest": {"sources": str(sources)}})
    start = time.perf_counter()
    reports = LocalRunner(build_graph, opts).execute()
    return time.perf_counter() - start, {r.stage: r.seconds for r in reports}


def main() -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        sources = replicated_sources(Path(tmp), COPIES)
        audio_s = _source_seconds(sources)
        _run(str(Path(tmp) / "warm"), "warm", sources)  # load models, fill OS caches
        file_wall, stages = _run(str(Path(tmp) / "file"), "bench", sources)
        with SeaweedS3() as s3:
            s3.create_bucket("madbench")
            os.environ.update(s3.env())
            s3_wall, _ = _run("s3://madbench/bench", "bench", sources)
    per_stage = {name: audio_s / sec for name, sec in stages.items() if sec > 0}
    combined = audio_s / (stages["ingest"] + stages["source_qc"])
    result = {
        "source_audio_seconds": round(audio_s, 1),
        "corpus": f"data/demo x{COPIES}",
        "workers": WORKERS,
        "throughput_x_realtime": {k: round(v, 1) for k, v in per_stage.items()},
        "ingest+source_qc_x_realtime": round(combined, 1),
        "file_wall_s": round(file_wall, 2),
        "s3_wall_s": round(s3_wall, 2),
        "s3_over_file": round(s3_wall / file_wall, 3),
        "floors": FLOORS,
        "pass": {"ingest+source_qc": combined >= FLOORS["ingest+source_qc"],
                 "s3_over_file": s3_wall / file_wall <= FLOORS["s3_over_file"]},
    }
    return save("pipeline", result)


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
