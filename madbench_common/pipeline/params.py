"""Which parameters a stage takes, and the check of user-given ones (``--set``, pods).

A stage's parameters are the fields of its implementation's ``Params``
(:mod:`~madbench_common.pipeline.paramspec`): any other key is a typo and is refused
(:func:`check_stage_params`), and a value must have its field's type
(:func:`check_stage_values`); ``--param KEY=VALUE`` text is decoded first
(:func:`decode_text_params`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.graph import PROFILES, Graph, Stage
from madbench_common.pipeline.paramspec import (
    StageParams,
    check_value,
    declared_defaults,
    param_types,
    suggest,
    takes_text,
)

__all__ = ["check_params", "check_stage_params", "check_stage_values", "decode_text_params",
           "params_class", "valid_keys"]


def params_class(stage: Stage) -> type[StageParams]:
    """The ``Params`` of ``stage``'s implementation (imported)."""
    from madbench_common.pipeline.stage import load_impl

    return load_impl(stage.target).Params


def valid_keys(stage: Stage) -> frozenset[str]:
    """Every parameter ``stage`` accepts, in any profile: its implementation's fields,
    less ``model`` where no profile runs one swappable model (a compound QC stage names
    its models in fields of its own) and the implementation declares none."""
    cls = params_class(stage)
    keys = set(param_types(cls))
    if "model" not in declared_defaults(cls) and not any(
            stage.in_profile(p).swappable for p in PROFILES):
        keys.discard("model")
    return frozenset(keys)


def check_stage_values(stage: Stage, params: Mapping[str, Any], flag: str) -> None:
    """Refuse a value that has not its field's type (an integer passes for a number), so
    ``--set source_qc.min_speech_coverage=0,3`` fails before any work instead of deep in a
    shard, naming the stage, the key, the type, the default and the value. Unknown keys
    are :func:`check_stage_params`'s."""
    cls = params_class(stage)
    fields = param_types(cls)
    for key, value in params.items():
        if key in fields:
            check_value(cls, key, value, stage.name, flag)


def decode_text_params(stage: Stage, pairs: Mapping[str, str]) -> dict[str, Any]:
    """``--param KEY=VALUE`` pod arguments, typed: a field that takes a string keeps the
    text as given (the workflows' own parameters: a path, a slug, JSON a stage parses
    itself); any other field's text is read as JSON (``n_boot=200`` → 200), text that is no
    JSON staying text for :func:`check_stage_values` to refuse."""
    cls = params_class(stage)
    fields = param_types(cls)
    out: dict[str, Any] = {}
    for key, text in pairs.items():
        if key not in fields or takes_text(cls, key):
            out[key] = text
            continue
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
    return out


def check_stage_params(stage: Stage, params: Mapping[str, Any], flag: str) -> None:
    """Refuse keys ``stage`` does not take, naming the stage, the key and the valid keys.

    Any key not declared (:func:`valid_keys`) is a typo: it would change the fingerprint
    and nothing else, so it is refused (exit 3) with the valid keys and the closest match.
    """
    valid = valid_keys(stage)
    unknown = sorted(set(params) - valid)
    if not unknown:
        return
    keys = sorted(valid)
    said = ", ".join(repr(k) for k in unknown)
    raise ConfigError(f"{flag}: stage {stage.name!r} has no parameter {said}"
                      f"{suggest(unknown[0], keys)} (its parameters: "
                      f"{', '.join(keys) or 'none'})")


def check_params(graph: Graph, params: Mapping[str, Mapping[str, Any]],
                 flag: str = "--set") -> None:
    """Check ``{stage: {key: value}}`` against ``graph``: unknown stages and keys fail."""
    for name, values in params.items():
        if name not in graph.stages:
            names = list(graph.stages)
            raise ConfigError(f"{flag}: no stage {name!r} in this graph"
                              f"{suggest(name, names)} (stages: {', '.join(graph.order)})")
        check_stage_params(graph.stages[name], values, flag)
        check_stage_values(graph.stages[name], values, flag)
