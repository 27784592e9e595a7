"""DEAF metrics (§2.5) on hand-worked cases: Acc, ASS, ARS, EDI, repeats, Δ ARS bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from madbench_common.deaf.metrics import (
    bootstrap_delta_ars,
    edi,
    harmonic,
    label_matrix,
    score,
)


def _m(test: list[str], control: list[str], repeats: int = 1):  # type: ignore[no-untyped-def]
    """Trials t0.. with labels per repeat: test/control strings like 'CT' per trial."""
    labels = {}
    for i, (a, b) in enumerate(zip(test, control)):
        for r in range(repeats):
            if a[r] != "-":
                labels[(f"t{i}", "test", r)] = a[r]
            if b[r] != "-":
                labels[(f"t{i}", "control", r)] = b[r]
    return label_matrix([f"t{i}" for i in range(len(test))], labels, repeats)


def test_acc_ass_ars_hand_worked() -> None:
    # test C T C O, control T T C T: Acc = 2/4; labels differ for t0 and t3: ASS = 2/4;
    # ARS = 2·0.5·0.5 / (0.5 + 0.5) = 0.5.
    s = score(_m(["C", "T", "C", "O"], ["T", "T", "C", "T"]))
    assert (s.acc, s.ass, s.ars) == (0.5, 0.5, 0.5)
    assert (s.trap, s.other, s.n) == (0.25, 0.25, 4)


def test_ars_is_the_harmonic_mean_and_zero_when_both_are_zero() -> None:
    # test C C C T, control C C T T: Acc = 3/4, ASS = 1/4, ARS = 2·.75·.25/1 = 0.375.
    s = score(_m(["C", "C", "C", "T"], ["C", "C", "T", "T"]))
    assert s.acc == 0.75 and s.ass == 0.25 and s.ars == pytest.approx(0.375)
    text_only = score(_m(["T", "T"], ["T", "T"]))  # reads the words twice: Acc 0, ASS 0
    assert (text_only.acc, text_only.ass, text_only.ars) == (0.0, 0.0, 0.0)
    assert harmonic(0.0, 0.0) == 0.0


def test_high_sensitivity_without_correctness_scores_low() -> None:
    # always changes its label, never correct: ASS 1, Acc 0 -> ARS 0 (§2.5)
    s = score(_m(["O", "T", "O"], ["T", "O", "T"]))
    assert (s.acc, s.ass, s.ars) == (0.0, 1.0, 0.0)


def test_metrics_are_averaged_over_repeats_not_pooled() -> None:
    # repeat 0: Acc 1/2, ASS 1/2 -> ARS 1/2; repeat 1: Acc 1, ASS 0 -> ARS 0. Mean ARS 0.25
    # (pooling first would give harmonic(0.75, 0.25) = 0.375).
    s = score(_m(["CC", "TC"], ["TC", "TC"], repeats=2))
    assert s.acc == 0.75 and s.ass == 0.25 and s.ars == pytest.approx(0.25)
    assert s.repeats == 2


def test_missing_answers_are_excluded_not_counted_wrong() -> None:
    s = score(_m(["C", "-", "T"], ["T", "C", "-"]))
    assert s.acc == 0.5 and s.missing == 1
    assert s.ass == 1.0  # only t0 has both labels, and they differ


def test_edi_is_cross_minus_within() -> None:
    cross = _m(["C", "C", "C", "T"], ["T"] * 4)
    within = _m(["C", "T", "T", "T"], ["T"] * 4)
    assert edi(cross, within) == pytest.approx(0.75 - 0.25)
    assert math.isnan(edi(cross, _m([], [])))


def test_delta_ars_bootstrap_clear_difference() -> None:
    explicit = _m(["C"] * 30, ["T"] * 30)  # ARS 1
    implicit = _m(["T"] * 30, ["T"] * 30)  # ARS 0
    delta, lo, hi, p = bootstrap_delta_ars(explicit, implicit, n_boot=2000, seed=1)
    assert delta == 1.0 and lo == hi == 1.0
    assert p == pytest.approx(2 / 2001)  # (0 + 1)/(B + 1), doubled: never exactly 0


def test_delta_ars_bootstrap_no_difference() -> None:
    rng = np.random.default_rng(0)
    test = ["CTO"[i] for i in rng.integers(0, 3, 200)]
    control = ["CTO"[i] for i in rng.integers(0, 3, 200)]
    a, b = _m(test[:100], control[:100]), _m(test[100:], control[100:])
    delta, lo, hi, p = bootstrap_delta_ars(a, b, n_boot=3000, seed=0)
    assert lo < delta < hi and lo < 0 < hi and p > 0.05


def test_bootstrap_is_seeded() -> None:
    a, b = _m(["C", "T", "C"], ["T", "T", "T"]), _m(["T", "C", "O"], ["T", "O", "O"])
    assert bootstrap_delta_ars(a, b, 500, 3) == bootstrap_delta_ars(a, b, 500, 3)
