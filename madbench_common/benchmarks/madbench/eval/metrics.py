"""Detection metrics under one protocol: AUC, EER (two ways), accuracy, F1, DCF, Cllr, gaps.

Score convention: **higher score = more likely fake** (label 1 = fake, 0 = real)
everywhere in MADBench. The ASVspoof 5 functions use the opposite polarity
(higher = bona fide), so :func:`eer_asvspoof`, :func:`min_dcf`, :func:`act_dcf`
and :func:`cllr` negate scores before applying the ASVspoof 5 definitions. The two EERs
differ on ties (:func:`eer_asvspoof`, :func:`eer_interpolated`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy.stats import rankdata

__all__ = [
    "ASVSPOOF5_COSTS",
    "accuracy",
    "act_dcf",
    "auc",
    "auc_between",
    "average_precision",
    "cllr",
    "confusion",
    "delta_e_minus_s",
    "delta_pair",
    "eer_asvspoof",
    "eer_interpolated",
    "eer_threshold",
    "interference_gaps",
    "macro_f1",
    "min_dcf",
    "roc_points",
]

FloatArray = npt.NDArray[np.float64]
ASVSPOOF5_COSTS = {"p_spoof": 0.05, "c_miss": 1.0, "c_fa": 10.0}
"""ASVspoof 5 track 1 cost model (evaluation plan): P_spoof, C_miss, C_fa."""


def _split(labels: npt.ArrayLike, scores: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(real scores, fake scores); raises unless both classes are present."""
    y = np.asarray(labels).astype(bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"labels {y.shape} and scores {s.shape} must be equal 1-d shapes")
    if y.all() or not y.any():
        raise ValueError("both classes (real and fake) are needed")
    if not np.isfinite(s).all():
        raise ValueError("scores contain NaN or inf")
    return s[~y], s[y]


def auc(labels: npt.ArrayLike, scores: npt.ArrayLike) -> float:
    """ROC AUC via mid-ranks (ties count ½): the Mann–Whitney probability
    ``P(s_fake > s_real) + ½ P(s_fake = s_real)``, identical to scikit-learn's
    ``roc_auc_score``."""
    neg, pos = _split(labels, scores)
    ranks = rankdata(np.concatenate([pos, neg]))
    u = ranks[: pos.size].sum() - pos.size * (pos.size + 1) / 2
    return float(u / (pos.size * neg.size))


def average_precision(labels: npt.ArrayLike, scores: npt.ArrayLike) -> float:
    """AP of the fake class: ``Σ (R_n − R_{n−1}) P_n`` over distinct thresholds.

    The step-wise area under the precision–recall curve with fake as the positive class,
    over the distinct score thresholds in decreasing order (tied scores enter together, no
    interpolation), identical to scikit-learn's ``average_precision_score``. Unlike AUC
    and EER it depends on the class balance (a random ranking scores the fake share)."""
    real, fake = _split(labels, scores)
    tps, fps, _ = _ranked(real, fake)
    recall = np.r_[0.0, tps / fake.size]
    return float(np.sum(np.diff(recall) * tps / (tps + fps)))


def auc_between(pos_scores: npt.ArrayLike, neg_scores: npt.ArrayLike) -> float:
    """AUC of ``pos_scores`` (treated as fake) against ``neg_scores`` (treated as real)."""
    pos, neg = np.asarray(pos_scores, float), np.asarray(neg_scores, float)
    labels = np.r_[np.ones(pos.size), np.zeros(neg.size)]
    return auc(labels, np.r_[pos, neg])


