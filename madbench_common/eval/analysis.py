"""From scored test rows to result records: per-task metrics, gaps, Δ_pair, ablation, generators.

Every record is a flat JSON-able dict; intervals are clip-paired bootstrap
percentile intervals (``*_lo``/``*_hi``), NaN when ``n_boot`` is 0. Binary-head
logits minus the training log-odds are used as LLRs for minDCF, actDCF and Cllr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from madbench_common.eval import metrics as M
from madbench_common.eval.bootstrap import bootstrap_metric, bootstrap_stat, weighted_auc
from madbench_common.eval.runner import GroupScores
from madbench_common.eval.tasks import TASKS, VARIANTS, generator_keys, task_labels

__all__ = [
    "ablation_records",
    "binary_metrics",
    "generator_records",
    "logo_records",
    "pair_records",
    "task_records",
    "variant_records",
]

F64 = npt.NDArray[np.float64]
Record = dict[str, Any]
WeightStat = Callable[[F64], F64]


def _ci(name: str, stat: WeightStat, clips: npt.ArrayLike, n_boot: int, seed: int) -> Record:
    if n_boot <= 0:
        n = np.asarray(clips).shape[0]
        return {name: float(stat(np.ones((1, n)))[0]), f"{name}_lo": np.nan, f"{name}_hi": np.nan}
    iv = bootstrap_stat(stat, clips, n_boot, seed)
    return {name: iv.point, f"{name}_lo": iv.lo, f"{name}_hi": iv.hi}


def _auc_stat(y: npt.ArrayLike, s: npt.ArrayLike, rows: npt.ArrayLike | None = None) -> WeightStat:
    sel = slice(None) if rows is None else np.asarray(rows)
    return lambda w: weighted_auc(y, s, w[:, sel])


def binary_metrics(y: npt.ArrayLike, s: F64, threshold: float | None, llr: F64 | None) -> Record:
    """AUC, both EERs, accuracy and macro-F1 at ``threshold``, and LLR metrics if given."""
    out: Record = {"auc": M.auc(y, s), "eer": M.eer_asvspoof(y, s),
                   "eer_interp": M.eer_interpolated(y, s), "n": int(np.size(y)),
                   "n_pos": int(np.sum(y)), "n_neg": int(np.size(y) - np.sum(y))}
    if threshold is not None:
        pred = (s >= threshold).astype(int)
        out |= {"acc": M.accuracy(y, pred), "macro_f1": M.macro_f1(y, pred, 2),
                "threshold": threshold}
    if llr is not None:
        out |= {"min_dcf": M.min_dcf(y, llr), "act_dcf": M.act_dcf(y, llr), "cllr": M.cllr(y, llr)}
    return out


def _eer_ci(y: npt.NDArray[np.int64], s: F64, clips: npt.ArrayLike, n_boot: int,
            seed: int) -> Record:
    def eer_of(i: npt.NDArray[np.int64]) -> float:
        return M.eer_asvspoof(y[i], s[i])

    iv = bootstrap_metric(eer_of, clips, n_boot, seed)
    return {"eer_lo": iv.lo, "eer_hi": iv.hi}


def _fourway_metrics(test: pd.DataFrame, logp: F64) -> Record:
    _, y = task_labels(test, "fourway")
    pred = logp.argmax(axis=1)
    return {"acc": M.accuracy(y, pred), "macro_f1": M.macro_f1(y, pred, 4),
            "auc": M.auc(y > 0, -logp[:, 0]), "confusion": M.confusion(y, pred, 4).tolist(),
            "classes": list(VARIANTS), "n": int(y.size)}


def _key(g: GroupScores) -> Record:
    return {"protocol": g.protocol, "mode": g.mode, "pairing": g.pairing}


def task_records(groups: list[GroupScores], n_boot: int = 1000, seed: int = 0) -> list[Record]:
    """One record per (group, task): the paper's per-task metrics with AUC/EER intervals."""
    out = []
    for g in groups:
        clips = g.test["clip_id"].to_numpy()
        for task, s in g.scores.items():
            if task.startswith("logo:"):
                continue
            if TASKS[task].n_classes > 2:
                out.append(_key(g) | {"task": task} | _fourway_metrics(g.test, s))
                continue
            mask, y = task_labels(g.test, task)
            if not mask.any() or y.min() == y.max():
                continue
            llr = s[mask] - g.prior_logodds.get(task, 0.0) if g.llr_like else None
            rec = _key(g) | {"task": task} | binary_metrics(y, s[mask], g.thresholds.get(task), llr)
            rec |= _ci("auc", _auc_stat(y, s[mask]), clips[mask], n_boot, seed)
            if task == "binary" and n_boot > 0:
                rec |= _eer_ci(y, s[mask], clips[mask], max(n_boot // 5, 50), seed)
            out.append(rec)
    return out


def _variant_auc_stat(v: npt.NDArray[np.str_], s: F64, pos: str, neg: str) -> WeightStat:
    rows = np.flatnonzero(np.isin(v, (pos, neg)))
    return _auc_stat(v[rows] == pos, s[rows], rows)


def variant_records(groups: list[GroupScores], n_boot: int = 1000, seed: int = 0) -> list[Record]:
    """Per paired group: AUC of each variant vs R (binary head), Δ_E−S, G_S and G_E."""
    out = []
    for g in (g for g in groups if g.pairing == "paired" and "binary" in g.scores):
        v, clips = g.test["variant"].astype(str).to_numpy(), g.test["clip_id"].to_numpy()
        b = g.scores["binary"]
        rec = _key(g)
        for x in ("S", "E", "Q"):
            rec |= _ci(f"auc_{x}R", _variant_auc_stat(v, b, x, "R"), clips, n_boot, seed)
        es = _diff(_variant_auc_stat(v, b, "E", "R"), _variant_auc_stat(v, b, "S", "R"))
        rec |= _ci("delta_E_S", es, clips, n_boot, seed)
        if "speech" in g.scores and "env" in g.scores:
            sp, en = g.scores["speech"], g.scores["env"]
            gs = _diff(_variant_auc_stat(v, sp, "S", "R"), _variant_auc_stat(v, sp, "Q", "E"))
            ge = _diff(_variant_auc_stat(v, en, "E", "R"), _variant_auc_stat(v, en, "Q", "S"))
            rec |= _ci("G_S", gs, clips, n_boot, seed) | _ci("G_E", ge, clips, n_boot, seed)
        out.append(rec)
    return out


def _diff(a: WeightStat, b: WeightStat) -> WeightStat:
    return lambda w: a(w) - b(w)


def _aligned(a: GroupScores, b: GroupScores) -> npt.NDArray[np.int64]:
    """Positions in ``b.test`` of ``a.test``'s sample ids (raises if any is missing)."""
    pos = pd.Index(b.test["sample_id"]).get_indexer(a.test["sample_id"])
    if (pos < 0).any():
        raise ValueError(f"{b.mode}/{b.pairing} lacks test samples scored in {a.mode}/{a.pairing}")
    return pos


def _paired_diff(a: GroupScores, b: GroupScores, task: str, name: str, n_boot: int,
                 seed: int) -> Record:
    """AUC of ``task`` in group ``a`` minus in ``b`` over the same test samples."""
    pos = _aligned(a, b)
    mask, y = task_labels(a.test, task)
    rows = np.flatnonzero(mask)
    sa, sb = a.scores[task][rows], b.scores[task][pos][rows]
    stat = _diff(_auc_stat(y, sa, rows), _auc_stat(y, sb, rows))
    rec = {"task": task, f"auc_{a.mode}_{a.pairing}": M.auc(y, sa),
           f"auc_{b.mode}_{b.pairing}": M.auc(y, sb), "n": int(rows.size)}
    return rec | _ci(name, stat, a.test["clip_id"].to_numpy(), n_boot, seed)


def _find(groups: list[GroupScores], protocol: str, mode: str, pairing: str) -> GroupScores | None:
    return next((g for g in groups if (g.protocol, g.mode, g.pairing) == (protocol, mode, pairing)),
                None)


def pair_records(groups: list[GroupScores], n_boot: int = 1000, seed: int = 0) -> list[Record]:
    """Δ_pair = AUC_P − AUC_Sh for D-R, S-R and D-S, per protocol and mode."""
    out = []
    for p in (g for g in groups if g.pairing == "paired"):
        sh = _find(groups, p.protocol, p.mode, "shuffled")
        if sh is None:
            continue
        for task in (t for t in TASKS if TASKS[t].scene and t in p.scores and t in sh.scores):
            rec = _paired_diff(p, sh, task, "delta_pair", n_boot, seed)
            out.append({"protocol": p.protocol, "mode": p.mode} | rec)
    return out


def ablation_records(groups: list[GroupScores], n_boot: int = 1000, seed: int = 0,
                     base: str = "A", full: str = "AV") -> list[Record]:
    """Modality ablation: AUC(A-V) − AUC(A) per protocol and binary task."""
    out = []
    for a in (g for g in groups if g.mode == base and g.pairing == "paired"):
        av = _find(groups, a.protocol, full, "paired")
        if av is None:
            continue
        for task in (t for t in ("binary", "speech", "env") if t in a.scores and t in av.scores):
            rec = _paired_diff(av, a, task, "delta_AV_A", n_boot, seed)
            out.append({"protocol": a.protocol} | rec)
    return out


def generator_records(groups: list[GroupScores]) -> list[Record]:
    """Per generator: AUC/EER of its test fakes vs all test reals (binary head), N per cell."""
    out = []
    for g in (g for g in groups if g.pairing == "paired" and "binary" in g.scores):
        keys, real = generator_keys(g.test), g.test["variant"].astype(str).to_numpy() == "R"
        for gen in sorted(set().union(*keys)):
            fake = np.array([gen in k for k in keys])
            rows = fake | real
            y, s = fake[rows].astype(int), g.scores["binary"][rows]
            out.append(_key(g) | {"generator": gen, "auc": M.auc(y, s),
                                  "eer": M.eer_asvspoof(y, s), "n_fake": int(fake.sum()),
                                  "n_real": int(real.sum())})
    return out


def logo_records(groups: list[GroupScores]) -> list[Record]:
    """Leave-one-generator-out: held-out AUC vs the all-generator head's AUC on the same rows."""
    out = []
    for g in (g for g in groups if "binary" in g.scores):
        keys, real = generator_keys(g.test), g.test["variant"].astype(str).to_numpy() == "R"
        for head in (k for k in g.scores if k.startswith("logo:")):
            gen = head.removeprefix("logo:")
            fake = np.array([gen in k for k in keys])
            if not fake.any():
                continue
            rows = fake | real
            y = fake[rows].astype(int)
            held, seen = M.auc(y, g.scores[head][rows]), M.auc(y, g.scores["binary"][rows])
            out.append(_key(g) | {"generator": gen, "auc_held_out": held, "auc_seen": seen,
                                  "drop": seen - held, "n_fake": int(fake.sum()),
                                  "n_real": int(real.sum())})
    return out
