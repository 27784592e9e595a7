"""Scored test rows of one task (a *view*) and bootstrapped estimates over one or more views.

A :class:`View` is what a metric reads: labels, scores, clip ids and the decision
threshold of one task in one group, with excluded rows (NaN scores: refusals,
unparsed answers, missing rows) already removed and counted. :func:`estimate`
turns a metric over several views — one protocol, the mean over the three core
protocols, a difference of means — into a point value and its clip-paired 95%
bootstrap interval (:mod:`madbench_common.benchmarks.madbench.eval.bootstrap`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from madbench_common.benchmarks.madbench.eval import metrics as M
from madbench_common.benchmarks.madbench.eval.bootstrap import (
    MetricPart,
    Part,
    joint_interval,
    joint_metric_interval,
    weighted_accuracy,
    weighted_auc,
    weighted_average_precision,
    weighted_macro_f1,
)
from madbench_common.benchmarks.madbench.eval.fit import GroupScores
from madbench_common.benchmarks.madbench.eval.tasks import TASKS, task_labels

__all__ = ["METRICS", "View", "estimate", "mean_of", "task_view", "variant_view"]

F64 = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
METRICS = ("auc", "eer", "ap", "acc", "macro_f1")
Combine = Callable[[F64], F64]


@dataclass(frozen=True)
class View:
    """The usable test rows of one task in one group."""

    y: npt.NDArray[np.int64]
    s: F64
    """(n,) logits/LLR-like scores (higher = positive) or (n, K) log-probabilities."""
    clips: npt.NDArray[np.str_]
    n_total: int
    """Rows the task has in this group, excluded ones included."""
    threshold: float | None = None
    llr: F64 | None = None

    @property
    def n(self) -> int:
        return int(self.y.size)

    @property
    def n_excluded(self) -> int:
        return self.n_total - self.n

    @property
    def multiclass(self) -> bool:
        return self.s.ndim == 2

    def prediction(self) -> npt.NDArray[np.int64] | None:
        if self.multiclass:
            return np.asarray(self.s.argmax(axis=1), dtype=np.int64)
        if self.threshold is None:
            return None
        return (self.s >= self.threshold).astype(np.int64)

    def ranking(self) -> F64:
        """Binary ranking score: the score itself, or 1 − P(R) for four-way (any fake)."""
        return -self.s[:, 0] if self.multiclass else self.s

    def binary_labels(self) -> npt.NDArray[np.int64]:
        return (self.y > 0).astype(np.int64)

    def both_classes(self) -> bool:
        y = self.binary_labels()
        return 0 < int(y.sum()) < y.size


def _finite(s: F64) -> BoolArray:
    ok = np.isfinite(s)
    return np.asarray(ok if s.ndim == 1 else ok.all(axis=1), dtype=bool)


def _view(g: GroupScores, task: str, rows: BoolArray, y: npt.NDArray[np.int64]) -> View | None:
    s = g.scores[task][rows]
    ok = _finite(s)
    if not ok.any():
        return None
    llr = s[ok] - g.prior_logodds.get(task, 0.0) if g.llr_like and s.ndim == 1 else None
    clips = g.test["clip_id"].astype(str).to_numpy()[rows][ok]
    view = View(y[rows][ok], s[ok], clips, int(rows.sum()), g.thresholds.get(task), llr)
    return view if view.both_classes() else None


def task_view(g: GroupScores, task: str, rows: BoolArray | None = None) -> View | None:
    """The task's own labels on ``g``'s test rows (optionally a subset); ``None`` if absent."""
    if task not in g.scores:
        return None
    mask, y = task_labels(g.test, task)
    full = np.zeros(len(g.test), np.int64)
    full[mask] = y
    if rows is not None:
        mask = mask & rows
    return _view(g, task, mask, full) if mask.any() else None


def variant_view(g: GroupScores, task: str, pos: str, neg: str) -> View | None:
    """``task``'s scores read as variant ``pos`` (1) vs ``neg`` (0), e.g. S vs R for G_S."""
    if task not in g.scores or TASKS[task].n_classes != 2:
        return None
    v = g.test["variant"].astype(str).to_numpy()
    rows = np.isin(v, (pos, neg))
    return _view(g, task, rows, (v == pos).astype(np.int64)) if rows.any() else None


def _weight_stat(view: View, metric: str) -> Callable[[F64], F64]:
    if metric in ("auc", "ap"):
        y, s = view.binary_labels(), view.ranking()
        stat = weighted_auc if metric == "auc" else weighted_average_precision
        return lambda w: stat(y, s, w)
    pred = view.prediction()
    if pred is None:
        raise ValueError(f"{metric} needs a decision threshold")
    k = view.s.shape[1] if view.multiclass else 2
    if metric == "acc":
        return lambda w: weighted_accuracy(view.y, pred, w)
    return lambda w: weighted_macro_f1(view.y, pred, k, w)


def _eer(view: View) -> Callable[[npt.NDArray[np.int64]], float]:
    y, s = view.binary_labels(), view.ranking()
    return lambda idx: M.eer_asvspoof(y[idx], s[idx])


def mean_of(values: F64) -> F64:
    """Combine: the mean over parts (NaN if any part is NaN)."""
    return np.asarray(values.mean(axis=1), dtype=np.float64)


def estimate(views: list[View], metric: str, n_boot: int, seed: int,
             combine: Combine = mean_of) -> dict[str, Any]:
    """``{value, lo, hi}`` of ``combine`` over the views' ``metric`` (clip-paired bootstrap)."""
    if metric == "eer":
        parts_m = [MetricPart(v.clips, _eer(v)) for v in views]
        n_eer = max(n_boot // 5, 50) if n_boot > 0 else 0
        iv = joint_metric_interval(parts_m, combine, n_eer, seed)
    else:
        parts = [Part(v.clips, _weight_stat(v, metric)) for v in views]
        iv = joint_interval(parts, combine, n_boot, seed)
    return {"value": iv.point, "lo": iv.lo, "hi": iv.hi}
