"""The ``madbench`` command line: thin wrappers over the library, no logic of their own."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from rich.console import Console
from rich.logging import RichHandler
from rich.text import Text

from madbench_common.core.errors import (
    EXIT_DETERMINISTIC,
    EXIT_TRANSIENT,
    ConfigError,
    MadbenchError,
)
from madbench_common.core.safetext import visible

__all__ = ["EXIT_DETERMINISTIC", "EXIT_TRANSIENT", "PIPELINE_COMMANDS", "leave", "main",
           "pipeline_argv", "run"]

_EXTENSIONS = (
    "madbench_common.cli.pipeline",
    "madbench_common.cli.cluster",
    "madbench_common.cli.eval",
    "madbench_common.cli.export",
    "madbench_common.cli.weights",
    "madbench_common.cli.data",
    "madbench_common.cli.taxonomy",
    "madbench_common.cli.omni",
    "madbench_common.cli.deaf",
    "madbench_common.cli.scaffold",
    "madbench_common.cli.catalog",
    "madbench_common.cli.gpubench",
    "madbench_common.cli.rehearse",
    "madbench_common.cluster.lint",
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


PIPELINE_COMMANDS = ("run", "status", "report", "stage")
"""The commands every pipeline has: ``madbench <command> --pipeline NAME`` runs NAME's."""


def pipeline_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--pipeline NAME`` (or ``--pipeline=NAME``) of a pipeline command
    resolved: MADBench's commands are the top-level ones (the option is dropped), another
    pipeline's are its own subcommands (``madbench status --pipeline deaf …`` is
    ``madbench deaf status …``). An unknown name is a :class:`ConfigError` naming the
    known ones (:data:`~madbench_common.cli.pipelines.PIPELINES`)."""
    from madbench_common.cli.pipelines import PIPELINES

    args = list(argv)
    flags = [i for i, a in enumerate(args) if a == "--pipeline" or a.startswith("--pipeline=")]
    if not args or args[0] not in PIPELINE_COMMANDS or not flags:
        return args
    i = flags[-1]
    if args[i] == "--pipeline":
        if i + 1 >= len(args):
            raise ConfigError(f"--pipeline needs a name: {', '.join(PIPELINES)}")
        name, rest = args[i + 1], args[:i] + args[i + 2:]
    else:
        name, rest = args[i].partition("=")[2], args[:i] + args[i + 1:]
    if name not in PIPELINES:
        raise ConfigError(f"unknown pipeline {name!r}; known: {', '.join(PIPELINES)}")
    return rest if name == "madbench" else [name, *rest]


def main(argv: Sequence[str] | None = None) -> int:
    try:
        resolved = pipeline_argv(sys.argv[1:] if argv is None else argv)
    except MadbenchError as exc:
        print_error(exc)
        return exc.exit_code
    args = build_parser().parse_args(resolved)
    level = logging.DEBUG if args.verbose > 1 else logging.INFO if args.verbose else logging.WARNING
    handler = RichHandler(console=Console(stderr=True), show_path=False)
    handler.addFilter(_visible_record)
    logging.basicConfig(level=level, format="%(message)s", datefmt="[%X]", handlers=[handler])
    logging.getLogger("madbench").setLevel(min(level, logging.INFO))
    if args.verbose:  # -v lists each rejected corpus row (else one line per reason)
        logging.getLogger("madbench.corpus").setLevel(logging.DEBUG)
    # one line per quarantined row only with -v; a summary line per reason otherwise
    logging.getLogger("madbench.rejected").setLevel(logging.INFO if args.verbose
                                                    else logging.WARNING)
    try:
        code: int = args.func(args)
    except MadbenchError as exc:
        print_error(exc)
        return exc.exit_code
    except Exception as exc:
        # a store fault that reached the command raw (a reset socket, an S3 reply no call
        # expected): one line and its exit code (75 transient, 3 a refusal), no traceback
        from madbench_common.core.s3client import store_failure

        failure = store_failure(exc)
        if failure is None:
            raise
        logging.getLogger("madbench").debug("store fault", exc_info=exc)
        print_error(failure)
        return failure.exit_code
    return code


def _visible_record(record: logging.LogRecord) -> bool:
    """Log messages quote input (paths, clip ids): their control characters and escape
    sequences are shown, never sent to the terminal (the handler renders no markup). The
    arguments, where input comes in, are escaped whole, line breaks included, so a file
    name cannot forge a log line; the message's own line breaks stay."""
    if isinstance(record.args, tuple):
        record.args = tuple(visible(a) if isinstance(a, (str, BaseException)) else a
                            for a in record.args)
    record.msg, record.args = visible(record.getMessage(), newlines=True), None
    return True


def print_error(exc: BaseException) -> None:
    """``error: <message>`` on one line (a long path is never wrapped onto a line of its own);
    control characters from input in the message are shown as escapes."""
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    console.print(Text.assemble(("error:", "red"), " ", visible(exc, newlines=True)))


def run() -> None:
    """The ``madbench`` console script and ``python -m madbench_common.cli``: :func:`main`,
    then :func:`leave` with its code."""
    leave(main())


def leave(code: int) -> NoReturn:
    """Exit with ``code`` without tearing the interpreter down.

    pyarrow's thread pool can abort in a ``std::thread`` destructor during interpreter
    finalisation (SIGABRT, "terminate called without an active exception"; apache/arrow#34314),
    which turned a finished ``madbench status`` into exit -6. Everything that finalisation would
    have done for us runs first: the ``atexit`` handlers (``logging.shutdown``, the media
    decoder server's stop) and a flush of both streams. Only the native teardown is skipped.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing more to say
            stream.flush()
    os._exit(code)

