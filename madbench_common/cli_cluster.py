"""Placeholder command group; filled in by its own issue."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_commands"]


def add_commands(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register this module's subcommands."""
