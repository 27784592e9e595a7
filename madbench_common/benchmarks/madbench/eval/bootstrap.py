"""Clip-paired bootstrap confidence intervals: resample source clips, never single samples.

The four variants (R/S/E/Q) of a source clip, its paired and shuffled inputs, and its A
and A-V features share the clip's speaker, scene and recording, so they are not
independent. Each replicate draws ``n_clips`` clips with replacement and gives every
sample the multiplicity of its clip (:func:`clip_weights`); statistics over the same
samples (gaps, Δ_pair, the modality ablation) use the *same* replicate weights
(:func:`joint_interval`). Intervals are percentile intervals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from madbench_common.core.compat import zip_strict

__all__ = [
    "Interval",
    "MetricPart",
    "Part",
    "bootstrap_metric",
    "bootstrap_stat",
    "clip_weights",
    "joint_interval",
    "joint_metric_interval",
    "percentile_interval",
    "weighted_accuracy",
    "weighted_auc",
    "weighted_average_precision",
    "weighted_macro_f1",
]

F64 = npt.NDArray[np.float64]
WeightStat = Callable[[F64], F64]
Combine = Callable[[F64], F64]


@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap percentile interval."""

    point: float
    lo: float
    hi: float
    n_boot: int

    def as_dict(self) -> dict[str, float]:
        return {"point": self.point, "lo": self.lo, "hi": self.hi, "n_boot": self.n_boot}


def clip_weights(clip_ids: npt.ArrayLike, n_boot: int, seed: int = 0) -> F64:
    """(n_boot, n_samples) multiplicities: each replicate resamples clips with replacement.

    The last few results are cached (read-only): every metric of one group's test rows
    draws the same weights.
    """
    _, codes = np.unique(np.asarray(clip_ids).astype(str), return_inverse=True)
    return _weights(codes.astype(np.int64).tobytes(), n_boot, seed)


@lru_cache(maxsize=4)
def _weights(codes_bytes: bytes, n_boot: int, seed: int) -> F64:
    codes = np.frombuffer(codes_bytes, dtype=np.int64)
    n_clips = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_clips, size=(n_boot, n_clips))  # n_clips draws with replacement
    flat = (draws + n_clips * np.arange(n_boot)[:, None]).ravel()
    counts = np.bincount(flat, minlength=n_boot * n_clips).reshape(n_boot, n_clips)
    weights = counts[:, codes].astype(np.float64)
    weights.flags.writeable = False
    return weights


def weighted_auc(labels: npt.ArrayLike, scores: npt.ArrayLike, weights: F64) -> F64:
    """AUC (ties count ½) under each row of sample ``weights``; vectorised over replicates.

    Returns NaN for a replicate that lost every sample of one class.
    """
    y = np.asarray(labels).astype(bool)
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(s, kind="mergesort")
    s, y, w = s[order], y[order], np.atleast_2d(weights)[:, order]
    starts = np.r_[0, np.flatnonzero(np.diff(s) != 0) + 1]
    group = np.cumsum(np.isin(np.arange(s.size), starts)) - 1
    neg_in_group = np.add.reduceat(w * ~y, starts, axis=1)
    neg_before = np.cumsum(neg_in_group, axis=1) - neg_in_group
    credit = neg_before[:, group] + 0.5 * neg_in_group[:, group]
    pos_w = w * y
    denom = pos_w.sum(axis=1) * (w * ~y).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (pos_w * credit).sum(axis=1) / denom, np.nan)


