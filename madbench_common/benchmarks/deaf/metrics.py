"""DEAF metrics (§2.5): Acc, ASS, ARS, EDI and Δ ARS with bootstrap intervals.

For a set of trials (one model, conflict type and level) with ``R`` repeats, every trial
has a test label ``a_i^mismatch`` and, for Q1, a control label ``a_i^match``, both judged
against the trial's key (:mod:`madbench_common.benchmarks.deaf.trials`). Eq. 1–3 per
repeat: :func:`score`; the reported value is the mean over repeats (§3.1: "repeated three
times, with the average results reported"); EDI (eq. 4): :func:`edi`; Δ ARS (§3.4):
:func:`bootstrap_delta_ars`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["CODES", "LabelMatrix", "Scores", "bootstrap_delta_ars", "edi", "harmonic",
           "label_matrix", "score"]

CODES = {"C": 0, "T": 1, "O": 2}
_MISSING = -1
IntArray = npt.NDArray[np.int8]


@dataclass(frozen=True)
class LabelMatrix:
    """Judge labels of ``n`` trials × ``R`` repeats (codes of :data:`CODES`, −1 missing),
    and each trial's resampling unit (its sentence; the trial itself when not given)."""

    trial_ids: tuple[str, ...]
    test: IntArray
    control: IntArray
    groups: tuple[str, ...] = ()
    paired: bool = False
    """Every trial has a control query (Q1): Acc is then taken over the ASS pairs."""

    def __post_init__(self) -> None:
        if not self.groups:
            object.__setattr__(self, "groups", self.trial_ids)
        if len(self.groups) != len(self.trial_ids):
            raise ValueError("one group per trial")

    @property
    def n(self) -> int:
        return len(self.trial_ids)

    def take(self, mask: npt.NDArray[np.bool_]) -> LabelMatrix:
        ids = tuple(t for t, keep in zip(self.trial_ids, mask) if keep)
        groups = tuple(g for g, keep in zip(self.groups, mask) if keep)
        return LabelMatrix(ids, self.test[mask], self.control[mask], groups, self.paired)


def label_matrix(trial_ids: Sequence[str], labels: dict[tuple[str, str, int], str],
                 repeats: int, groups: Sequence[str] = (), paired: bool = False
                 ) -> LabelMatrix:
    """Matrices from ``{(trial_id, role, repeat): label}`` (role ``test``/``control``);
    ``groups`` names each trial's sentence (the bootstrap's resampling unit); ``paired``
    for Q1 trials, which all have a control query."""
    shape = (len(trial_ids), repeats)
    test, control = np.full(shape, _MISSING, np.int8), np.full(shape, _MISSING, np.int8)
    for i, t in enumerate(trial_ids):
        for r in range(repeats):
            test[i, r] = CODES.get(labels.get((t, "test", r), ""), _MISSING)
            control[i, r] = CODES.get(labels.get((t, "control", r), ""), _MISSING)
    return LabelMatrix(tuple(trial_ids), test, control, tuple(groups), paired)


