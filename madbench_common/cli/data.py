"""Data-set commands: ``data pin`` and ``data fetch`` (the only steps that download the
paper's data sets, DEMAND and EMIS), ``data status`` (what is unpinned, and why)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from madbench_common.cli.weights import allow_unpinned_arg, fetch_each

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``data pin``, ``status`` and ``fetch``."""
    data = sub.add_parser("data", help="the paper's data sets (DEMAND, EMIS): pin, fetch once")
    dsub = data.add_subparsers(dest="data_command", required=True)
    p = dsub.add_parser("pin", help="download unpinned files of madbench_common/data/"
                                    "paper_data.yaml and write their sha256 in place")
    p.add_argument("--dataset", action="append", default=None,
                   help="data set (repeat for several; default: all)")
    p.add_argument("--update", action="store_true", help="hash pinned files again too")
    p.set_defaults(func=_pin)
    p = dsub.add_parser("status", help="list what is unpinned (files, licences) and why")
    p.add_argument("--strict", action="store_true", help="exit 1 if anything is unpinned")
    p.set_defaults(func=_status)
    p = dsub.add_parser("fetch", help="download, check and unpack a data set under --dest")
    p.add_argument("--dataset", required=True, action="append",
                   help="data set (repeat for several)")
    p.add_argument("--dest", required=True, help="data root (the madbench-data volume: /data)")
    allow_unpinned_arg(p, "fetch unpinned files / an unverified licence, recording the digests")
    p.set_defaults(func=_fetch)


def _pin(args: argparse.Namespace) -> int:
    from madbench_common.pipeline.paper_data import pin_data

    pinned, failed = pin_data(args.dataset, update=args.update)
    for name in pinned:
        print(f"pinned {name}")
    for name, why in failed:
        print(f"NOT pinned {name}: {why}", file=sys.stderr)
    return 1 if failed else 0


def _status(args: argparse.Namespace) -> int:
    from madbench_common.pipeline.paper_data import data_status

    loose = data_status()
    for name, why in loose:
        print(f"{name}\t{why}")
    print(f"{len(loose)} unpinned entries (pin files with: madbench data pin, where the hosts "
          "are reachable; a licence is read and recorded by hand)")
    return 1 if args.strict and loose else 0


def _fetch(args: argparse.Namespace) -> int:
    from madbench_common.pipeline.paper_data import fetch_dataset

    return fetch_each(args.dataset, fetch_dataset, args)
