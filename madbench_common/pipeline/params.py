"""Which parameters a stage takes, and the check of user-given ones (``--set``, pods).

A stage's parameters are declared in one place each: its defaults in the graph
definition (:attr:`Stage.params`, the ``full`` profile's ``params``, its
:attr:`Stage.workflow_params`, and ``model`` where some profile runs one swappable
model), plus the keys its implementation reads with a default of its own
(:attr:`~madbench_common.pipeline.stage.StageImpl.optional_params`, e.g. ingest's
``sources``). Any other key is a typo: it would change the fingerprint and nothing
else, so it is refused (exit 3) with the valid keys and the closest match.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.graph import PROFILES, Graph, Stage

__all__ = ["check_params", "check_stage_params", "valid_keys"]


def valid_keys(stage: Stage) -> frozenset[str]:
    """Every parameter ``stage`` accepts, in any profile."""
    from madbench_common.pipeline.stage import load_impl

    keys = set(stage.workflow_params) | set(load_impl(stage.target).optional_params)
    for profile in PROFILES:
        variant = stage.in_profile(profile)
        keys |= set(variant.params)
        if variant.swappable:
            keys.add("model")
    return frozenset(keys)


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_stage_params(stage: Stage, params: Mapping[str, Any], flag: str) -> None:
    """Refuse keys ``stage`` does not take, naming the stage, the key and the valid keys."""
    valid = valid_keys(stage)
    unknown = sorted(set(params) - valid)
    if not unknown:
        return
    keys = sorted(valid)
    said = ", ".join(repr(k) for k in unknown)
    raise ConfigError(f"{flag}: stage {stage.name!r} has no parameter {said}"
                      f"{_suggest(unknown[0], keys)} (its parameters: "
                      f"{', '.join(keys) or 'none'})")


def check_params(graph: Graph, params: Mapping[str, Mapping[str, Any]],
                 flag: str = "--set") -> None:
    """Check ``{stage: {key: value}}`` against ``graph``: unknown stages and keys fail."""
    for name, values in params.items():
        if name not in graph.stages:
            names = list(graph.stages)
            raise ConfigError(f"{flag}: no stage {name!r} in this graph"
                              f"{_suggest(name, names)} (stages: {', '.join(graph.order)})")
        check_stage_params(graph.stages[name], values, flag)