def weighted_average_precision(labels: npt.ArrayLike, scores: npt.ArrayLike,
                               weights: F64) -> F64:
    """Average precision (as
    :func:`~madbench_common.benchmarks.madbench.eval.metrics.average_precision`,
    tied scores entering together) under each row of sample ``weights``; vectorised.

    Returns NaN for a replicate without a fake sample.
    """
    y = np.asarray(labels).astype(bool)
    s = np.asarray(scores, dtype=np.float64)
    order = np.argsort(-s, kind="mergesort")
    s, y, w = s[order], y[order], np.atleast_2d(weights)[:, order]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), s.size - 1]
    tp = np.cumsum(w * y, axis=1)[:, last]
    fp = np.cumsum(w * ~y, axis=1)[:, last]
    pos = tp[:, -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        recall_step = np.diff(np.concatenate([np.zeros_like(pos), tp], axis=1), axis=1) / pos
        precision = np.where(tp + fp > 0, tp / np.where(tp + fp > 0, tp + fp, 1.0), 0.0)
        return np.where(pos[:, 0] > 0, (recall_step * precision).sum(axis=1), np.nan)


def percentile_interval(point: float, replicates: F64, alpha: float = 0.05) -> Interval:
    """Percentile interval of the finite replicates."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return Interval(point, float("nan"), float("nan"), 0)
    lo, hi = np.quantile(finite, [alpha / 2, 1 - alpha / 2])
    return Interval(float(point), float(lo), float(hi), int(finite.size))


def bootstrap_stat(stat: Callable[[F64], F64], clip_ids: npt.ArrayLike, n_boot: int = 1000,
                   seed: int = 0, alpha: float = 0.05) -> Interval:
    """Interval of a statistic written over weights: ``stat((B, n) weights) -> (B,)``.

    The point estimate is ``stat`` at unit weights.
    """
    n = np.asarray(clip_ids).shape[0]
    point = float(stat(np.ones((1, n)))[0])
    return percentile_interval(point, stat(clip_weights(clip_ids, n_boot, seed)), alpha)


def bootstrap_metric(metric: Callable[[npt.NDArray[np.int64]], float], clip_ids: npt.ArrayLike,
                     n_boot: int = 500, seed: int = 0, alpha: float = 0.05) -> Interval:
    """Interval of any metric of sample indices (e.g. EER), by explicit clip resampling."""
    n = np.asarray(clip_ids).shape[0]
    weights = clip_weights(clip_ids, n_boot, seed).astype(np.int64)
    values = np.empty(n_boot)
    for b in range(n_boot):
        try:
            values[b] = metric(np.repeat(np.arange(n), weights[b]))
        except ValueError:  # a replicate without one of the classes
            values[b] = np.nan
    return percentile_interval(metric(np.arange(n)), values, alpha)


def weighted_accuracy(y_true: npt.ArrayLike, y_pred: npt.ArrayLike, weights: F64) -> F64:
    """Accuracy under each row of sample ``weights`` (NaN for an empty replicate)."""
    w = np.atleast_2d(weights)
    hit = (np.asarray(y_true) == np.asarray(y_pred)).astype(np.float64)
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, (w * hit).sum(axis=1) / total, np.nan)


def weighted_macro_f1(y_true: npt.ArrayLike, y_pred: npt.ArrayLike, n_classes: int,
                      weights: F64) -> F64:
    """Macro-F1 under each row of ``weights``: the mean F1 of the classes present in the
    replicate's true or predicted labels (as
    :func:`~madbench_common.benchmarks.madbench.eval.metrics.macro_f1`)."""
    t, p = np.asarray(y_true, np.int64), np.asarray(y_pred, np.int64)
    k = n_classes
    onehot = np.zeros((t.size, k * k))
    onehot[np.arange(t.size), t * k + p] = 1.0
    cm = (np.atleast_2d(weights) @ onehot).reshape(-1, k, k)
    tp = np.diagonal(cm, axis1=1, axis2=2)
    denom = cm.sum(axis=1) + cm.sum(axis=2)
    present = denom > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(present, 2 * tp / np.where(present, denom, 1.0), 0.0)
        return np.where(present.any(axis=1), f1.sum(axis=1) / present.sum(axis=1), np.nan)


@dataclass(frozen=True)
class Part:
    """One group of rows of a joint statistic: its clip ids and a weight statistic."""

    clips: npt.NDArray[np.str_]
    stat: WeightStat


@dataclass(frozen=True)
class MetricPart:
    """One group of rows of a joint metric that needs explicit resampling (EER)."""

    clips: npt.NDArray[np.str_]
    metric: Callable[[npt.NDArray[np.int64]], float]


def _offsets(sizes: list[int]) -> list[slice]:
    ends = np.cumsum(sizes)
    return [slice(int(e - n), int(e)) for n, e in zip_strict(sizes, ends)]


def _pooled(clips: list[npt.NDArray[np.str_]]) -> npt.NDArray[np.str_]:
    return np.concatenate([np.asarray(c).astype(str) for c in clips]) if clips else np.array([])


def joint_interval(parts: list[Part], combine: Combine, n_boot: int = 1000, seed: int = 0,
                   alpha: float = 0.05) -> Interval:
    """Interval of ``combine(values)`` where ``values[:, i]`` is part ``i``'s statistic.

    For a statistic that combines several groups of rows (the mean over the three core
    protocols of Tables 2, 3 and 5, Δ_E−S, Δ_pair): the parts' clip ids are pooled so that
    a clip drawn once carries the same multiplicity in every part (the protocols hold the
    same clips), and each replicate combines the parts' values. ``n_boot == 0`` gives the
    point estimate with NaN bounds.
    """
    slices = _offsets([len(p.clips) for p in parts])

    def stat(w: F64) -> F64:
        values = np.stack([p.stat(w[:, s]) for p, s in zip_strict(parts, slices)], axis=1)
        return combine(values)

    clips = _pooled([p.clips for p in parts])
    point = float(stat(np.ones((1, clips.size)))[0])
    if n_boot <= 0:
        return Interval(point, float("nan"), float("nan"), 0)
    return percentile_interval(point, stat(clip_weights(clips, n_boot, seed)), alpha)


def joint_metric_interval(parts: list[MetricPart], combine: Combine, n_boot: int = 200,
                          seed: int = 0, alpha: float = 0.05) -> Interval:
    """:func:`joint_interval` for metrics of sample indices (EER): explicit resampling."""
    slices = _offsets([len(p.clips) for p in parts])
    clips = _pooled([p.clips for p in parts])

    def values(counts: npt.NDArray[np.int64]) -> F64:
        out = np.empty(len(parts))
        for i, (p, s) in enumerate(zip_strict(parts, slices)):
            try:
                out[i] = p.metric(np.repeat(np.arange(s.stop - s.start), counts[s]))
            except ValueError:  # a replicate without one of the classes
                out[i] = np.nan
        return out

    point = float(combine(values(np.ones(clips.size, np.int64))[None, :])[0])
    if n_boot <= 0:
        return Interval(point, float("nan"), float("nan"), 0)
    weights = clip_weights(clips, n_boot, seed).astype(np.int64)
    reps = combine(np.stack([values(weights[b]) for b in range(n_boot)]))
    return percentile_interval(point, reps, alpha)
