"""DEAF metrics (§2.5) on hand-worked cases: Acc, ASS, ARS, EDI, repeats, Δ ARS bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest

from madbench_common.benchmarks.deaf.metrics import (
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


def _sentences(spec: dict[str, tuple[str, str, int]]):  # type: ignore[no-untyped-def]
    """Trials grouped by sentence: {sentence: (test label, control label, n trials)}."""
    labels, ids, groups = {}, [], []
    for sid, (test, control, n) in spec.items():
        for i in range(n):
            t = f"{sid}-{i}"
            labels[(t, "test", 0)], labels[(t, "control", 0)] = test, control
            ids.append(t)
            groups.append(sid)
    return label_matrix(ids, labels, 1, groups)


def test_delta_ars_interval_resamples_sentences_hand_checked() -> None:
    """Explicit: sentence A (4 trials, e.g. 2 clips at L1 and L3) always C with control O,
    sentence B (4 trials) always T with control T; implicit: one sentence, ARS 0.

    Point: Acc = ASS = 4/8, ARS = 0.5, Δ = 0.5. Resampling the two sentences gives AA
    (p = 1/4): ARS 1; AB (1/2): 0.5; BB (1/4): 0. So the 2.5th and 97.5th percentiles are 0
    and 1, and p = 2·P*(Δ ≤ 0) ≈ 2·(1/4) = 0.5. Resampling the 8 trials as if independent
    would give ARS = k/8 with k ~ Bin(8, 1/2): P(k ≤ 1) = 9/256 ≈ 3.5 % > 2.5 % > P(k = 0),
    so [0.125, 0.875] — too narrow."""
    explicit = _sentences({"A": ("C", "O", 4), "B": ("T", "T", 4)})
    implicit = _sentences({"Z": ("T", "T", 4)})
    delta, lo, hi, p = bootstrap_delta_ars(explicit, implicit, n_boot=10_000, seed=0)
    assert (delta, lo, hi) == (0.5, 0.0, 1.0)
    assert p == pytest.approx(0.5, abs=0.03)
    as_trials = label_matrix(explicit.trial_ids, {
        (t, role, 0): lab for t, g in zip(explicit.trial_ids, explicit.groups)
        for role, lab in (("test", "C" if g == "A" else "T"), ("control", "O" if g == "A"
                                                                   else "T"))}, 1)
    _, lo_t, hi_t, _ = bootstrap_delta_ars(as_trials, implicit, n_boot=10_000, seed=0)
    assert (lo_t, hi_t) == (0.125, 0.875)


def test_edi_per_level_from_trial_rows() -> None:
    """model_metrics groups BSC trials by level and Within/Cross: this project's L2x
    (neutral audio with a Within or a Cross claim of its own) gets its own EDI. Hand-worked:
    L1 cross C,C within C,T -> EDI 1 - 0.5 = 0.5; L2x cross C,T within C,C -> 0.5 - 1 = -0.5;
    L3 has no Within trial -> no EDI. Every Q1 trial has a control answer (eq. 2's pair)."""
    from madbench_common.benchmarks.deaf.rows import TrialRow, VerdictRow
    from madbench_common.benchmarks.deaf.stages_eval import model_metrics

    cases = [("L1", "cross", "C"), ("L1", "cross", "C"), ("L1", "within", "C"),
             ("L1", "within", "T"), ("L2x", "cross", "C"), ("L2x", "cross", "T"),
             ("L2x", "within", "C"), ("L2x", "within", "C"), ("L3", "cross", "T")]
    trials, verdicts = [], []
    for i, (level, subdim, label) in enumerate(cases):
        tid = f"{level}|q{i}"
        trials.append(TrialRow(trial_id=tid, conflict="bsc", level=level, question="q1",
                               subdim=subdim, condition="neutral", sentence_id=f"s{i}",
                               correct="DKITCHEN", trap="DLIVING"))
        verdicts += [VerdictRow(verdict_id=f"{tid}|{role}", model="m", trial_id=tid, role=role,
                                label=label if role == "test" else "C")
                     for role in ("test", "control")]
    rows = {(r.level, r.group, r.metric): r for r in model_metrics("m", trials, verdicts, 10)}
    assert rows[("L1", "all", "edi")].value == 0.5
    assert rows[("L2x", "all", "edi")].value == -0.5 and rows[("L2x", "all", "edi")].n == 4
    assert math.isnan(rows[("L2", "all", "edi")].value)  # type: ignore[arg-type]
    assert math.isnan(rows[("L3", "all", "edi")].value)  # type: ignore[arg-type]
    assert rows[("L2x", "within", "acc")].value == 1.0
    assert rows[("L2x", "cross", "acc")].value == 0.5


def test_acc_and_ass_over_the_same_trials() -> None:
    """Eq. 1-3: ARS combines Acc and ASS of one set of trials. Hand-worked, one repeat:
    t0 test C control T (changed), t1 test C control C, t2 test T with its control answer
    missing (the call failed). Over the pairs {t0, t1}: Acc 2/2 = 1, ASS 1/2, ARS 2/3;
    counting t2's test in Acc alone would give Acc 2/3 and ARS 4/7."""
    labels = {("t0", "test", 0): "C", ("t0", "control", 0): "T",
              ("t1", "test", 0): "C", ("t1", "control", 0): "C", ("t2", "test", 0): "T"}
    s = score(label_matrix(["t0", "t1", "t2"], labels, 1, paired=True))
    assert (s.acc, s.ass) == (1.0, 0.5) and s.ars == pytest.approx(2 / 3)
    q2 = score(label_matrix(["t0", "t1", "t2"], labels, 1))  # no pairs (Q2): every test label
    assert q2.acc == pytest.approx(2 / 3)
