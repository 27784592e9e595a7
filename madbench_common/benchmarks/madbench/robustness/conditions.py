"""Robustness conditions: named chains of codec, resampling, filter and noise steps.

The packaged list (``madbench_common/data/robustness.yaml``) is the ``perturb`` stage's
default; its header documents the steps. A user's list replaces it with
``--set perturb.conditions=@file.yaml`` (a YAML list, or a mapping with a ``conditions``
list). Parsing refuses unknown steps and keys, duplicate names and bad values with a
:class:`~madbench_common.core.errors.ConfigError` naming the condition, so a typo never runs
a different chain than the one written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError
from madbench_common.media.transcode import CODECS, CodecSpec

__all__ = ["CLEAN", "Condition", "Step", "builtin_conditions", "parse_conditions"]

CLEAN = "clean"
"""The name the reports give the unperturbed test split."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_KEYS = {
    "codec": ({"codec", "sample_rate"}, {"bitrate"}),
    "resample": ({"sample_rate"}, set()),
    "bandpass": ({"low", "high"}, set()),
    "noise": ({"snr_db"}, set()),
}
"""op → (required keys, optional keys)."""


@dataclass(frozen=True)
class Step:
    """One operation of a chain, with its parameters as written."""

    op: str
    params: tuple[tuple[str, Any], ...]

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op, **dict(self.params)}

    def codec_spec(self) -> CodecSpec:
        return CodecSpec(str(self.get("codec")), int(self.get("sample_rate")),
                         int(self.get("bitrate", 0)))


@dataclass(frozen=True)
class Condition:
    """A named, seeded perturbation: its family (for the report) and its chain of steps."""

    name: str
    family: str
    chain: tuple[Step, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family,
                "chain": [s.as_dict() for s in self.chain]}


def _step(raw: Any, where: str) -> Step:
    if not isinstance(raw, dict) or raw.get("op") not in _KEYS:
        raise ConfigError(f"{where}: each step is a mapping with op one of {sorted(_KEYS)}")
    op = str(raw["op"])
    need, optional = _KEYS[op]
    keys = set(raw) - {"op"}
    if need - keys or keys - need - optional:
        raise ConfigError(f"{where}: op {op} takes {sorted(need)}"
                          + (f" and optionally {sorted(optional)}" if optional else "")
                          + f" (got {sorted(keys)})")
    step = Step(op, tuple(sorted((k, raw[k]) for k in keys)))
    _check(step, where)
    return step


def _check(step: Step, where: str) -> None:
    try:
        if step.op == "codec":
            if step.get("codec") not in CODECS:
                raise ConfigError(f"codec {step.get('codec')!r} (known: {sorted(CODECS)})")
            step.codec_spec()
        elif step.op in ("resample",) and int(step.get("sample_rate")) < 1000:
            raise ConfigError("sample_rate below 1000 Hz")
        elif step.op == "bandpass" and not 0 < float(step.get("low")) < float(step.get("high")):
            raise ConfigError("needs 0 < low < high")
        elif step.op == "noise":
            float(step.get("snr_db"))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: op {step.op}: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"{where}: op {step.op}: {exc}") from None


def _condition(raw: Any, i: int) -> Condition:
    if not isinstance(raw, dict) or set(raw) - {"name", "family", "chain"}:
        raise ConfigError(f"condition #{i + 1}: a mapping with name, family and chain only")
    name = str(raw.get("name", ""))
    if not _NAME.match(name) or name == CLEAN:
        raise ConfigError(f"condition #{i + 1}: name {name!r} must match {_NAME.pattern} "
                          f"and not be {CLEAN!r}")
    chain = raw.get("chain")
    if not isinstance(chain, list) or not chain:
        raise ConfigError(f"condition {name}: chain must be a non-empty list of steps")
    steps = tuple(_step(s, f"condition {name}, step {k + 1}") for k, s in enumerate(chain))
    return Condition(name, str(raw.get("family") or steps[0].op), steps)


def parse_conditions(value: Any) -> list[Condition]:
    """Conditions from a parameter value: a list, or a mapping with a ``conditions`` list."""
    if isinstance(value, dict):
        value = value.get("conditions")
    if not isinstance(value, list):
        raise ConfigError("perturb conditions: expected a list of conditions "
                          "(or a mapping with a 'conditions' list)")
    out = [_condition(raw, i) for i, raw in enumerate(value)]
    names = [c.name for c in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigError(f"perturb conditions: duplicate names {dup}")
    return out


def builtin_conditions() -> list[dict[str, Any]]:
    """The packaged list, as plain data (the ``perturb`` stage's default parameter)."""
    text = resources.files("madbench_common").joinpath("data/robustness.yaml").read_text(
        encoding="utf-8")
    doc = yaml.safe_load(text)
    parse_conditions(doc)  # fail at import of the graph, not in a pod
    return list(doc["conditions"])
