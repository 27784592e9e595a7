"""Every metric pinned against scikit-learn, hand-worked cases and tied scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.interpolate import interp1d
from scipy.optimize import brentq
from sklearn.metrics import average_precision_score, f1_score, roc_auc_score, roc_curve

from madbench_common.benchmarks.madbench.eval import metrics as M


def _data(seed: int, n: int = 300, ties: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    s = rng.normal(size=n) + 0.8 * y
    return y, (np.round(s, 1) if ties else s)


def _brentq_eer(y: np.ndarray, s: np.ndarray) -> float:
    fpr, tpr, _ = roc_curve(y, s)
    return brentq(lambda x: 1.0 - x - interp1d(fpr, tpr)(x), 0.0, 1.0)


@pytest.mark.parametrize(("ours", "reference", "tol"), [
    (M.auc, roc_auc_score, 1e-12),
    (M.average_precision, average_precision_score, 1e-12),
    (M.eer_interpolated, _brentq_eer, 1e-9),
], ids=["auc_vs_sklearn", "average_precision_vs_sklearn", "interpolated_eer_vs_brentq"])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_metric_matches_its_reference(seed: int, ties: bool, ours: Any, reference: Any,
                                      tol: float) -> None:
    y, s = _data(seed, ties=ties)
    assert ours(y, s) == pytest.approx(reference(y, s), abs=tol)


def test_average_precision_hand_worked_with_tie() -> None:
    # thresholds 3 (1 fake: P 1, R ½), 2 (tie: 1 fake + 1 real: P ⅔, R 1) → ½·1 + ½·⅔
    assert M.average_precision([1, 1, 0, 0], [3, 2, 2, 1]) == pytest.approx(5 / 6)
    # a perfect ranking has AP 1; the worst has AP = the positive share at each step
    assert M.average_precision([0, 0, 1], [0.1, 0.2, 0.9]) == 1.0
    assert M.average_precision([1, 0, 0], [0.1, 0.2, 0.9]) == pytest.approx(1 / 3)


def test_auc_hand_worked_with_tie() -> None:
    # pairs (fake, real): (3>1) (3>2) (2=2 → ½) (2>1) → 3.5 / 4
    assert M.auc([1, 1, 0, 0], [3, 2, 2, 1]) == 0.875


def test_eer_hand_worked_separable() -> None:
    y, s = [0, 0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4, 0.5]
    assert M.eer_asvspoof(y, s) == 0.0
    assert M.eer_interpolated(y, s) == 0.0


def test_eer_hand_worked_one_error_each_side() -> None:
    # reals 1, 2, 5; fakes 3, 4, 0: at threshold 2.5 one real (5) passes, one fake (0) is missed
    y, s = [0, 0, 0, 1, 1, 1], [1, 2, 5, 3, 4, 0]
    assert M.eer_asvspoof(y, s) == pytest.approx(1 / 3)
    assert M.eer_interpolated(y, s) == pytest.approx(1 / 3)


def test_eer_all_tied_documents_the_two_conventions() -> None:
    y, s = [0, 0, 1, 1], [0.5, 0.5, 0.5, 0.5]
    # ASVspoof 5: bona fide trials pass first inside the tie: FRR hits 1 before FAR moves.
    assert M.eer_asvspoof(y, s) == 1.0
    # Interpolated: the tie is one diagonal ROC segment, crossing at 0.5.
    assert M.eer_interpolated(y, s) == 0.5


def _asvspoof_reference(bona: np.ndarray, spoof: np.ndarray) -> float:
    """A loop-based transcription of ASVspoof 5's compute_det_curve + compute_eer."""
    scores = np.concatenate([bona, spoof])
    labels = np.concatenate([np.ones(bona.size), np.zeros(spoof.size)])
    order = sorted(range(scores.size), key=lambda i: (scores[i], i))
    frr, far = [0.0], [1.0]
    miss, fa = 0, spoof.size
    for i in order:
        if labels[i] == 1:
            miss += 1
        else:
            fa -= 1
        frr.append(miss / bona.size)
        far.append(fa / spoof.size)
    k = int(np.argmin(np.abs(np.array(frr) - np.array(far))))
    return (frr[k] + far[k]) / 2


