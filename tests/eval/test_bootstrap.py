"""Clip-paired bootstrap: weighted AUC exactness, clip grouping, and coverage of a known AUC."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score

from madbench_common.eval.bootstrap import (
    bootstrap_metric,
    bootstrap_stat,
    clip_weights,
    weighted_auc,
)
from madbench_common.eval.metrics import auc, eer_asvspoof


def test_weighted_auc_matches_sklearn_sample_weights() -> None:
    rng = np.random.default_rng(0)
    y, s = rng.integers(0, 2, 400), np.round(rng.normal(size=400), 1)
    w = clip_weights(np.arange(400) // 4, 20, seed=1)
    got = weighted_auc(y, s, w)
    for b in range(20):
        assert got[b] == pytest.approx(roc_auc_score(y, s, sample_weight=w[b]), abs=1e-12)


def test_clip_weights_keep_variants_together() -> None:
    clips = np.repeat(np.arange(50), 4)
    w = clip_weights(clips, 30, seed=0)
    assert (w.reshape(30, 50, 4) == w.reshape(30, 50, 4)[:, :, :1]).all()
    assert (w.sum(axis=1) == 200).all()


def _dataset(rng: np.random.Generator, n_clips: int, mu: float) -> tuple[np.ndarray, ...]:
    clip_effect = np.repeat(rng.normal(size=n_clips), 4)  # shared by the 4 variants
    y = np.tile([0, 1, 1, 1], n_clips)
    s = clip_effect + rng.normal(size=4 * n_clips) + mu * y
    return y, s, np.repeat(np.arange(n_clips), 4)


def test_coverage_of_known_auc() -> None:
    mu, n_clips = 1.0, 120
    true_auc = norm.cdf(mu / np.sqrt(2 * (1 + 1)))  # var(clip) = var(noise) = 1
    rng = np.random.default_rng(123)
    hits = 0
    reps = 150
    for r in range(reps):
        y, s, clips = _dataset(rng, n_clips, mu)
        iv = bootstrap_stat(lambda w, y=y, s=s: weighted_auc(y, s, w), clips, 300, seed=r)
        assert iv.point == pytest.approx(auc(y, s))
        hits += iv.lo <= true_auc <= iv.hi
    assert 0.88 <= hits / reps <= 0.99


def test_bootstrap_metric_eer_interval_contains_point() -> None:
    rng = np.random.default_rng(5)
    y, s, clips = _dataset(rng, 60, 1.5)
    iv = bootstrap_metric(lambda i: eer_asvspoof(y[i], s[i]), clips, 100, seed=0)
    assert iv.lo <= iv.point <= iv.hi
    assert 0 < iv.hi - iv.lo < 0.5
