"""Clip-paired bootstrap confidence intervals: resample source clips, never single samples.

The four variants (R/S/E/Q) of a source clip — and its paired and shuffled
inputs, and its A and A-V features — share the clip's speaker, scene and
recording, so they are not independent. Each replicate draws ``n_clips`` clips
with replacement and gives every sample the multiplicity of its clip; statistics
computed from several score vectors over the same samples (gaps, Δ_pair, the
modality ablation) use the *same* replicate weights, so their intervals account
for the pairing. Intervals are percentile intervals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "Interval",
    "bootstrap_metric",
    "bootstrap_stat",
    "clip_weights",
    "percentile_interval",
    "weighted_auc",
]

F64 = npt.NDArray[np.float64]


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
    """(n_boot, n_samples) multiplicities: each replicate resamples clips with replacement."""
    _, codes = np.unique(np.asarray(clip_ids).astype(str), return_inverse=True)
    n_clips = int(codes.max()) + 1
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(n_clips, np.full(n_clips, 1.0 / n_clips), size=n_boot)
    return counts[:, codes].astype(np.float64)


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
