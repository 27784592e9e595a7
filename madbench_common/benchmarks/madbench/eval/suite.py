"""The whole evaluation protocol for one model: heads and/or native scores → result records.

A model may bring frozen features (heads are fitted on them, paper §4.2), native
per-task scores (direct transfer for a detector's binary task, zero-shot answers of
an omni model), or both. Records from both sources are kept (``source`` column);
the report shows, per task, the model's native scores where it has rows of that
task and its heads otherwise (:meth:`EvalResult.source_for`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from madbench_common.benchmarks.madbench.eval import analysis as A
from madbench_common.benchmarks.madbench.eval.fit import (
    FeatureSet,
    GroupScores,
    condition_order,
    run_heads,
    score_conditions,
)
from madbench_common.benchmarks.madbench.eval.metrics import auc, eer_asvspoof, roc_points
from madbench_common.benchmarks.madbench.eval.native import native_groups, parse_records
from madbench_common.benchmarks.madbench.eval.tasks import task_labels
from madbench_common.models.registry import GROUPS, REGISTRY

__all__ = ["MAX_POINTS", "EvalConfig", "EvalResult", "ModelInfo", "curve_records", "run_evaluation"]

Record = dict[str, Any]


MAX_POINTS = 200
"""The most ROC vertices a ``curves`` record keeps."""


def _thin(fpr: npt.NDArray[np.float64], tpr: npt.NDArray[np.float64]
          ) -> tuple[list[float], list[float]]:
    """At most :data:`MAX_POINTS` ROC vertices, the first and last kept."""
    if fpr.size > MAX_POINTS:
        keep = np.unique(np.linspace(0, fpr.size - 1, MAX_POINTS).round().astype(int))
        fpr, tpr = fpr[keep], tpr[keep]
    return [round(float(v), 6) for v in fpr], [round(float(v), 6) for v in tpr]


def curve_records(groups: Sequence[GroupScores]) -> list[Record]:
    """ROC vertices of every paired group's binary-type tasks (the figures' data).

    Stored in ``report.json`` (``curves`` records, at most :data:`MAX_POINTS` vertices
    each), so ``madbench compare`` draws the same figures from published reports."""
    out = []
    for g in (g for g in groups if g.pairing == "paired"):
        for task in ("binary", "speech", "env", "scene"):
            if task not in g.scores:
                continue
            mask, y = task_labels(g.test, task)
            s = g.scores[task][mask]
            ok = np.isfinite(s)
            if not ok.any() or not 0 < y[ok].sum() < ok.sum():
                continue
            fpr, tpr, _ = roc_points(y[ok], s[ok])
            xs, ys = _thin(fpr, tpr)
            out.append({"source": g.source, "protocol": g.protocol, "mode": g.mode,
                        "task": task, "fpr": xs, "tpr": ys, "n": int(ok.sum()),
                        "auc": auc(y[ok], s[ok]), "eer": eer_asvspoof(y[ok], s[ok])})
    return out


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
    """One of :data:`~madbench_common.models.registry.GROUPS`, or ``""`` (other models)."""
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
    robust_groups: list[GroupScores] = field(default_factory=list)
    """The same heads (and native scores) on each robustness condition's test rows."""

    def source_for(self, task: str) -> str:
        """``native`` where the model has its own rows of ``task``, else ``head``."""
        native = any(r["source"] == "native" and r["task"] == task
                     for r in self.tables.get("tasks", []))
        return "native" if native else "head"

    def has_task(self, task: str) -> bool:
        """Whether any record of ``task`` exists (from heads or native scores)."""
        return any(r["task"] == task for r in self.tables.get("tasks", []))

    def modes(self) -> list[str]:
        """Input modes with any result, A-V first (the mode of Tables 2–4 for A-V models).

        Without scored groups (a result read back from ``report.json``), the modes of its
        records."""
        found = {g.mode for g in self.groups} or {
            str(r["mode"]) for recs in self.tables.values() for r in recs
            if isinstance(r, dict) and r.get("mode")}
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
        "curves": curve_records(groups),
    }


def _native_conditions(samples: pd.DataFrame, perturbed: pd.DataFrame, scores: pd.DataFrame,
                       kind: str) -> list[GroupScores]:
    """The model's own scores on each condition's rows, thresholds from the clean val split."""
    fitted = samples[samples["split"] != "test"]
    out = []
    for cond in condition_order(perturbed):
        part = perturbed[perturbed["condition"] == cond]
        mine = scores[scores["sample_id"].astype(str).isin(set(part["sample_id"].astype(str))
                                                           | set(fitted["sample_id"]))]
        if not len(mine):
            continue
        for g in native_groups(pd.concat([fitted, part], ignore_index=True), mine, kind):
            g.condition = str(cond)
            out.append(g)
    return out


def run_evaluation(model: str | ModelInfo, samples: pd.DataFrame, *,
                   features: FeatureSet | None = None, scores: pd.DataFrame | None = None,
                   config: EvalConfig | None = None,
                   perturbed: pd.DataFrame | None = None) -> EvalResult:
    """Evaluate one model from frozen features (heads) and/or its native per-task scores.

    ``perturbed`` (the ``perturb`` stage's samples: a ``condition`` column, the clean
    samples' labels) adds robustness records: the same heads and native scores on each
    condition's test rows
    (:func:`~madbench_common.benchmarks.madbench.eval.fit.score_conditions`).
    """
    cfg = config or EvalConfig()
    info = model if isinstance(model, ModelInfo) else ModelInfo.lookup(model)
    groups: list[GroupScores] = []
    robust: list[GroupScores] = []
    has_perturbed = perturbed is not None and len(perturbed) > 0
    if features is not None and features.matrices:
        groups += run_heads(samples, features, tasks=list(cfg.tasks) if cfg.tasks else None,
                            c=cfg.c, logo=cfg.logo)
        if has_perturbed:
            assert perturbed is not None
            robust += score_conditions(groups, perturbed, features)
    if scores is not None and len(scores):
        groups += native_groups(samples, scores, cfg.score_kind)
        if has_perturbed:
            assert perturbed is not None
            robust += _native_conditions(samples, perturbed, scores, cfg.score_kind)
    result = EvalResult(info, _tables(groups, cfg), groups, robust)
    if robust:
        result.tables["robustness"] = A.robustness_records(groups, robust, cfg.n_boot, cfg.seed)
    if scores is not None and len(scores):
        result.tables["parse"] = parse_records(samples, scores)
    return result