@pytest.mark.parametrize("seed", range(5))
def test_eer_asvspoof_matches_loop_reference(seed: int) -> None:
    y, s = _data(seed, ties=True)
    assert M.eer_asvspoof(y, s) == pytest.approx(_asvspoof_reference(-s[y == 0], -s[y == 1]))


def test_accuracy_and_macro_f1_match_sklearn() -> None:
    rng = np.random.default_rng(0)
    t, p = rng.integers(0, 4, 200), rng.integers(0, 4, 200)
    assert M.accuracy(t, p) == np.mean(t == p)
    assert M.macro_f1(t, p, 4) == pytest.approx(f1_score(t, p, average="macro"))
    assert M.confusion(t, p, 4).sum() == 200


def _brute_min_dcf(y: np.ndarray, s: np.ndarray, p: float = 0.05, cm: float = 1,
                   cf: float = 10) -> float:
    bona, spoof = -s[y == 0], -s[y == 1]
    best = np.inf
    for t in np.r_[-np.inf, np.sort(np.r_[bona, spoof]), np.inf]:
        miss = np.mean(bona < t)
        fa = np.mean(spoof >= t)
        best = min(best, cm * (1 - p) * miss + cf * p * fa)
    return best / min(cm * (1 - p), cf * p)


@pytest.mark.parametrize("seed", range(4))
def test_min_dcf_matches_brute_force(seed: int) -> None:
    y, s = _data(seed)
    assert M.min_dcf(y, s) == pytest.approx(_brute_min_dcf(y, s), abs=1e-12)


def test_act_dcf_hand_worked() -> None:
    # threshold on bona fide LLR = -log(1·0.95 / (10·0.05)) = -log 1.9 ≈ -0.642
    y = np.array([0, 0, 1, 1])
    llr = np.array([-2.0, 1.0, 2.0, 0.0])  # fake-vs-real LLRs; bona fide = negation
    # reals' bona LLRs 2, -1 → one miss (−1 < −0.642); fakes' −2, 0 → one false accept (0 ≥ −0.642)
    expected = (0.95 * 0.5 + 10 * 0.05 * 0.5) / min(10 * 0.05, 0.95)
    assert M.act_dcf(y, llr) == pytest.approx(expected)


def test_cllr_reference_points() -> None:
    y = np.array([0, 1] * 50)
    assert M.cllr(y, np.zeros(100)) == pytest.approx(1.0)
    assert M.cllr(y, np.where(y == 1, 30.0, -30.0)) < 1e-10
    llr = np.random.default_rng(0).normal(size=100)
    ref = 0.5 * (np.mean(np.log2(1 + np.exp(llr[y == 0])))
                 + np.mean(np.log2(1 + np.exp(-llr[y == 1]))))
    assert M.cllr(y, llr) == pytest.approx(ref)


def test_gaps_on_constructed_case() -> None:
    v = np.array(list("RSEQ") * 2)
    # speech scores: S perfectly above R (AUC 1); Q and E indistinguishable (AUC ½)
    speech = np.array([0.0, 1.0, 0.5, 0.5, 0.1, 0.9, 0.5, 0.5])
    # env scores: E above R (1), Q below S (0)
    env = np.array([0.0, 0.8, 1.0, 0.2, 0.1, 0.9, 0.7, 0.3])
    gaps = M.interference_gaps(speech, env, v)
    assert gaps["G_S"] == pytest.approx(1.0 - 0.5)
    assert gaps["G_E"] == pytest.approx(1.0 - 0.0)
    # Δ_E−S is a difference of protocol means of the two component tasks' AUCs (§5.2)
    assert M.delta_e_minus_s([1.0, 0.5], [0.25, 0.75]) == pytest.approx(0.75 - 0.5)
    with pytest.raises(ValueError, match="at least one protocol"):
        M.delta_e_minus_s([], [0.5])
    assert M.delta_pair(0.9, 0.6) == pytest.approx(0.3)


def test_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="both classes"):
        M.auc([1, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match="NaN"):
        M.auc([0, 1], [np.nan, 0.2])
