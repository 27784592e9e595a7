"""Weights commands: ``weights fetch`` (the only step that talks to the hub), ``weights check``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``weights fetch`` and ``weights check``."""
    weights = sub.add_parser("weights", help="fetch model weights once; check them offline")
    wsub = weights.add_subparsers(dest="weights_command", required=True)
    p = wsub.add_parser("fetch", help="download what images/<image>/weights.yaml lists")
    p.add_argument("--image", required=True, action="append",
                   help="image slug (repeat for several)")
    p.add_argument("--dest", required=True, help="weights root (the madbench-weights volume)")
    p.set_defaults(func=_fetch)
    p = wsub.add_parser("check", help="is everything weights.yaml lists under the root?")
    p.add_argument("--image", required=True, action="append")
    p.add_argument("--root", default=None, help="weights root (default: $MADBENCH_WEIGHTS "
                                               "or /weights)")
    p.set_defaults(func=_check)


def _fetch(args: argparse.Namespace) -> int:
    from madbench_common.weights import fetch_weights

    for image in args.image:
        print(f"{image}: wrote {fetch_weights(image, args.dest)}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from madbench_common.weights import check_weights, weights_root

    bad = 0
    for image in args.image:
        problems = check_weights(image, args.root)
        for msg in problems:
            print(f"{image}: {msg}", file=sys.stderr)
        if not problems:
            print(f"{image}: every weight is under {weights_root(args.root)}")
        bad += len(problems)
    return 1 if bad else 0
