"""Clip-paired bootstrap: weighted AUC exactness, clip grouping, and coverage of a known AUC."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import accuracy_score, average_precision_score, f1_score, roc_auc_score

from madbench_common.benchmarks.madbench.eval.bootstrap import (
    MetricPart,
    Part,
    bootstrap_metric,
    bootstrap_stat,
    clip_weights,
    joint_interval,
    joint_metric_interval,
    weighted_accuracy,
    weighted_auc,
    weighted_average_precision,
    weighted_macro_f1,
)
from madbench_common.benchmarks.madbench.eval.metrics import auc, eer_asvspoof


def test_weighted_auc_matches_sklearn_sample_weights() -> None:
    rng = np.random.default_rng(0)
    y, s = rng.integers(0, 2, 400), np.round(rng.normal(size=400), 1)
    w = clip_weights(np.arange(400) // 4, 20, seed=1)
    got = weighted_auc(y, s, w)
    for b in range(20):
        assert got[b] == pytest.approx(roc_auc_score(y, s, sample_weight=w[b]), abs=1e-12)


def test_weighted_average_precision_matches_sklearn_sample_weights() -> None:
    rng = np.random.default_rng(3)
    y, s = rng.integers(0, 2, 400), np.round(rng.normal(size=400) + 0.5 * rng.integers(0, 2, 400),
                                             1)
    w = clip_weights(np.arange(400) // 4, 20, seed=2)
    got = weighted_average_precision(y, s, w)
    for b in range(20):
        want = average_precision_score(y, s, sample_weight=w[b])
        assert got[b] == pytest.approx(want, abs=1e-12)


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


def test_weighted_accuracy_and_macro_f1_match_sklearn_sample_weights() -> None:
    rng = np.random.default_rng(2)
    t, p = rng.integers(0, 4, 200), rng.integers(0, 4, 200)
    p[:60] = t[:60]
    w = clip_weights(np.arange(200) // 4, 15, seed=3)
    acc, f1 = weighted_accuracy(t, p, w), weighted_macro_f1(t, p, 4, w)
    for b in range(15):
        assert acc[b] == pytest.approx(accuracy_score(t, p, sample_weight=w[b]))
        assert f1[b] == pytest.approx(f1_score(t, p, average="macro", sample_weight=w[b]))


def test_joint_interval_shares_one_clip_draw_across_parts() -> None:
    rng = np.random.default_rng(7)
    y, s, clips = _dataset(rng, 80, 1.0)
    clips = clips.astype(str)
    part = Part(clips, lambda w: weighted_auc(y, s, w))
    # the same rows twice: a difference is 0 in every replicate, a mean equals one part
    diff = joint_interval([part, part], lambda v: v[:, 0] - v[:, 1], 200, seed=1)
    assert diff.point == 0 and diff.lo == 0 and diff.hi == 0
    mean = joint_interval([part, part], lambda v: v.mean(axis=1), 200, seed=1)
    one = bootstrap_stat(part.stat, clips, 200, seed=1)
    assert (mean.point, mean.lo, mean.hi) == pytest.approx((one.point, one.lo, one.hi))
    eer = MetricPart(clips, lambda i: eer_asvspoof(y[i], s[i]))
    same = joint_metric_interval([eer, eer], lambda v: v[:, 0] - v[:, 1], 60, seed=0)
    assert same.lo == same.hi == 0
    assert np.isnan(joint_interval([part], lambda v: v[:, 0], 0).lo)
