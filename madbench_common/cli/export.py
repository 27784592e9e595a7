"""The ``madbench export`` command: a finished run as a dataset (Parquet, media, card)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``export``."""
    p = sub.add_parser("export", help="export a finished run as a dataset: Parquet tables per "
                       "protocol and split, the media beside them, a dataset card")
    p.add_argument("--store", required=True, help="the run's store (path, file:// or s3://)")
    p.add_argument("--run-id", required=True)
    p.add_argument("--to", required=True, help="destination folder or s3://bucket/prefix "
                   "(nothing is uploaded to any hub)")
    p.add_argument("--sources", help="the run's sources CSV: its license column gives each "
                   "source clip's licence on the card")
    p.add_argument("--no-robustness", action="store_true",
                   help="leave out the robustness conditions' test samples")
    p.add_argument("--weights", help="weights root whose locks/ give the resolved commits")
    p.add_argument("--set", action="append", default=[], metavar="STAGE.KEY=VALUE",
                   help="the run's parameter overrides (to verify the QC thresholds)")
    p.add_argument("--seed", type=int, default=0, help="the run's seed")
    p.set_defaults(func=_export)


def _export(args: argparse.Namespace) -> int:
    from madbench_common.benchmarks.madbench.release.export import export_run
    from madbench_common.cli.pipeline import parse_set

    result = export_run(args.store, args.run_id, args.to, sources=args.sources,
                        robustness=not args.no_robustness, weights=args.weights,
                        params=parse_set(args.set), seed=args.seed)
    for config, splits in result.configs.items():
        print(f"{config}: " + ", ".join(f"{s} {n}" for s, n in splits.items()))
    print(f"{result.files} files, {result.bytes / 1e6:.1f} MB → {result.to} (card: README.md)")
    return 0