def _det_curve(bona: FloatArray, spoof: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """ASVspoof 5 ``compute_det_curve`` (higher = bona fide): FRR, FAR, thresholds."""
    all_scores = np.concatenate([bona, spoof])
    order = np.argsort(all_scores, kind="mergesort")
    is_bona = np.concatenate([np.ones(bona.size), np.zeros(spoof.size)])[order]
    bona_below = np.cumsum(is_bona)
    spoof_above = spoof.size - (np.arange(1, all_scores.size + 1) - bona_below)
    frr = np.concatenate([[0.0], bona_below / bona.size])
    far = np.concatenate([[1.0], spoof_above / spoof.size])
    thresholds = np.concatenate([[all_scores[order[0]] - 0.001], all_scores[order]])
    return frr, far, thresholds


def eer_asvspoof(labels: npt.ArrayLike, scores: npt.ArrayLike) -> float:
    """EER exactly as the ASVspoof 5 evaluation package computes it (``compute_eer``).

    Bona fide (negated real) scores are concatenated before spoof scores and sorted with a
    *stable* mergesort, so inside a group of tied scores every bona fide trial is passed
    before any spoof trial: the threshold walks through a tie one trial at a time, and the
    DET curve has a step inside the tie. The EER is the mean of FRR and FAR at the single
    point where ``|FRR − FAR|`` is smallest (first one on equality). With ties the value
    therefore depends on that ordering convention (:func:`eer_interpolated` does not)."""
    real, fake = _split(labels, scores)
    frr, far, _ = _det_curve(-real, -fake)
    i = int(np.argmin(np.abs(frr - far)))
    return float((frr[i] + far[i]) / 2)


def _ranked(real: FloatArray, fake: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Cumulative true- and false-positive counts at each distinct score, highest first."""
    s = np.concatenate([fake, real])
    y = np.concatenate([np.ones(fake.size), np.zeros(real.size)])
    order = np.argsort(-s, kind="mergesort")
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), s.size - 1]
    return np.cumsum(y)[last], np.cumsum(1 - y)[last], s[last]


def roc_points(labels: npt.ArrayLike,
               scores: npt.ArrayLike) -> tuple[FloatArray, FloatArray, FloatArray]:
    """ROC vertices (FPR, TPR, threshold), one per distinct score, from (0, 0) to (1, 1)."""
    real, fake = _split(labels, scores)
    tps, fps, thresholds = _ranked(real, fake)
    tpr = np.r_[0.0, tps / fake.size]
    fpr = np.r_[0.0, fps / real.size]
    return fpr, tpr, np.r_[np.inf, thresholds]


def eer_interpolated(labels: npt.ArrayLike, scores: npt.ArrayLike) -> float:
    """EER where the linearly interpolated ROC crosses FNR = FPR (tie-order invariant).

    Each distinct score is one threshold (a tie moves FPR and FNR together, the ROC's
    diagonal segment); FPR and FNR are interpolated linearly between the two ROC vertices
    that bracket ``FNR = FPR``: the usual ``brentq(1 − x − interp(fpr, tpr)(x))`` EER."""
    fpr, tpr, _ = roc_points(labels, scores)
    fnr = 1.0 - tpr
    i = int(np.flatnonzero(fnr <= fpr)[0])
    if i == 0 or fnr[i] == fpr[i]:
        return float(fpr[i])
    d0, d1 = fnr[i - 1] - fpr[i - 1], fnr[i] - fpr[i]
    t = d0 / (d0 - d1)
    return float(fpr[i - 1] + t * (fpr[i] - fpr[i - 1]))


def eer_threshold(labels: npt.ArrayLike, scores: npt.ArrayLike) -> float:
    """A decision threshold at the EER point: predict fake when ``score >= threshold``."""
    fpr, tpr, thr = roc_points(labels, scores)
    i = int(np.argmin(np.abs((1.0 - tpr) - fpr)))
    return float(thr[max(i, 1)])


def accuracy(y_true: npt.ArrayLike, y_pred: npt.ArrayLike) -> float:
    """Fraction of exact matches."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    return float(np.mean(t == p))


def confusion(y_true: npt.ArrayLike, y_pred: npt.ArrayLike,
              n_classes: int) -> npt.NDArray[np.int64]:
    """Confusion counts, rows = true class, columns = predicted class."""
    t, p = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    return np.bincount(t * n_classes + p, minlength=n_classes * n_classes).reshape(
        n_classes, n_classes)


def macro_f1(y_true: npt.ArrayLike, y_pred: npt.ArrayLike, n_classes: int | None = None) -> float:
    """Unweighted mean of per-class F1 over the classes present in ``y_true`` ∪ ``y_pred``."""
    t, p = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    k = n_classes or int(max(t.max(), p.max())) + 1
    cm = confusion(t, p, k)
    tp = np.diag(cm).astype(float)
    denom = cm.sum(0) + cm.sum(1)
    present = denom > 0
    return float(np.mean(2 * tp[present] / denom[present]))


def min_dcf(labels: npt.ArrayLike, scores: npt.ArrayLike, p_spoof: float = 0.05,
            c_miss: float = 1.0, c_fa: float = 10.0) -> float:
    """Normalised minimum DCF as ASVspoof 5 defines it, over the package's DET thresholds."""
    real, fake = _split(labels, scores)
    frr, far, _ = _det_curve(-real, -fake)
    p_target = 1.0 - p_spoof
    c_det = c_miss * frr * p_target + c_fa * far * p_spoof
    return float(c_det.min() / min(c_miss * p_target, c_fa * p_spoof))


def act_dcf(labels: npt.ArrayLike, llrs: npt.ArrayLike, p_spoof: float = 0.05,
            c_miss: float = 1.0, c_fa: float = 10.0) -> float:
    """Normalised actual DCF at the Bayes threshold for LLR-like scores (ASVspoof 5).

    ``llrs`` are fake-vs-real log-likelihood ratios; bona fide LLRs are their negation.
    """
    real, fake = _split(labels, llrs)
    bona, spoof = -real, -fake
    threshold = -np.log(c_miss * (1 - p_spoof) / (c_fa * p_spoof))
    miss = np.mean(bona < threshold)
    fa = np.mean(spoof >= threshold)
    cost = c_miss * (1 - p_spoof) * miss + c_fa * p_spoof * fa
    return float(cost / min(c_fa * p_spoof, c_miss * (1 - p_spoof)))


def cllr(labels: npt.ArrayLike, llrs: npt.ArrayLike) -> float:
    """Log-likelihood-ratio cost in bits (ASVspoof 5 ``calculate_CLLR``), overflow-safe."""
    real, fake = _split(labels, llrs)
    bona, spoof = -real, -fake
    return float(0.5 * (np.mean(np.logaddexp(0, -bona)) + np.mean(np.logaddexp(0, spoof)))
                 / np.log(2))


def _variant_auc(scores: FloatArray, variants: npt.NDArray[np.str_], pos: str, neg: str) -> float:
    return auc_between(scores[variants == pos], scores[variants == neg])


def delta_e_minus_s(auc_env: Sequence[float], auc_speech: Sequence[float]) -> float:
    """Δ_E−S = mean AUC_E − mean AUC_S over the protocols (paper §5.2): > 0 when
    environmental manipulation is easier to detect.

    ``auc_env[i]`` is the environment task's AUC ({E,Q} vs {R,S}, head H_E) and
    ``auc_speech[i]`` the speech task's AUC ({S,Q} vs {R,E}, head H_S) on protocol ``i``.
    Table 3, ImageBind: (0.898 + 0.896 + 0.919)/3 − (0.797 + 0.803 + 0.793)/3 ≈ 0.106.
    """
    e, s = np.asarray(auc_env, float), np.asarray(auc_speech, float)
    if e.size == 0 or s.size == 0:
        raise ValueError("Δ_E−S needs at least one protocol's AUC_E and AUC_S")
    return float(e.mean() - s.mean())


def interference_gaps(speech_scores: npt.ArrayLike, env_scores: npt.ArrayLike,
                      variants: Sequence[str] | npt.ArrayLike) -> dict[str, float]:
    """G_S = AUC(S vs R) − AUC(Q vs E) on speech scores; G_E = AUC(E vs R) − AUC(Q vs S) on env.

    Each compares detecting one manipulated component when the other is authentic
    against when the other is also fake: a positive gap means interference.
    """
    v = np.asarray(variants).astype(str)
    s, e = np.asarray(speech_scores, float), np.asarray(env_scores, float)
    return {
        "G_S": _variant_auc(s, v, "S", "R") - _variant_auc(s, v, "Q", "E"),
        "G_E": _variant_auc(e, v, "E", "R") - _variant_auc(e, v, "Q", "S"),
    }


def delta_pair(auc_paired: float, auc_shuffled: float) -> float:
    """Δ_pair = AUC_P − AUC_Sh: how much a model uses audio–video scene correspondence."""
    return float(auc_paired - auc_shuffled)
