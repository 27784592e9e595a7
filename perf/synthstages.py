"""Synthetic stages for the scale benchmark: the real graph's shape, rows and I/O, no models.

Each synthetic stage stands in for one real stage: same name, inputs, shard count and
row type (so merges, manifests and status handle the real columns), with a cheap body:
its plan reads its input manifests (as real stages do), and each item becomes a
row whose id, run-relative URIs and sha256 columns are filled like real ones. Row
counts are the paper's (:func:`paper_counts`): what is timed is the orchestration.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
import typing
from collections.abc import Sequence
from typing import Any

from madbench_common.benchmarks.madbench.rows import (
    ComponentRow,
    FeatureRow,
    PairRow,
    PerturbedRow,
    SampleRow,
    SceneRow,
    ScoreRow,
    SourceQCRow,
    SourceRow,
    SplitRow,
    StemRow,
)
from madbench_common.core.manifest import ManifestRow, read_manifest_bytes
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.plan import PAPER_CLIPS, PAPER_SAMPLES
from madbench_common.pipeline.stage import StageImpl, load_impl, read_marker, stage_params

__all__ = ["PAPER_SAMPLE_ROWS", "paper_counts", "paper_graph", "synthetic_graph"]

_PROTOCOLS = 3
PAPER_SAMPLE_ROWS = PAPER_SAMPLES * _PROTOCOLS
"""Sample rows of ``assemble``: 16,536 × 3 = 49,608, the benchmark's paper scale. Paper
Table 1 counts 16,536 samples *across* the three protocols (5,512 each), so this is a
3× upper bound of the paper's own count."""
_SPEECH_GENERATED, _ENV_GENERATED = 34_056, 22_987
"""Generated components (paper Table 1): speech over 6 settings, environment over 6."""
_TEST_SHARE = 996 / 5_512
"""Test samples per protocol (paper Table 1: 3,944 / 572 / 996 of 5,512)."""
_HEAD_TASKS = 4
"""Tasks with a head per model and input group (binary, four-way, speech, environment)."""
_FIXED = {
    "ingest": PAPER_CLIPS, "separate": PAPER_CLIPS, "source_qc": PAPER_CLIPS,
    "split": PAPER_CLIPS, "scene": PAPER_CLIPS, "pairing": PAPER_CLIPS * 4,
    "plan_components": _SPEECH_GENERATED + _ENV_GENERATED,
    "component_qc": _SPEECH_GENERATED + _ENV_GENERATED, "assemble": PAPER_SAMPLE_ROWS,
}
_SCALE = float(os.environ.get("MADBENCH_SCALE_FACTOR", "1"))
"""Fraction of the paper's counts (1: the paper's scale; smaller for a quick check)."""


def _groups(stage: Stage) -> int:
    """Feature rows per sample: one for audio, one per pairing for audio-visual input."""
    params = stage_params(stage, {})  # the implementation's defaults under the graph's
    pairings = len(params["pairings"])
    return sum(1 if mode == "A" else pairings for mode in params["modes"])


def paper_counts(graph: Graph) -> dict[str, int]:
    """Rows per stage of ``graph`` (the full profile: every paper model) at the paper's scale.

    Generators: their setting's share of Table 1's generated components; feature stages:
    one row per sample and input group (upper bound: every sample gets a shuffled
    partner); detector scores: their feature rows; ``evaluate``: one row per model,
    group, head task and test sample.
    """
    counts: dict[str, int] = {}
    for stage in graph:
        role = stage.role
        if stage.name in _FIXED:
            counts[stage.name] = _FIXED[stage.name]
        elif role in ("speech_generator", "env_generator"):
            total = _SPEECH_GENERATED if role == "speech_generator" else _ENV_GENERATED
            counts[stage.name] = total // 6
        elif stage.name == "perturb":  # every condition of every protocol's test split
            conditions = len(stage_params(stage, {})["conditions"])
            counts[stage.name] = round(PAPER_SAMPLE_ROWS * _TEST_SHARE) * conditions
        elif "features" in stage.outputs:
            counts[stage.name] = PAPER_SAMPLE_ROWS * _groups(stage)
        elif stage.name != "evaluate":  # scores_<slug>: the detector's feature rows
            counts[stage.name] = counts[stage.inputs[0]]
    groups = sum(_groups(s) for s in graph if "features" in s.outputs)
    counts["evaluate"] = round(PAPER_SAMPLE_ROWS * _TEST_SHARE) * groups * _HEAD_TASKS
    return counts


