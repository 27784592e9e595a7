"""Synthetic stages for the scale benchmark: the real graph's shape, rows and I/O, no models.

Each synthetic stage stands in for one real stage: same name, inputs, shard count and
row type (so merges, manifests and status handle the real columns), with a cheap body:
its plan reads its first input's manifest (as real stages do), and each item becomes a
row whose id, run-relative URIs and sha256 columns are filled like real ones. Item
counts are the paper's (``PAPER_COUNTS``): what is timed is the orchestration.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sys
import typing
from collections.abc import Sequence
from typing import Any

from madbench_common.manifest import ManifestRow, read_manifest_bytes
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.stage import StageImpl, load_impl, read_marker
from madbench_common.plan import PAPER_CLIPS, PAPER_SAMPLES
from madbench_common.rows import (
    ComponentRow,
    FeatureRow,
    PairRow,
    SampleRow,
    SceneRow,
    ScoreRow,
    SourceQCRow,
    SourceRow,
    SplitRow,
    StemRow,
)

__all__ = ["PAPER_COUNTS", "synthetic_graph"]

_PROTOCOLS = 3
_COMPONENTS = PAPER_CLIPS * 5  # 3 speech + 2 environment components planned per clip
PAPER_COUNTS = {
    "ingest": PAPER_CLIPS, "separate": PAPER_CLIPS, "source_qc": PAPER_CLIPS,
    "split": PAPER_CLIPS, "scene": PAPER_CLIPS, "pairing": PAPER_CLIPS * 4,
    "plan_components": _COMPONENTS, "component_qc": _COMPONENTS,
    "assemble": PAPER_SAMPLES * _PROTOCOLS, "features": PAPER_SAMPLES * _PROTOCOLS * 3,
    "evaluate": PAPER_SAMPLES * _PROTOCOLS,
}
"""Rows per stage at the paper's scale (generators: the components of their setting)."""
_GENERATOR_ROWS = _COMPONENTS // 12
_SCALE = float(os.environ.get("MADBENCH_SCALE_FACTOR", "1"))
"""Fraction of the paper's counts (1: the paper's scale; smaller for a quick check)."""
_ROWS: tuple[tuple[type[ManifestRow], str], ...] = (
    (SourceRow, "clip_id"), (StemRow, "clip_id"), (SourceQCRow, "clip_id"),
    (SplitRow, "clip_id"), (SceneRow, "clip_id"), (PairRow, "pair_id"),
    (ComponentRow, "component_id"), (SampleRow, "sample_id"), (FeatureRow, "sample_id"),
    (ScoreRow, "sample_id"),
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

    def plan(self) -> list[str]:
        if self.ctx.stage.inputs:  # read the upstream manifest, as every real stage does
            dep = self.ctx.stage.inputs[0]
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
    for row, id_field in _ROWS:
        name = f"Synth{row.__name__}"
        setattr(module, name, type(name, (_Synth,), {"row_type": row, "id_field": id_field,
                                                     "__module__": __name__}))
        names[row] = name
    return names


_CLASSES = _make_classes()


def synthetic_graph(real: Graph, shards: dict[str, int] | None = None) -> Graph:
    """``real``'s stages with synthetic bodies (``shards`` overrides shard counts)."""
    stages = []
    for stage in real:
        row = load_impl(stage.target).row_type
        items = max(1, round(PAPER_COUNTS.get(stage.name, _GENERATOR_ROWS) * _SCALE))
        n = (shards or {}).get(stage.name, stage.shards)
        stages.append(Stage(name=stage.name, role=stage.role, inputs=stage.inputs,
                            target=f"{__name__}:{_CLASSES[row]}", shards=n,
                            params={"items": items}))
    return Graph(stages)


def paper_graph() -> Graph:
    """The synthetic graph at the paper's scale (a picklable factory for the runner)."""
    from madbench_common.pipeline.definition import build_graph

    return synthetic_graph(build_graph())
