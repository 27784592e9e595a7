"""Per-stage CPU seconds of a pipeline run, optionally with a cProfile dump per stage.

Runs the graph in this process (one worker), one stage at a time, and records for
each stage the CPU time (user + system, this process and the tools it waits for, such
as flite and espeak-ng) and the wall time. CPU time is what a loaded, shared machine
cannot distort; on a quiet machine with ``--workers 2`` the wall time of a sharded
stage is about half of it. Usage::

    python -m perf.profile_stages --run-id prof [--profile DIR] [--set STAGE.KEY=V ...]

With ``--profile DIR`` each stage's profile is written to ``DIR/<stage>.prof`` and its
top functions by cumulative time are printed (cProfile adds some overhead to
Python-heavy stages; compare CPU seconds from a run without it).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import resource
import sys
import time
from pathlib import Path

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cli.pipeline import parse_set
from madbench_common.pipeline.local import LocalRunner, RunOptions

__all__ = ["main"]

DEMO_PLAN = ["plan_components.targets=1", "plan_components.mismatch_prompts=1"]


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _top(prof: cProfile.Profile, n: int) -> str:
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(n)
    return buf.getvalue()


def _run_stage(opts: RunOptions, stage: str, profile_dir: Path | None,
               top: int) -> tuple[float, float]:
    opts.until = stage
    runner = LocalRunner(build_graph, opts)
    prof = cProfile.Profile() if profile_dir else None
    cpu0, wall0 = _cpu(), time.perf_counter()
    if prof is not None:
        prof.enable()
    runner.execute()
    if prof is not None:
        prof.disable()
    cpu, wall = _cpu() - cpu0, time.perf_counter() - wall0
    if prof is not None and profile_dir is not None:
        prof.dump_stats(str(profile_dir / f"{stage}.prof"))
        if cpu > 2.0:
            print(_top(prof, top), flush=True)
    return cpu, wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", default="data/demo/sources.csv")
    ap.add_argument("--store", default="runs")
    ap.add_argument("--run-id", default="profile")
    ap.add_argument("--set", action="append", default=None, metavar="STAGE.KEY=VALUE",
                    help="parameter overrides (default: the demo plan)")
    ap.add_argument("--profile", type=Path, default=None, help="write <stage>.prof here")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", type=Path, default=None, help="JSON file for the figures")
    args = ap.parse_args(argv)
    params = parse_set(DEMO_PLAN if args.set is None else args.set)
    params.setdefault("ingest", {})["sources"] = args.sources
    opts = RunOptions(store=args.store, run_id=args.run_id, workers=1, params=params,
                      progress=False)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    figures: dict[str, dict[str, float]] = {}
    for stage in [s.name for s in build_graph().until(None)]:
        cpu, wall = _run_stage(opts, stage, args.profile, args.top)
        figures[stage] = {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}
        print(f"{stage:<24} cpu {cpu:8.1f} s   wall {wall:8.1f} s", flush=True)
    total = sum(f["cpu_s"] for f in figures.values())
    print(f"{'total':<24} cpu {total:8.1f} s", flush=True)
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
