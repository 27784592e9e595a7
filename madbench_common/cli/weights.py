"""Weights commands: ``weights pin`` and ``fetch`` (the only steps that talk to the hub),
``weights status`` (what is unpinned) and ``weights check`` (offline)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["add_commands", "allow_unpinned_arg", "allowed_unpinned", "fetch_each"]


def allow_unpinned_arg(p: argparse.ArgumentParser, what: str) -> None:
    """``--allow-unpinned`` (alone: true) or ``--allow-unpinned=true|false`` (workflows)."""
    p.add_argument("--allow-unpinned", nargs="?", const="true", default=None,
                   choices=("true", "false"), metavar="true|false",
                   help=f"{what} (recorded in provenance)")


def allowed_unpinned(args: argparse.Namespace) -> bool | None:
    """``--allow-unpinned`` as a bool; ``None`` when not given (no pins check)."""
    value = getattr(args, "allow_unpinned", None)
    return None if value is None else value == "true"


def fetch_each(names: list[str], fetch: Callable[..., Path], args: argparse.Namespace) -> int:
    """``weights fetch`` and ``data fetch``: ``fetch(name, --dest, allow_unpinned=…)`` for
    each name in turn, printing the lock it wrote."""
    allow = args.allow_unpinned == "true"
    for name in names:
        print(f"{name}: wrote {fetch(name, args.dest, allow_unpinned=allow)}")
    return 0


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``weights pin``, ``status``, ``fetch`` and ``check``."""
    weights = sub.add_parser("weights", help="pin model weights, fetch them once, check them")
    wsub = weights.add_subparsers(dest="weights_command", required=True)
    p = wsub.add_parser("pin", help="resolve weights.yaml entries (hub commit, file sha256s) "
                                    "and write the pins into images/<image>/weights.yaml")
    p.add_argument("--image", action="append", default=None,
                   help="image slug (repeat for several; default: every image)")
    p.add_argument("--update", action="store_true",
                   help="re-resolve pinned entries too (the revision's commit now)")
    p.set_defaults(func=_pin)
    p = wsub.add_parser("status", help="list every unpinned weights.yaml entry")
    p.add_argument("--image", action="append", default=None)
    p.add_argument("--strict", action="store_true", help="exit 1 if any entry is unpinned")
    p.set_defaults(func=_status)
    p = wsub.add_parser("fetch", help="download what images/<image>/weights.yaml pins")
    p.add_argument("--image", required=True, action="append",
                   help="image slug (repeat for several)")
    p.add_argument("--dest", required=True, help="weights root (the madbench-weights volume)")
    allow_unpinned_arg(p, "fetch unpinned entries at their revision's current commit")
    p.set_defaults(func=_fetch)
    p = wsub.add_parser("check", help="is everything weights.yaml lists under the root?")
    p.add_argument("--image", required=True, action="append")
    p.add_argument("--root", default=None, help="weights root (default: $MADBENCH_WEIGHTS "
                                               "or /weights)")
    p.set_defaults(func=_check)


def _images(chosen: list[str] | None) -> list[str]:
    from madbench_common.models.weights import weights_images

    return chosen or weights_images()


def _pin(args: argparse.Namespace) -> int:
    from madbench_common.models.weights_pin import pin_weights

    failed = 0
    for image in _images(args.image):
        result = pin_weights(image, update=args.update)
        for entry in result.pinned:
            print(f"{image}: pinned {entry}")
        for entry, why in result.failed:
            print(f"{image}: NOT pinned {entry}: {why}", file=sys.stderr)
        failed += len(result.failed)
    if failed:
        print(f"{failed} entries left unpinned (nothing was written for them)", file=sys.stderr)
    return 1 if failed else 0


def _status(args: argparse.Namespace) -> int:
    from madbench_common.models.weights_pin import pin_conflicts, weights_status

    images = _images(args.image)
    loose = weights_status(images)
    for u in loose:
        print(f"{u.image}\t{u.kind}\t{u.entry}\t{u.reason}")
    for line in pin_conflicts(images):
        print(f"conflict: {line}", file=sys.stderr)
    print(f"{len(loose)} unpinned entries in {len({u.image for u in loose})} of {len(images)} "
          "images (pin them with: madbench weights pin, where the hub is reachable)")
    return 1 if args.strict and loose else 0


def _fetch(args: argparse.Namespace) -> int:
    from madbench_common.models.weights import fetch_weights

    return fetch_each(args.image, fetch_weights, args)


def _check(args: argparse.Namespace) -> int:
    from madbench_common.models.weights import check_weights, weights_root

    bad = 0
    for image in args.image:
        problems = check_weights(image, args.root)
        for msg in problems:
            print(f"{image}: {msg}", file=sys.stderr)
        if not problems:
            print(f"{image}: every weight is under {weights_root(args.root)}")
        bad += len(problems)
    return 1 if bad else 0