_ROWS: tuple[type[ManifestRow], ...] = (
    SourceRow, StemRow, SourceQCRow, SplitRow, SceneRow, PairRow, ComponentRow, SampleRow,
    PerturbedRow, FeatureRow, ScoreRow,
)


def _value(hint: Any, name: str, item: str, prefix: str) -> Any:
    if hint is not str:
        return None
    if name.endswith("uri") or name.endswith("_path"):
        return f"{prefix}/{name.removesuffix('_uri') or 'x'}/{item}.wav"
    if name.endswith("sha256"):
        return hashlib.sha256(f"{name}/{item}".encode()).hexdigest()
    if name.endswith("_id") or name in ("component", "variant", "mode"):
        return item
    return None


class _Synth(StageImpl[Any]):
    """Base: ``items`` ids, rows of the real type with id/URI/sha256 columns filled."""

    @dataclasses.dataclass(frozen=True)
    class Params(StageParams):
        items: int = param(0, doc="items the stage plans")

    def plan(self) -> list[str]:
        for dep in self.ctx.stage.inputs:  # read every input manifest, as real stages do
            marker = read_marker(self.ctx.run, dep)
            assert marker is not None
            data = self.ctx.run.get_bytes(f"{dep}/manifest.parquet", marker["manifest_sha256"])
            read_manifest_bytes(load_impl(self.ctx.graph[dep].target).row_type, data)
        n = int(self.ctx.params["items"])
        return [f"{self.ctx.stage.name[:3]}{i:07d}" for i in range(n)]

    def run_items(self, items: Sequence[str]) -> list[Any]:
        cls = type(self).row_type
        hints = typing.get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        filled = [n for n in names if _value(hints[n], n, "x", "p") is not None]
        prov = self.ctx.provenance("synthetic", "1")
        return [cls(**{n: _value(hints[n], n, item, self.ctx.prefix) for n in filled}
                    ).with_provenance(prov) for item in items]


def _make_classes() -> dict[type[ManifestRow], str]:
    module = sys.modules[__name__]
    names = {}
    for row in _ROWS:
        name = f"Synth{row.__name__}"
        setattr(module, name, type(name, (_Synth,), {"row_type": row, "__module__": __name__}))
        names[row] = name
    return names


_CLASSES = _make_classes()


def synthetic_graph(real: Graph, shards: dict[str, int] | None = None,
                    scale: float = _SCALE) -> Graph:
    """``real``'s stages with synthetic bodies at ``scale`` × the paper's counts
    (``shards`` overrides shard counts)."""
    counts = paper_counts(real)
    stages = []
    for stage in real:
        row = load_impl(stage.target).row_type
        items = max(1, round(counts[stage.name] * scale))
        n = (shards or {}).get(stage.name, stage.shards)
        stages.append(Stage(name=stage.name, role=stage.role, inputs=stage.inputs,
                            outputs=stage.outputs, target=f"{__name__}:{_CLASSES[row]}",
                            shards=n, params={"items": items}))
    return Graph(stages)


def paper_graph() -> Graph:
    """The synthetic graph of ``workflows/full.yaml`` (every paper model) at the paper's
    scale (a picklable factory for the runner)."""
    from madbench_common.benchmarks.madbench.graph import build_graph

    return synthetic_graph(build_graph().profiled("full"))
