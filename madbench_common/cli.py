"""The ``madbench`` command line: thin wrappers over the library, no logic of their own."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.logging import RichHandler
from rich.text import Text

from madbench_common.errors import EXIT_DETERMINISTIC, EXIT_TRANSIENT, MadbenchError

__all__ = ["EXIT_DETERMINISTIC", "EXIT_TRANSIENT", "main"]

_EXTENSIONS = (
    "madbench_common.cli_pipeline",
    "madbench_common.cli_cluster",
    "madbench_common.cli_eval",
    "madbench_common.cli_export",
    "madbench_common.cli_weights",
    "madbench_common.cli_taxonomy",
    "madbench_common.cli_omni",
    "madbench_common.deaf.cli",
    "madbench_common.cluster.rehearse",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="madbench", description="MADBench: component-aware audio deepfake benchmark"
    )
    parser.add_argument("-v", "--verbose", action="count", default=0)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in _EXTENSIONS:
        importlib.import_module(name).add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    level = logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(message)s", datefmt="[%X]",
                        handlers=[RichHandler(console=Console(stderr=True), show_path=False)])
    logging.getLogger("madbench").setLevel(min(level, logging.INFO))
    try:
        code: int = args.func(args)
    except MadbenchError as exc:
        print_error(exc)
        return exc.exit_code
    return code


def print_error(exc: BaseException) -> None:
    """``error: <message>`` on one line (a long path is never wrapped onto a line of its own)."""
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    console.print(Text.assemble(("error:", "red"), " ", str(exc)))


if __name__ == "__main__":
    status = main()
    if status:
        # A failed stage exits at once with its code: tearing the interpreter down after an
        # error can abort in a native library's thread destructor (SIGABRT, "terminate called
        # without an active exception"), which would replace exit 3 with -6 for the caller.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
