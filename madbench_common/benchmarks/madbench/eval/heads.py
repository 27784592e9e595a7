"""Fast batched L2 logistic-regression heads: many tasks fitted at once on one feature matrix.

Every head minimises scikit-learn's ``LogisticRegression(C)`` objective (L2 penalty on the
weights, unpenalised intercept; sigmoid for two classes, softmax for more) on its own
subset of the rows of a shared, standardised matrix ``X``; all heads of one matrix are
solved together (:func:`fit_heads`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy.linalg import cho_factor, cho_solve
from scipy.special import expit, log_softmax, softmax
from threadpoolctl import threadpool_limits

from madbench_common.core.compat import zip_strict

__all__ = ["Head", "HeadSpec", "Standardiser", "fit_heads"]

F64 = npt.NDArray[np.float64]
_ARMIJO = 1e-4


@dataclass(frozen=True)
class Standardiser:
    """Column means and scales from training rows (zero-variance columns scale by 1)."""

    mean: F64
    scale: F64

    @classmethod
    def fit(cls, x: npt.NDArray[np.floating]) -> Standardiser:
        mean = x.mean(axis=0, dtype=np.float64)
        std = x.std(axis=0, dtype=np.float64)
        return cls(mean, np.where(std > 0, std, 1.0))

    def transform(self, x: npt.NDArray[np.floating], dtype: type = np.float32) -> npt.NDArray:
        out: npt.NDArray = np.asarray(x, dtype=dtype) - self.mean.astype(dtype)
        out /= self.scale.astype(dtype)
        return out


@dataclass(frozen=True)
class HeadSpec:
    """One head to fit: labels per training row (``-1`` = not in this head's rows)."""

    key: str
    labels: npt.NDArray[np.int64]
    n_classes: int = 2


@dataclass(frozen=True)
class Head:
    """A fitted head; :meth:`decision` gives logits (binary) or class log-probabilities."""

    key: str
    coef: F64
    """(d, 1) for two classes, (d, K) for K > 2."""
    intercept: F64
    n_classes: int
    n_iter: int
    converged: bool

    def decision(self, x: npt.NDArray[np.floating]) -> F64:
        z = np.asarray(x @ self.coef.astype(x.dtype), dtype=np.float64) + self.intercept
        return z[:, 0] if self.n_classes == 2 else log_softmax(z, axis=1)

    def proba(self, x: npt.NDArray[np.floating]) -> F64:
        """P(class) per row: (n, K); column 1 is P(positive) for binary heads."""
        z = self.decision(x)
        if self.n_classes == 2:
            p = expit(z)
            return np.stack([1 - p, p], axis=1)
        return np.exp(z)


@dataclass
class _Problem:
    xa: npt.NDArray[np.floating]
    targets: F64
    weights: F64
    lam: F64
    cols: list[npt.NDArray[np.int64]]
    n_classes: list[int]
    inv_h0: F64 | None = None

    @property
    def n_heads(self) -> int:
        return len(self.cols)


def _build(x: npt.NDArray[np.floating], specs: list[HeadSpec], c: float) -> _Problem:
    n = x.shape[0]
    xa = np.hstack([x, np.ones((n, 1), dtype=x.dtype)])
    cols, targets, weights, lam, start = [], [], [], [], 0
    for spec in specs:
        if spec.labels.shape != (n,):
            raise ValueError(f"head {spec.key}: {spec.labels.shape[0]} labels for {n} rows")
        k = 1 if spec.n_classes == 2 else spec.n_classes
        rows = spec.labels >= 0
        n_h = int(rows.sum())
        if n_h == 0 or len(np.unique(spec.labels[rows])) < 2:
            raise ValueError(f"head {spec.key}: needs rows of at least two classes")
        y = spec.labels.clip(0)
        onehot = (y[:, None] == np.arange(k)) if k > 1 else y[:, None] == 1
        targets.append(onehot.astype(np.float64))
        weights.append(np.repeat((rows / n_h)[:, None], k, axis=1))
        lam.append(np.full(k, 1.0 / (c * n_h)))
        cols.append(np.arange(start, start + k))
        start += k
    return _Problem(xa, np.hstack(targets), np.hstack(weights), np.concatenate(lam), cols,
                    [s.n_classes for s in specs])


def _gram(x: npt.NDArray[np.floating], max_rows: int) -> F64:
    """Mean outer product ``XᵀX/n`` with an intercept column, from at most ``max_rows`` rows.

    Only the preconditioner uses it, so an evenly spaced row sample is enough.
    """
    rows = x if x.shape[0] <= max_rows else x[np.linspace(0, x.shape[0] - 1, max_rows).astype(int)]
    xa = np.hstack([rows, np.ones((rows.shape[0], 1), dtype=rows.dtype)]).astype(np.float32)
    return np.asarray(xa.T @ xa, dtype=np.float64) / rows.shape[0]


def _inverse_hessian0(gram: F64, n: int, c: float) -> F64:
    """``(¼·XᵀX/n + λ)⁻¹``, shared by every head of the matrix (a 1-thread Cholesky).

    It is the exact inverse Hessian at zero for sigmoid heads on all rows and for
    a four-class softmax head (``1/K = ¼``) on its class-centred part; for subset
    heads and other K it is an approximation, which only costs iterations.
    """
    d1 = gram.shape[0]
    hessian0 = gram / 4.0
    ridge = np.full(d1, 1.0 / (c * n))
    ridge[-1] = 1e-8
    hessian0[np.diag_indices(d1)] += ridge
    with threadpool_limits(1):  # small LAPACK calls: threads only contend
        factor = cho_factor(hessian0, check_finite=False)
        return cho_solve(factor, np.eye(d1), check_finite=False)


def _precondition(p: _Problem, q: F64, heads: list[int]) -> F64:
    """Apply the shared factor to every active head's columns in one solve."""
    assert p.inv_h0 is not None
    cols = np.concatenate([p.cols[h] for h in heads])
    block = q[:, cols].copy()
    means, at = {}, 0
    for h in heads:
        k = len(p.cols[h])
        if p.n_classes[h] > 2:  # softmax: the class-mean direction has curvature λ only
            means[h] = block[:, at:at + k].mean(axis=1, keepdims=True)
            block[:, at:at + k] -= means[h]
        at += k
    solved = p.inv_h0 @ block
    out = np.zeros_like(q)
    out[:, cols] = solved
    for h, mean in means.items():
        centred = mean / p.lam[p.cols[h][0]]
        centred[-1] = 0.0  # the softmax intercept's class-mean is not identified
        out[:, p.cols[h]] += centred
    return out


def _evaluate(p: _Problem, w: F64, heads: list[int]) -> tuple[F64, F64]:
    """Objective per head (for ``heads``) and the gradient in those heads' columns."""
    cols = np.concatenate([p.cols[h] for h in heads])
    z = np.asarray(p.xa @ w[:, cols].astype(p.xa.dtype), dtype=np.float64)
    y, m = p.targets[:, cols], p.weights[:, cols]
    resid = np.empty_like(z)
    f = np.zeros(p.n_heads)
    at = 0
    for h in heads:
        k = len(p.cols[h])
        zs, ys = z[:, at:at + k], y[:, at:at + k]
        if p.n_classes[h] == 2:
            loss = np.logaddexp(0.0, zs[:, 0]) - ys[:, 0] * zs[:, 0]
            resid[:, at] = expit(zs[:, 0]) - ys[:, 0]
        else:
            logp = log_softmax(zs, axis=1)
            loss = -(ys * logp).sum(axis=1)
            resid[:, at:at + k] = softmax(zs, axis=1) - ys
        f[h] = loss @ m[:, at] + 0.5 * p.lam[p.cols[h][0]] * np.sum(w[:-1, p.cols[h]] ** 2)
        at += k
    grad = np.zeros_like(w)
    grad[:, cols] = np.asarray(p.xa.T @ (resid * m).astype(p.xa.dtype), dtype=np.float64)
    grad[:-1, cols] += p.lam[cols] * w[:-1, cols]
    return f, grad


def _head_dot(p: _Problem, a: F64, b: F64, heads: list[int]) -> F64:
    colsum = np.einsum("ij,ij->j", a, b)
    out = np.zeros(p.n_heads)
    for h in heads:
        out[h] = colsum[p.cols[h]].sum()
    return out


@dataclass
class _State:
    w: F64
    f: F64
    grad: F64
    history: list[tuple[F64, F64, F64]] = field(default_factory=list)


def _direction(p: _Problem, st: _State, heads: list[int]) -> F64:
    """L-BFGS two-loop recursion, per head, with the Newton-at-zero initial matrix."""
    q = st.grad.copy()
    alphas = []
    for s, y, rho in reversed(st.history):
        alpha = rho * _head_dot(p, s, q, heads)
        q -= _spread(p, alpha, heads) * y
        alphas.append(alpha)
    r = _precondition(p, q, heads)
    for (s, y, rho), alpha in zip_strict(st.history, reversed(alphas)):
        beta = rho * _head_dot(p, y, r, heads)
        r += _spread(p, alpha - beta, heads) * s
    return -r


def _spread(p: _Problem, per_head: F64, heads: list[int]) -> F64:
    out = np.zeros(p.lam.size)
    for h in heads:
        out[p.cols[h]] = per_head[h]
    return out


def _line_search(p: _Problem, st: _State, d: F64, heads: list[int]) -> tuple[F64, F64, F64]:
    """Backtracking per head; returns new w, f, grad (heads that fail keep theirs).

    A step is accepted on Armijo's sufficient decrease, measured either by function
    values or by its trapezoidal estimate ``t·(φ'(0) + φ'(t))/2`` from directional
    derivatives, which stays accurate near the optimum where float32 rounding swamps
    differences of function values (the objective is convex and smooth).
    """
    slope = _head_dot(p, st.grad, d, heads)
    w_new, f_new, g_new = st.w.copy(), st.f.copy(), st.grad.copy()
    step, pending = np.ones(p.n_heads), [h for h in heads if slope[h] < 0]
    for _ in range(30):
        if not pending:
            break
        trial = st.w + _spread(p, step, pending) * d
        f, g = _evaluate(p, trial, pending)
        slope_new = _head_dot(p, g, d, pending)
        still = []
        for h in pending:
            armijo = f[h] <= st.f[h] + _ARMIJO * step[h] * slope[h]
            trapezoid = slope[h] + slope_new[h] <= 2 * _ARMIJO * slope[h]
            if armijo or trapezoid:
                c = p.cols[h]
                w_new[:, c], f_new[h], g_new[:, c] = trial[:, c], f[h], g[:, c]
            else:
                step[h] *= 0.5
                still.append(h)
        pending = still
    return w_new, f_new, g_new


def fit_heads(x: npt.NDArray[np.floating], specs: list[HeadSpec], *, c: float = 1.0,
              tol: float = 1e-5, max_iter: int = 500, memory: int = 10,
              gram_rows: int = 8192) -> list[Head]:
    """Fit every head in ``specs`` on rows of ``x`` (already standardised).

    All heads of one matrix are solved together by a vectorised L-BFGS with per-head
    state: the matrix is touched once per iteration for *all* heads (``X @ W``, ``Xᵀ R``:
    matrix–matrix products instead of one matrix–vector product per head); the initial
    inverse-Hessian of each head is the exact inverse Hessian at ``W = 0``,
    ``(a·XᵀX/n + λ)⁻¹`` with ``a = ¼`` (sigmoid) or ``1/K`` on the class-centred part
    (softmax), from one Gram matrix per feature matrix, so the first step is a Newton step
    and the remaining iterations are few; each head keeps its own step length and
    convergence test (max |gradient| of the mean-loss objective ≤ ``tol``) and drops out
    of the products once converged.

    Heads whose rows together cover under 3/4 of ``x`` (scene-consistency subsets)
    are solved as a second batch on just those rows, so their iterations read less.
    """
    if not specs:
        return []
    inv_h0 = _inverse_hessian0(_gram(x, gram_rows), x.shape[0], c)
    full = [i for i, s in enumerate(specs) if (s.labels >= 0).all()]
    part = [i for i in range(len(specs)) if i not in full]
    rows = np.zeros(x.shape[0], bool)
    for i in part:
        rows |= specs[i].labels >= 0
    if rows.mean() >= 0.75:
        full, part = list(range(len(specs))), []
    fitted: dict[int, Head] = {}
    for block, keep in ((full, slice(None)), (part, rows)):
        if block:
            sub = [HeadSpec(specs[i].key, specs[i].labels[keep], specs[i].n_classes)
                   for i in block]
            heads = _fit_block(x[keep], sub, inv_h0, c, tol, max_iter, memory)
            fitted.update(zip_strict(block, heads))
    return [fitted[i] for i in range(len(specs))]


def _fit_block(x: npt.NDArray[np.floating], specs: list[HeadSpec], inv_h0: F64, c: float,
               tol: float, max_iter: int, memory: int) -> list[Head]:
    p = _build(x, specs, c)
    p.inv_h0 = inv_h0
    w = np.zeros((p.xa.shape[1], p.lam.size))
    active = list(range(p.n_heads))
    f, g = _evaluate(p, w, active)
    st = _State(w, f, g)
    iters = np.zeros(p.n_heads, int)
    for _ in range(max_iter):
        active = [h for h in active if np.abs(st.grad[:, p.cols[h]]).max() > tol]
        if not active:
            break
        w_new, f_new, g_new = _line_search(p, st, _direction(p, st, active), active)
        s, y = w_new - st.w, g_new - st.grad
        sy = _head_dot(p, s, y, active)
        stalled = [h for h in active if sy[h] <= 1e-16]
        rho = np.where(sy > 1e-16, 1.0 / np.where(sy > 1e-16, sy, 1.0), 0.0)
        st.history = [*st.history[-(memory - 1):], (s, y, rho)] if memory > 1 else []
        st.w, st.f, st.grad = w_new, f_new, g_new
        iters[active] += 1
        active = [h for h in active if h not in stalled]
    return [_head(spec, st.w[:, p.cols[h]], int(iters[h]),
                  bool(np.abs(st.grad[:, p.cols[h]]).max() <= tol))
            for h, spec in enumerate(specs)]


def _head(spec: HeadSpec, w: F64, n_iter: int, converged: bool) -> Head:
    return Head(spec.key, w[:-1].copy(), w[-1].copy(), spec.n_classes, n_iter, converged)
