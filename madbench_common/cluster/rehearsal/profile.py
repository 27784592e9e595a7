"""What a rehearsal pass is asked to do: the profile (``madbench_common/data/rehearsal.yaml``:
sources, shard counts, each workflow's parameters and relaxed stage parameters), the command
line's options, and the list of ways a pass departs from ``argo submit`` on a cluster."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[3]
PROFILE = ROOT / "madbench_common" / "data" / "rehearsal.yaml"
RECORDS = ROOT / "images" / "rehearsal.json"
BANNER = ("REHEARSAL ON TINY RANDOM WEIGHTS: every model below is a randomly initialised "
          "tiny checkpoint in the real release layout, except the stages marked ‡ (stand-in "
          "code for a hub-only architecture, random weights) and § (an API model answered "
          "by the local API stub); these numbers show that data flows through every stage "
          "and measure nothing about any model.")
SMOKE_BANNER = ("REHEARSAL OF THE SMOKE WORKFLOW: every stage runs a CPU reference (marked †), "
                "not the paper's model; these numbers check the machinery.")


@dataclass(frozen=True)
class WorkflowProfile:
    name: str
    file: str
    run_id: str
    params: dict[str, str]
    stage_params: dict[str, dict[str, Any]]
    random_weights: bool = True

    @property
    def banner(self) -> str:
        return BANNER if self.random_weights else SMOKE_BANNER


@dataclass(frozen=True)
class Profile:
    sources_csv: str
    every: int
    shards: int
    workers: int
    workflows: tuple[WorkflowProfile, ...]
    api_keys: tuple[str, ...]
    cpu_deadline_scale: float = 1.0
    """A pod that requests a GPU runs on the CPU here: its ``activeDeadlineSeconds`` (sized
    for a GPU) is multiplied by this."""


@dataclass
class Options:
    work: Path
    workflows: tuple[str, ...] = ("full", "deaf")
    keep_images: bool = False
    image_tests: bool = False
    """``make image-test`` of every image the pass builds, before its pods (``IMAGE_TESTS=1``)."""
    workers: int = 0
    engine: str = "buildah"
    fresh: bool = False
    records: Path = RECORDS
    keep_going: bool = True
    backoff_scale: float = 1.0
    strict: bool = False
    params: tuple[str, ...] = ()
    """``NAME=VALUE`` workflow parameters over the profile's (every workflow declaring NAME)."""
    stage_sets: tuple[str, ...] = ()
    """``STAGE.KEY=VALUE`` merged into the ``stage_params`` of the workflows with STAGE."""


def _param_text(value: Any) -> str:
    """A workflow parameter's text as ``argo submit -p`` takes it: a mapping or list as JSON,
    a YAML boolean as ``true``/``false`` (the workflows' enums), anything else as is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def load_profile(path: Path | None = None) -> Profile:
    """Read ``madbench_common/data/rehearsal.yaml`` (or ``path``)."""
    path = path or PROFILE
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ConfigError(f"{path}: expected version: 1")
    unknown = set(doc) - {"version", "sources", "shards", "workers", "workflows", "api_keys",
                          "cpu_deadline_scale"}
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}")
    flows = []
    for w in doc["workflows"]:
        extra = set(w) - {"name", "file", "run_id", "params", "stage_params", "random_weights"}
        if extra:
            raise ConfigError(f"{path}: workflow {w.get('name')}: unknown keys {sorted(extra)}")
        flows.append(WorkflowProfile(str(w["name"]), str(w["file"]), str(w["run_id"]),
                                     {str(k): _param_text(v)
                                      for k, v in (w.get("params") or {}).items()},
                                     dict(w.get("stage_params") or {}),
                                     bool(w.get("random_weights", True))))
    src = doc.get("sources") or {}
    return Profile(str(src.get("csv", "data/demo/sources.csv")), int(src.get("every", 1)),
                   int(doc.get("shards", 2)), int(doc.get("workers", 2)), tuple(flows),
                   tuple(doc.get("api_keys") or ()),
                   float(doc.get("cpu_deadline_scale", 1.0)))


def _fill(value: Any, fields: Mapping[str, Any]) -> Any:
    """``{stub_port}``-style fields in the profile's strings (only the names in ``fields``:
    other braces, as in a JSON parameter value, are left as they are)."""
    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}",
                      lambda m: str(fields[m[1]]) if m[1] in fields else m[0], value)
    if isinstance(value, list):
        return [_fill(v, fields) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, fields) for k, v in value.items()}
    return value


def _graph_for(name: str) -> Any:
    from madbench_common.cli.pipelines import build_pipeline

    return build_pipeline("deaf" if name == "deaf" else "madbench")


def relaxations(flows: Sequence[WorkflowProfile]) -> list[dict[str, Any]]:
    """The profile's parameters that depart from the committed workflows: its ``-p`` values
    and, per stage, the stage parameters it sets. The executor's departures (shard counts,
    GPU pods on the CPU and their deadlines, the worker cap, failFast) are stated once, per
    workflow, by :func:`madbench_common.cluster.relaxations.relaxations`
    (the record's ``argo_departures``)."""
    out: list[dict[str, Any]] = []
    for flow in flows:
        if flow.params:
            out.append({"name": f"{flow.name}:workflow_params", "value": sorted(flow.params),
                        "what": f"{flow.file}: the profile's -p values"})
        if flow.stage_params:
            out.append({"name": f"{flow.name}:stage_params",
                        "value": {s: sorted(v) for s, v in sorted(flow.stage_params.items())},
                        "what": f"{flow.file}: the profile's stage parameters (QC thresholds, "
                                "sizes, the API stub)"})
    return out