def harmonic(a: npt.ArrayLike, b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """2ab/(a+b), elementwise, 0 where a + b = 0 (NaN stays NaN)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(a + b > 0, 2 * a * b / (a + b), np.where(
            np.isnan(a + b), np.nan, 0.0)))


def _rates(weights: npt.NDArray[np.float64], m: LabelMatrix
           ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Acc and ASS per (resample, repeat): ``weights`` is (B, n) trial multiplicities."""
    pair = ((m.test >= 0) & (m.control >= 0)).astype(np.float64)
    valid = pair if m.paired else (m.test >= 0).astype(np.float64)
    correct = (m.test == CODES["C"]).astype(np.float64) * valid
    changed = (pair > 0) & (m.test != m.control)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = (weights @ correct) / (weights @ valid)
        ass = (weights @ changed.astype(np.float64)) / (weights @ pair)
    return acc, ass


@dataclass(frozen=True)
class Scores:
    """Acc, ASS, ARS (means over repeats) and the other labels' rates, with counts."""

    acc: float
    ass: float
    ars: float
    trap: float
    other: float
    n: int
    repeats: int
    missing: int


def score(m: LabelMatrix) -> Scores:
    """Eq. 1–3 per repeat, averaged over repeats (NaN where no trial has a label).

    Per repeat ``r``: ``Acc_r = N_C / N`` (eq. 1) and ``ASS_r = (1/N) Σ 𝕀[a_i^match ≠
    a_i^mismatch]`` (eq. 2) over the same ``N`` trials: for Q1 (a *paired* matrix, every
    trial with a control) those with both labels in repeat ``r``, so ARS's two terms
    describe one set of trials; for Q2 (no control) those with a test label.
    ``ARS_r = 2·Acc_r·ASS_r / (Acc_r + ASS_r)``, 0 when both are 0 (eq. 3). A missing
    answer (the model call failed) is excluded, not counted wrong.
    """
    if m.n == 0:
        nan = float("nan")
        return Scores(nan, nan, nan, nan, nan, 0, m.test.shape[1] if m.test.ndim == 2 else 0, 0)
    acc, ass = _rates(np.ones((1, m.n)), m)
    valid = np.maximum((m.test >= 0).sum(axis=0), 1)
    trap = ((m.test == CODES["T"]).sum(axis=0) / valid).mean()
    other = ((m.test == CODES["O"]).sum(axis=0) / valid).mean()
    return Scores(_mean(acc[0]), _mean(ass[0]), _mean(harmonic(acc[0], ass[0])), float(trap),
                  float(other), m.n, m.test.shape[1], int((m.test < 0).sum()))


def _mean(x: npt.NDArray[np.float64]) -> float:
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else float("nan")


def edi(cross: LabelMatrix, within: LabelMatrix) -> float:
    """Eq. 4: Acc_cross − Acc_within, per repeat, averaged."""
    a, _ = _rates(np.ones((1, cross.n)), cross)
    b, _ = _rates(np.ones((1, within.n)), within)
    return _mean(a[0] - b[0]) if cross.n and within.n else float("nan")


def _boot_ars(m: LabelMatrix, n_boot: int, rng: np.random.Generator
              ) -> npt.NDArray[np.float64]:
    """ARS of ``n_boot`` resamples of ``m``'s sentences (each brings all its trials)."""
    units, member = np.unique(np.asarray(m.groups), return_inverse=True)
    k = len(units)
    draws = rng.multinomial(k, np.full(k, 1.0 / k), size=n_boot).astype(np.float64)
    acc, ass = _rates(draws[:, member], m)  # a trial weighs as often as its sentence is drawn
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resample with no pair: NaN
        return np.nanmean(harmonic(acc, ass), axis=1)


def bootstrap_delta_ars(explicit: LabelMatrix, implicit: LabelMatrix, n_boot: int = 10_000,
                        seed: int = 0) -> tuple[float, float, float, float]:
    """Δ ARS (explicit − implicit), its 95 % percentile interval and two-sided p-value.

    §3.4, Table 5: ``ARS(explicit) − ARS(implicit)`` of one model and conflict type, over
    the levels whose sentences are explicit or implicit (L1 and L3 pooled; L2 uses neutral
    sentences). The interval is the percentile interval of 10,000 bootstrap resamples
    (Table 5: "95% bootstrap CIs (10,000 resamples)") that draw **sentences** with
    replacement within each condition, each drawn sentence bringing all its trials (every
    repeat and control with them). Trials of one sentence are not independent: L1 and L3
    ask about the same clips (§2.2), and one sentence is heard in three TTS settings (ESC),
    at five SNRs and two pairings (BSC) or in several voices (SIC); resampling trials as
    if independent would make the interval too narrow. The p-value is
    ``min(1, 2·min(P*(Δ ≤ 0), P*(Δ ≥ 0)))`` with ``(count + 1)/(B + 1)`` estimates, so it
    is never 0 (the smallest is ≈ 2e-4). The paper does not spell out its resampling unit
    or p-value; these are the choices here.
    """
    if explicit.n == 0 or implicit.n == 0:
        nan = float("nan")
        return nan, nan, nan, nan
    delta = score(explicit).ars - score(implicit).ars
    rng = np.random.default_rng(seed)
    boot = np.empty(0)
    for start in range(0, n_boot, 2000):  # chunks bound the (B, n) weight matrices
        size = min(2000, n_boot - start)
        chunk = _boot_ars(explicit, size, rng) - _boot_ars(implicit, size, rng)
        boot = np.concatenate([boot, chunk])
    boot = boot[~np.isnan(boot)]
    lo, hi = np.percentile(boot, [2.5, 97.5])
    b = len(boot)
    p = 2 * min((np.sum(boot <= 0) + 1) / (b + 1), (np.sum(boot >= 0) + 1) / (b + 1))
    return float(delta), float(lo), float(hi), float(min(1.0, p))
