"""Cluster commands: ``render`` (graph → Argo YAML), ``plan`` (cost estimate), ``exit-summary``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_commands"]

_LOCK = "images/images.lock.yaml"
_PROFILE = "k8s/overlays/gpu-nodepool/cluster-profile.yaml"


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``render``, ``plan`` and ``exit-summary``."""
    p = sub.add_parser("render", help="compile the pipeline graph to workflows/{full,smoke}.yaml, "
                                      "the weights workflow to workflows/weights.yaml and "
                                      "the DEAF graph to workflows/deaf.yaml")
    p.add_argument("--out", default="workflows", help="output folder (default: workflows)")
    p.add_argument("--lock", default=_LOCK, help=f"images lock file (default: {_LOCK})")
    p.add_argument("--profile", default=_PROFILE, help=f"cluster profile (default: {_PROFILE})")
    p.add_argument("--registry", default=None, metavar="HOST[:PORT][/NAMESPACE]",
                   help="render image references against this registry (where make push "
                        "REGISTRY=... put them; default: the lock's refs)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if a committed workflow is stale")
    p.set_defaults(func=_render)

    p = sub.add_parser("plan", help="task counts, GPU-hours and storage before submitting")
    p.add_argument("--clips", type=int, required=True, help="eligible source clips")
    p.add_argument("--samples", type=int, default=None,
                   help="benchmark samples (default: clips scaled by the paper's ratio)")
    p.add_argument("--throughput", default=None, help="throughput CSV (default: packaged)")
    p.add_argument("--profile", default="full", choices=("full", "embedded"),
                   help="graph profile to plan (default: full, the paper's models as "
                        "workflows/full.yaml runs them)")
    p.set_defaults(func=_plan)

    p = sub.add_parser("measure", help="throughput rows (for plan) measured from a finished run")
    p.add_argument("--store", required=True)
    p.add_argument("--run-id", required=True)
    p.add_argument("--where", default="", help="machine description for the source column")
    p.add_argument("--out", default="-", help="CSV path (default: stdout)")
    p.add_argument("--peaks-into", default=None, metavar="TABLE",
                   help="update only the peak_rss_mb column of this throughput table")
    p.set_defaults(func=_measure)

    p = sub.add_parser("exit-summary", help="write <store>/<run_id>/_RUN_SUMMARY.json (onExit)")
    for name in ("store", "run-id", "workflow", "status"):
        p.add_argument(f"--{name}", required=True)
    p.add_argument("--duration", default="")
    p.add_argument("--failures", default="")
    p.set_defaults(func=_exit_summary)


def _render(args: argparse.Namespace) -> int:
    from madbench_common.benchmarks.deaf.workflow import render_deaf_workflow
    from madbench_common.benchmarks.madbench.graph import build_graph
    from madbench_common.pipeline.argo import ClusterProfile, ImageLock, render_workflows
    from madbench_common.pipeline.argo_weights import render_weights_workflow

    lock, profile = ImageLock.load(args.lock), ClusterProfile.load(args.profile)
    lock = lock.with_registry(args.registry)
    changed = render_workflows(build_graph(), lock, profile, args.out, check=args.check)
    changed += render_weights_workflow(lock, profile, args.out, check=args.check)
    changed += render_deaf_workflow(lock, profile, args.out, check=args.check)
    verb = "stale" if args.check else "wrote"
    for path in changed:
        print(f"{verb}: {path}")
    if args.check and changed:
        print("run `madbench render` and commit the result", file=sys.stderr)
        return 1
    return 0


def _plan(args: argparse.Namespace) -> int:
    from madbench_common.benchmarks.madbench.graph import build_graph
    from madbench_common.pipeline.plan import (
        format_plan,
        image_pull_line,
        load_throughput,
        plan_run,
    )

    table = load_throughput(args.throughput)
    graph = build_graph().profiled(args.profile)
    print(format_plan(plan_run(graph, args.clips, args.samples, table)), end="")
    print("\n" + image_pull_line(graph), end="")
    return 0


def _exit_summary(args: argparse.Namespace) -> int:
    import json

    from madbench_common.benchmarks.madbench.graph import build_graph
    from madbench_common.pipeline.summary import write_exit_summary

    summary = write_exit_summary(build_graph(), args.store, args.run_id, args.workflow,
                                 args.status, args.duration, args.failures)
    print(json.dumps(summary, indent=1, sort_keys=True))
    return 0


def _measure(args: argparse.Namespace) -> int:
    from pathlib import Path

    from madbench_common.benchmarks.madbench.graph import build_graph
    from madbench_common.core.store import RunStore, open_store
    from madbench_common.pipeline.measure import measure_run, throughput_csv

    run = RunStore(open_store(args.store), args.run_id)
    rows = measure_run(run, build_graph(), args.where)
    if args.peaks_into:
        from madbench_common.pipeline.measure import update_peaks
        from madbench_common.pipeline.plan import load_throughput

        table = update_peaks(load_throughput(args.peaks_into), rows)
        Path(args.peaks_into).write_text(throughput_csv(table))
        print(f"peak RSS of {sum(r.peak_rss_mb > 0 for r in table)} stages -> "
              f"{args.peaks_into}")
        return 0
    text = throughput_csv(rows)
    if args.out == "-":
        print(text, end="")
    else:
        Path(args.out).write_text(text)
    return 0
