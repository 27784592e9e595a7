"""Which parameters a stage takes, and the check of user-given ones (``--set``, pods).

A stage's parameters are declared in one place each (:func:`valid_keys`); any other key is
a typo and is refused (:func:`check_stage_params`), and a JSON-given value must have the
type of its key's declared default (:func:`check_stage_values`).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.failures import BUDGET_PARAM, DEFAULT_MAX_FAILED_FRACTION
from madbench_common.pipeline.graph import PROFILES, Graph, Stage

__all__ = ["check_params", "check_stage_params", "check_stage_values", "declared_defaults",
           "valid_keys"]


def valid_keys(stage: Stage) -> frozenset[str]:
    """Every parameter ``stage`` accepts, in any profile.

    The implementation's defaults (:attr:`~madbench_common.pipeline.stage.StageImpl.defaults`),
    what the graph definition sets for that stage (:attr:`Stage.params`, the ``full``
    profile's ``params``, its :attr:`Stage.workflow_params`, and ``model`` where some
    profile runs one swappable model), the keys its implementation reads only when given
    (:attr:`~madbench_common.pipeline.stage.StageImpl.optional_params`, e.g. ingest's
    ``sources``), and ``max_failed_fraction``, the rejection budget every stage has
    (:mod:`~madbench_common.pipeline.failures`).
    """
    from madbench_common.pipeline.stage import load_impl

    impl = load_impl(stage.target)
    keys = set(stage.workflow_params) | set(impl.optional_params) | set(impl.defaults)
    keys.add(BUDGET_PARAM)  # every stage has a rejection budget
    for profile in PROFILES:
        variant = stage.in_profile(profile)
        keys |= set(variant.params)
        if variant.swappable:
            keys.add("model")
    return frozenset(keys)


def declared_defaults(stage: Stage) -> dict[str, list[Any]]:
    """key → its default in the implementation and in each profile that declares one
    (``model``: the stage's model)."""
    from madbench_common.pipeline.stage import load_impl

    out: dict[str, list[Any]] = {k: [v] for k, v in load_impl(stage.target).defaults.items()}
    out.setdefault(BUDGET_PARAM, [DEFAULT_MAX_FAILED_FRACTION])
    for profile in PROFILES:
        variant = stage.in_profile(profile)
        for key, value in variant.params.items():
            out.setdefault(key, []).append(value)
        if variant.swappable and variant.model:
            out.setdefault("model", []).append(variant.model)
    return out


def _kind(value: Any) -> str:
    """The type name a default asks for: bool, integer, number, string, list, mapping."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return ""


def _fits(value: Any, default: Any) -> bool:
    kind = _kind(default)
    if default is None or not kind:
        return True
    if kind == "number":
        return _kind(value) in ("integer", "number")
    if kind != _kind(value):
        return False
    if kind == "list" and default:
        return all(any(_fits(v, d) for d in default) for v in value)
    return True


def _describe(default: Any) -> str:
    kind = _kind(default)
    if kind == "list" and default:
        inner = sorted({_kind(d) for d in default})
        return f"a list of {' or '.join(k + 's' for k in inner)}"
    return {"integer": "an integer", "mapping": "a mapping"}.get(kind, f"a {kind}")


def check_stage_values(stage: Stage, params: Mapping[str, Any], flag: str) -> None:
    """Refuse a value whose type is not its key's declared default's (JSON-given values).

    A value given as JSON (``--set``, ``--params-json``, ``--stage-params``) must have the
    type of the key's default in some profile (a number where the default is a number, a
    list of strings where it is one, …), so ``--set source_qc.min_speech_coverage=0,3``
    fails before any work instead of deep in a shard. A key whose default is ``None``, or
    that only the implementation reads (``optional_params``), takes any value.
    ``--param KEY=VALUE`` pod arguments are strings by design (the workflows' own
    parameters) and are not typed here.
    """
    defaults = declared_defaults(stage)
    for key, value in params.items():
        options = defaults.get(key)
        if not options or any(_fits(value, d) for d in options):
            continue
        wants = " or ".join(sorted({_describe(d) for d in options}))
        raise ConfigError(f"{flag}: {stage.name}.{key} must be {wants} (default "
                          f"{options[0]!r}), got {value!r} ({type(value).__name__})")


def _suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


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
        check_stage_values(graph.stages[name], values, flag)
