"""``madbench catalog``: questions about the model catalog, answered from the cards.

``madbench catalog demo-set`` prints the ``--set`` options with which ``make demo`` runs its
list stages: each list without the cards marked ``demo: false``
(:func:`madbench_common.models.catalog.demo_params`), so the Makefile holds no model list.
"""

from __future__ import annotations

import argparse
import json
import shlex
from typing import Any

__all__ = ["add_commands", "demo_set"]


def demo_set() -> str:
    """``--set '<stage>.models=[...]'`` for each list stage the demo narrows, shell-quoted."""
    from madbench_common.models.catalog import demo_params

    options = []
    for stage, params in demo_params().items():
        for key, value in params.items():
            text = json.dumps(value, separators=(",", ":"))
            options.append(f"--set {shlex.quote(f'{stage}.{key}={text}')}")
    return " ".join(options)


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``catalog``."""
    catalog = sub.add_parser("catalog", help="what the model catalog's cards say")
    csub = catalog.add_subparsers(dest="catalog_command", required=True)
    p = csub.add_parser("demo-set", help="the --set options of make demo's model lists "
                                         "(cards with demo: false left out)")
    p.set_defaults(func=lambda _args: print(demo_set()) or 0)
