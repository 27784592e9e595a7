"""The whole evaluation protocol for one model: heads and/or native scores → result records.

A model may bring frozen features (heads are fitted on them, paper §4.2), native
per-task scores (direct transfer for a detector's binary task, zero-shot answers of
an omni model), or both. Records from both sources are kept (``source`` column);
the report shows, per task, the model's native scores where it has rows of that
task and its heads otherwise (:meth:`EvalResult.source_for`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from madbench_common.eval import analysis as A
from madbench_common.eval.native import native_groups, parse_records
from madbench_common.eval.runner import FeatureSet, GroupScores, run_heads
from madbench_common.registry import GROUPS, REGISTRY

__all__ = ["EvalConfig", "EvalResult", "ModelInfo", "run_evaluation"]

Record = dict[str, Any]


@dataclass(frozen=True)
class EvalConfig:
    """Knobs of the protocol; defaults are the benchmark's."""

    c: float = 1.0
    n_boot: int = 1000
    seed: int = 0
    logo: bool = True
    score_kind: str = "auto"
    tasks: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ModelInfo:
    """How the report names and groups a model (from the registry where it is known)."""

    slug: str
    name: str
    group: str = ""
    """One of :data:`~madbench_common.registry.GROUPS`, or ``""`` (other models)."""
    reference: bool = False
    stands_in_for: str = ""
    in_paper: bool = True

    @classmethod
    def lookup(cls, slug: str, name: str = "", group: str = "") -> ModelInfo:
        """The registry's view of ``slug``: its paper name and group (``name``/``group``
        override; an unknown slug, e.g. a bring-your-own model, is named as given)."""
        spec = REGISTRY.get(slug)
        if group and group not in GROUPS:
            raise ValueError(f"model group {group!r}: expected one of {GROUPS}")
        if spec is None:
            return cls(slug, name or slug, group)
        shown = name or (spec.slug if spec.reference else spec.paper_model or spec.slug)
        return cls(slug, shown, group or spec.group, spec.reference,
                   spec.paper_model if spec.reference else "", spec.in_paper)


@dataclass
class EvalResult:
    """One model's result records (lists of flat dicts) and the scored groups behind them."""

    model: ModelInfo
    tables: dict[str, list[Record]] = field(default_factory=dict)
    groups: list[GroupScores] = field(default_factory=list)

    def source_for(self, task: str) -> str:
        """``native`` where the model has its own rows of ``task``, else ``head``."""
        native = any(r["source"] == "native" and r["task"] == task
                     for r in self.tables.get("tasks", []))
        return "native" if native else "head"

    def has_task(self, task: str) -> bool:
        """Whether any record of ``task`` exists (from heads or native scores)."""
        return any(r["task"] == task for r in self.tables.get("tasks", []))

    def modes(self) -> list[str]:
        """Input modes with any result, A-V first (the mode of Tables 2–4 for A-V models)."""
        found = {g.mode for g in self.groups}
        return sorted(found, key=lambda m: ({"AV": 0, "A": 1}.get(m, 2), m))


def _tables(groups: list[GroupScores], cfg: EvalConfig) -> dict[str, list[Record]]:
    b, s = cfg.n_boot, cfg.seed
    return {
        "tasks": A.task_records(groups, b, s),
        "means": A.summary_records(groups, b, s),
        "components": A.component_records(groups, b, s),
        "variants": A.variant_records(groups, b, s),
        "pairing": A.pair_records(groups, b, s),
        "ablation": A.ablation_records(groups, b, s),
        "generators": A.generator_records(groups),
        "logo": A.logo_records(groups),
    }


def run_evaluation(model: str | ModelInfo, samples: pd.DataFrame, *,
                   features: FeatureSet | None = None, scores: pd.DataFrame | None = None,
                   config: EvalConfig | None = None) -> EvalResult:
    """Evaluate one model from frozen features (heads) and/or its native per-task scores."""
    cfg = config or EvalConfig()
    info = model if isinstance(model, ModelInfo) else ModelInfo.lookup(model)
    groups: list[GroupScores] = []
    if features is not None and features.matrices:
        groups += run_heads(samples, features, tasks=list(cfg.tasks) if cfg.tasks else None,
                            c=cfg.c, logo=cfg.logo)
    if scores is not None and len(scores):
        groups += native_groups(samples, scores, cfg.score_kind)
    result = EvalResult(info, _tables(groups, cfg), groups)
    if scores is not None and len(scores):
        result.tables["parse"] = parse_records(samples, scores)
    return result
