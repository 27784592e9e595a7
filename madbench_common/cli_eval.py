"""The ``madbench eval`` command: evaluate your own model's features or scores (no images)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from madbench_common.registry import GROUPS

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``eval``."""
    p = sub.add_parser("eval", help="evaluate a model from per-sample features or scores")
    p.add_argument("--samples", required=True, help="samples manifest (path, file:// or s3://)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--features", help="Parquet/CSV: sample_id[, mode, pairing], features")
    src.add_argument("--scores", help="Parquet/CSV: sample_id[, task, mode, pairing], score"
                     "[, probs, parsed, excluded]")
    p.add_argument("--out", help="report directory (default madbench-eval-<model>)")
    p.add_argument("--model", default="", help="model name in the report (or a registry slug)")
    p.add_argument("--group", default="", choices=("", *GROUPS),
                   help="the report's row group for this model (default: the registry's)")
    p.add_argument("--score-kind", choices=("auto", "prob", "llr", "raw"), default="auto",
                   help="how to read 'score': auto = prob if every score is in [0, 1], else raw")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (0 = none)")
    p.add_argument("--no-logo", action="store_true", help="skip leave-one-generator-out")
    p.add_argument("--drop-constant", action="store_true", help="drop constant feature columns")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_eval)


def _eval(args: argparse.Namespace) -> int:
    from madbench_common.eval.byom import run_byom
    from madbench_common.eval.report import main_table
    from madbench_common.eval.suite import EvalConfig

    config = EvalConfig(n_boot=args.n_boot, seed=args.seed, logo=not args.no_logo,
                        score_kind=args.score_kind)
    run = run_byom(args.samples, features=args.features, scores=args.scores, out=args.out,
                   model=args.model, group=args.group, config=config,
                   drop_constant=args.drop_constant)
    console = Console(width=max(Console().width, 200))
    console.print(main_table([run.result]), markup=False, soft_wrap=True)
    console.print(f"report: {run.out_dir.resolve() / 'report.html'}", markup=False)
    return 0
