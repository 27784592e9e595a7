"""Fault sweep: SIGKILL the whole demo graph at seeded random points.

For each seed and each store (the file store and a local SeaweedFS), ``madbench run``
on three demo clips is killed (its whole process group) at a point drawn uniformly
over the clean run's progress (after 1 … N−1 of its N ``_SUCCESS`` markers, plus
0–1 s), then rerun (odd seeds with one worker). Every rerun must give manifests
byte-identical to the clean run's and compute no shard that had finished before the
kill. Also: the S3 server killed and restarted mid-run, and S3 throttling/5xx through
a fault proxy (retries counted by ``madbench status``).

``MADBENCH_FAULT_SEEDS`` (default 10) seeds per store; ``MADBENCH_FAULT_STORES`` (default
``file,s3``) which stores (``file``: the seeds on the file store; ``s3``: the seeds, the
throttling and the outage on SeaweedFS). Results: ``.bench/faults.json``; exit 1 if any
seed shows a problem.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.status import collect_retries
from madbench_common.testing import S3FaultProxy, SeaweedS3
from madbench_common.testing.faults import (
    KillRecord,
    count_markers,
    demo_sources,
    manifests,
    run_cli,
    sweep_seed,
)
from perf.results import save

REPO = Path(__file__).resolve().parents[1]

SEEDS = int(os.environ.get("MADBENCH_FAULT_SEEDS", "10"))
WORKERS = int(os.environ.get("MADBENCH_FAULT_WORKERS", "2"))
STORES = {s.strip() for s in os.environ.get("MADBENCH_FAULT_STORES", "file,s3").split(",")}


def _summary(records: list[KillRecord]) -> dict[str, object]:
    if not records:
        return {"seeds": 0}
    return {
        "seeds": len(records),
        "killed_mid_run": sum(r.killed for r in records),
        "survived": sum(r.killed and not r.problems for r in records),
        "stages_done_at_kill": sorted(r.stages_done for r in records),
        "finished_shards_at_kill_total": sum(r.shards_done for r in records),
        "finished_shards_redone_total": sum(r.shards_redone for r in records),
        "rerun_seconds_median": round(statistics.median(r.rerun_seconds for r in records), 1),
    }


def _outage(s3: SeaweedS3, sources: Path, clean: dict[str, bytes]) -> dict[str, object]:
    """Kill the server once the runner holds the run, restart it 5 s later."""
    import subprocess

    env = {**os.environ, **s3.env(), "MADBENCH_S3_OUTAGE_SECONDS": "600"}
    os.environ.update(s3.env())
    store = "s3://madbench/outage"
    run = RunStore(open_store(store), "r")
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "madbench_common.cli", "run", "--sources",
                             str(sources), "--store", store, "--run-id", "r", "--until",
                             "split", "--no-progress"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while not run.exists("separate/_SUCCESS") and proc.poll() is None:
        time.sleep(0.2)
    s3.kill()
    time.sleep(5)
    s3.start()
    _, err = proc.communicate(timeout=1800)
    got = manifests(run, build_graph())
    return {"exit_code": proc.returncode, "seconds": round(time.monotonic() - start, 1),
            "identical": all(got[s] == clean[s] for s in got) and len(got) == 4,
            "retries": collect_retries(run), "stderr_tail": err[-300:]}


def _throttled(s3: SeaweedS3, sources: Path, clean: dict[str, bytes]) -> dict[str, object]:
    store = "s3://madbench/throttled"
    with S3FaultProxy(s3.endpoint, every=5, faults=("SlowDown", "InternalError",
                                                    "ServiceUnavailable")) as proxy:
        env = s3.env() | {"AWS_ENDPOINT_URL": proxy.endpoint}
        start = time.monotonic()
        done = run_cli(store, "r", sources, env, WORKERS, ["--until", "split"])
        seconds = time.monotonic() - start
        counted_by_log = proxy.faults_before("PUT", "/r/_logs/run-")
    os.environ.update(s3.env())
    run = RunStore(open_store(store), "r")
    got = manifests(run, build_graph())
    return {"exit_code": done.returncode, "seconds": round(seconds, 1),
            "injected": dict(proxy.injected), "requests": proxy.requests,
            "injected_before_run_log": counted_by_log, "status_retries": collect_retries(run),
            "identical": all(got[s] == clean[s] for s in got) and len(got) == 4}


def _seed(seed: int, store: str, sources: Path, clean: dict[str, bytes], total: int,
          env: dict[str, str]) -> KillRecord:
    # odd seeds rerun with another worker count: results must not depend on it
    rerun = 1 if seed % 2 and WORKERS > 1 else WORKERS
    record = sweep_seed(seed, store, sources, build_graph(), clean, total, env, WORKERS,
                        rerun_workers=rerun)
    print(f"{store.split(':')[0] if ':' in store else 'file'} seed {seed}: killed after "
          f"{record.markers}/{total} markers + {record.jitter}s ({record.stages_done} stages "
          f"done, {record.shards_done} shards), rerun {record.rerun_seconds}s, problems "
          f"{record.problems}", flush=True)
    return record


def main() -> int:
    if not STORES or not {"file", "s3"} >= STORES:
        print(f"MADBENCH_FAULT_STORES={','.join(sorted(STORES))}: expected file, s3 or both")
        return 2
    graph = build_graph()
    with tempfile.TemporaryDirectory(prefix="mb-faults-") as tmp:
        sources = demo_sources(Path(tmp) / "sources")
        start = time.monotonic()
        done = run_cli(str(Path(tmp) / "clean"), "clean", sources, workers=WORKERS)
        clean_s = time.monotonic() - start
        if done.returncode != 0:
            print(done.stderr[-3000:])
            return 1
        clean_run = RunStore(open_store(str(Path(tmp) / "clean")), "clean")
        clean, total = manifests(clean_run, graph), count_markers(clean_run)
        files = [_seed(seed, str(Path(tmp) / f"file-{seed}"), sources, clean, total, {})
                 for seed in range(SEEDS)] if "file" in STORES else []
        s3_runs: list[KillRecord] = []
        throttled: dict[str, object] = {"skipped": True, "exit_code": 0, "identical": True}
        outage: dict[str, object] = dict(throttled)
        if "s3" in STORES:
            with SeaweedS3() as s3:
                s3.create_bucket("madbench")
                s3_runs = [_seed(seed, f"s3://madbench/kill-{seed}", sources, clean, total,
                                 s3.env()) for seed in range(SEEDS)]
                throttled = _throttled(s3, sources, clean)
                outage = _outage(s3, sources, clean)
    result = {"clips": 3, "workers": WORKERS, "stores": sorted(STORES),
              "clean_run_seconds": round(clean_s, 1),
              "clean_run_markers": total,
              "file": _summary(files), "s3": _summary(s3_runs), "s3_outage": outage,
              "s3_throttled": throttled,
              "records": [asdict(r) for r in files + s3_runs]}
    save("faults", result)
    print(json.dumps({k: v for k, v in result.items() if k != "records"}, indent=1))
    ok = all(not r.problems for r in files + s3_runs) and outage["exit_code"] == 0 \
        and outage["identical"] and throttled["exit_code"] == 0 and throttled["identical"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
