"""``madbench rehearse run|dry-run`` (``make rehearsal``, ``make rehearsal-dry-run``).

The rehearsal is in the cluster layer, above this one: :func:`_cluster` finds its modules by
name, as :mod:`madbench_common.cli` finds its command modules, and never imports them
(``tests/test_layers.py``)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from madbench_common.core.errors import ConfigError

__all__ = ["add_commands"]


def _cluster(module: str) -> Any:
    """``madbench_common.cluster.<module>``, loaded by name."""
    return importlib.import_module(f"madbench_common.cluster.{module}")


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``rehearse run`` and ``rehearse dry-run``."""
    p = sub.add_parser("rehearse", help="execute rendered workflows locally (make rehearsal)")
    rsub = p.add_subparsers(dest="rehearse_command", required=True)
    run = rsub.add_parser("run", help="the rehearsal: full.yaml then deaf.yaml on tiny weights")
    run.add_argument("--work", default=".rehearsal", help="work folder (default .rehearsal)")
    run.add_argument("--workflows", default="full,deaf")
    run.add_argument("--keep-images", action="store_true",
                     default=os.environ.get("KEEP_IMAGES") == "1",
                     help="keep every image (default: remove each after its last pod)")
    run.add_argument("--image-tests", action="store_true",
                     default=os.environ.get("IMAGE_TESTS") == "1",
                     help="run each image's make image-test when it is ready, before its "
                          "pods, and record it in images/images.lock.yaml")
    run.add_argument("--workers", type=int, default=0, help="pods at a time (default: profile)")
    run.add_argument("--engine", default=os.environ.get("MADBENCH_RUN_ENGINE") or "buildah")
    run.add_argument("--fresh", action="store_true", help="forget the work folder first")
    run.add_argument("--records", default=str(_cluster("rehearsal.profile").RECORDS))
    run.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                     help="a workflow parameter over the profile's, as argo submit -p (e.g. "
                          "swap a broken stage to its CPU reference to rehearse past it; "
                          "the records then say the pass is not the profile's)")
    run.add_argument("--set", action="append", default=[], metavar="STAGE.KEY=VALUE",
                     help="merged into the workflow's stage_params")
    run.add_argument("--strict", action="store_true",
                     help="refuse to start when the dry run finds a problem in any pod")
    run.add_argument("--stop-on-failure", action="store_true",
                     help="Argo's failFast: no new task after a failure (default: run the "
                          "independent branches, to find every failure in one pass)")
    run.set_defaults(func=_cmd_run)
    dry = rsub.add_parser("dry-run", help="resolve every pod of a workflow (argv, env, mounts) "
                                          "and check it, without running anything")
    dry.add_argument("workflow", help="a rendered workflow, e.g. workflows/full.yaml")
    dry.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE")
    dry.add_argument("--json", action="store_true", help="one JSON object per pod")
    dry.set_defaults(func=_cmd_dry)


def _cmd_run(args: argparse.Namespace) -> int:
    opts = _cluster("rehearsal.profile").Options(work=Path(args.work), workflows=tuple(
        w.strip() for w in args.workflows.split(",") if w.strip()),
        keep_images=args.keep_images, image_tests=args.image_tests, workers=args.workers,
        engine=args.engine,
        fresh=args.fresh, records=Path(args.records), keep_going=not args.stop_on_failure,
        strict=args.strict, params=tuple(args.parameter), stage_sets=tuple(args.set))
    rehearsal = _cluster("rehearsal.run")
    try:
        return rehearsal.rehearse(opts)
    except KeyboardInterrupt as exc:
        rehearsal._say(f"interrupted ({exc or 'Ctrl-C'}): pods stopped, store and stub shut "
                       "down; run the same command again to resume")
        return 130


def _cmd_dry(args: argparse.Namespace) -> int:
    params = {}
    for item in args.parameter:
        name, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"-p {item!r}: expected NAME=VALUE")
        params[name] = value
    argo = _cluster("argo_local")
    pods = argo.Executor(argo.Workflow.load(args.workflow), params).dry_run()
    for pod in pods:
        print(json.dumps(pod.describe()) if args.json else
              f"{pod.node}  {pod.image}  {' '.join(pod.argv)}")
    problems: list[str] = _cluster("lint").check_pods(pods)
    stale = _cluster("rehearsal.preflight").stale_evidence()
    problems += [f"warning: stale: {line}" for line in stale]
    for line in problems:
        print(line, file=sys.stderr)
    errors = [p for p in problems if not p.startswith("warning:")]
    print(f"{len(pods)} pods, {len(errors)} problems", file=sys.stderr)
    return 1 if errors else 0
