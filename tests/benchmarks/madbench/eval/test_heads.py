"""The batched heads solve scikit-learn's LogisticRegression objective, every kind of head."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from madbench_common.benchmarks.madbench.eval.heads import HeadSpec, Standardiser, fit_heads


def _data(n: int = 1200, d: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)) @ rng.normal(size=(6, d)) + rng.normal(size=(n, d))
    v = rng.integers(0, 4, n)
    x[:, :4] += 0.5 * v[:, None]
    return Standardiser.fit(x).transform(x, np.float64), v


def _sklearn(x: np.ndarray, labels: np.ndarray, c: float) -> LogisticRegression:
    rows = labels >= 0
    return LogisticRegression(C=c, tol=1e-12, max_iter=20000).fit(x[rows], labels[rows])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("c", [1.0, 0.05])
def test_heads_match_sklearn(dtype: type, c: float) -> None:
    x, v = _data()
    specs = [
        HeadSpec("binary", (v > 0).astype(np.int64)),
        HeadSpec("fourway", v.astype(np.int64), 4),
        HeadSpec("subset", np.where(v % 2 == 0, (v == 2).astype(np.int64), -1)),
    ]
    heads = fit_heads(x.astype(dtype), specs, c=c, tol=1e-7)
    for head, spec in zip(heads, specs, strict=True):
        assert head.converged, head.key
        ref = _sklearn(x, spec.labels, c)
        rows = spec.labels >= 0
        np.testing.assert_allclose(head.proba(x[rows]), ref.predict_proba(x[rows]), atol=2e-4)


def test_subset_heads_solved_on_their_rows_match_sklearn() -> None:
    x, v = _data(seed=3)
    labels = np.where(v == 1, 1, np.where(v == 0, 0, -1))  # covers half the rows: own block
    full = (v > 1).astype(np.int64)
    heads = fit_heads(x, [HeadSpec("half", labels), HeadSpec("all", full)], tol=1e-7)
    for head, lab in zip(heads, (labels, full), strict=True):
        rows = lab >= 0
        ref = _sklearn(x, lab, 1.0)
        np.testing.assert_allclose(head.proba(x[rows]), ref.predict_proba(x[rows]), atol=2e-4)


def test_head_decision_is_logit_and_log_proba() -> None:
    x, v = _data(n=400, d=10)
    b, f = fit_heads(x, [HeadSpec("b", (v > 0).astype(np.int64)), HeadSpec("f", v, 4)])
    assert b.decision(x).shape == (400,)
    np.testing.assert_allclose(np.exp(f.decision(x)).sum(axis=1), 1.0)


def test_standardiser_zero_variance_column() -> None:
    x = np.c_[np.arange(5.0), np.ones(5)]
    std = Standardiser.fit(x)
    out = std.transform(x, np.float64)
    assert np.allclose(out[:, 1], 0.0) and np.isclose(out[:, 0].std(), 1.0)


def test_single_class_head_is_refused() -> None:
    x, _ = _data(n=50, d=4)
    with pytest.raises(ValueError, match="two classes"):
        fit_heads(x, [HeadSpec("bad", np.zeros(50, np.int64))])
