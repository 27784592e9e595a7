"""From scored test rows to result records: per-task metrics, protocol means, gaps, Δ_pair.

Every record is a flat JSON-able dict naming its ``source`` (``head`` or ``native``),
input ``mode`` and, where it has one, ``protocol``; ``<name>_lo``/``<name>_hi`` are
clip-paired bootstrap 95% percentile intervals (NaN when ``n_boot`` is 0). Rows without
a usable score are excluded and counted (``n_excluded``, ``excluded_rate``). Each
record function gives the paper's definition it implements (§5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from madbench_common.benchmarks.madbench.eval import metrics as M
from madbench_common.benchmarks.madbench.eval.fit import GroupScores
from madbench_common.benchmarks.madbench.eval.tasks import (
    CORE_PROTOCOLS,
    SC_CONDITIONS,
    SC_PROTOCOL,
    condition_mask,
)
from madbench_common.benchmarks.madbench.eval.tasks import generator_keys as _generator_keys
from madbench_common.benchmarks.madbench.eval.views import (
    View,
    estimate,
    mean_of,
    task_view,
    variant_view,
)

__all__ = [
    "SUMMARY_METRICS",
    "ablation_records",
    "component_records",
    "generator_records",
    "logo_records",
    "pair_records",
    "robustness_records",
    "summary_records",
    "task_records",
    "variant_records",
    "view_metrics",
]

F64 = npt.NDArray[np.float64]
Record = dict[str, Any]
SUMMARY_METRICS = (("binary", "auc"), ("binary", "eer"), ("binary", "ap"), ("fourway", "acc"),
                   ("fourway", "macro_f1"), ("speech", "auc"), ("speech", "ap"), ("env", "auc"),
                   ("env", "ap"))
"""(task, metric) pairs averaged over protocols: Tables 2, 3 and 5."""


def _cell(name: str, est: Record) -> Record:
    return {name: est["value"], f"{name}_lo": est["lo"], f"{name}_hi": est["hi"]}


def _key(g: GroupScores) -> Record:
    return {"source": g.source, "protocol": g.protocol, "mode": g.mode, "pairing": g.pairing}


def _counts(views: list[View]) -> Record:
    total = sum(v.n_total for v in views)
    excluded = sum(v.n_excluded for v in views)
    clips = {str(c) for v in views for c in v.clips}  # source clips the rows come from
    return {"n": sum(v.n for v in views), "n_clips": len(clips), "n_excluded": excluded,
            "excluded_rate": excluded / total if total else float("nan")}


def _binary_metrics(view: View, task: str, n_boot: int, seed: int) -> Record:
    y, s = view.binary_labels(), view.ranking()
    rec: Record = {"eer": M.eer_asvspoof(y, s), "eer_interp": M.eer_interpolated(y, s)}
    if task == "binary":
        est = estimate([view], "eer", n_boot, seed)
        rec |= {"eer_lo": est["lo"], "eer_hi": est["hi"]}
    pred = view.prediction()
    if pred is not None:
        rec |= {"acc": M.accuracy(y, pred), "macro_f1": M.macro_f1(y, pred, 2),
                "threshold": view.threshold}
    if view.llr is not None:
        rec |= {"min_dcf": M.min_dcf(y, view.llr), "act_dcf": M.act_dcf(y, view.llr),
                "cllr": M.cllr(y, view.llr)}
    return rec


def _fourway_metrics(view: View, n_boot: int, seed: int) -> Record:
    pred = view.prediction()
    assert pred is not None
    return (_cell("acc", estimate([view], "acc", n_boot, seed))
            | _cell("macro_f1", estimate([view], "macro_f1", n_boot, seed))
            | {"confusion": M.confusion(view.y, pred, 4).tolist(), "classes": list("RSEQ")})


def view_metrics(view: View, task: str, n_boot: int, seed: int) -> Record:
    """Every metric of one view: AUC (with interval), EER, accuracy, F1, LLR metrics."""
    y = view.binary_labels()
    rec = _counts([view]) | {"n_pos": int(y.sum()), "n_neg": int(y.size - y.sum())}
    rec |= _cell("auc", estimate([view], "auc", n_boot, seed))
    if view.multiclass:
        return rec | _fourway_metrics(view, n_boot, seed)
    rec |= _cell("ap", estimate([view], "ap", n_boot, seed))
    return rec | _binary_metrics(view, task, n_boot, seed)


def _group_views(g: GroupScores) -> Iterator[tuple[str, str, View | None]]:
    for task in (t for t in g.scores if not t.startswith("logo:")):
        if task == "scene":
            for cond in SC_CONDITIONS:
                yield task, cond, task_view(g, task, condition_mask(g.test, cond))
        else:
            yield task, "", task_view(g, task)


def task_records(groups: list[GroupScores], n_boot: int = 1000, seed: int = 0) -> list[Record]:
    """One record per (group, task[, scene condition]) with the task's scored test rows."""
    out = []
    for g in groups:
        for task, cond, view in _group_views(g):
            if view is not None:
                extra = {"condition": cond} if cond else {}
                rec = _key(g) | {"task": task} | extra
                out.append(rec | view_metrics(view, task, n_boot, seed))
    return out


def _core_paired(groups: list[GroupScores]) -> dict[tuple[str, str], list[GroupScores]]:
    """(source, mode) → its core-protocol paired groups, in the paper's protocol order."""
    order = {p: i for i, p in enumerate(CORE_PROTOCOLS)}
    out: dict[tuple[str, str], list[GroupScores]] = {}
    for g in groups:
        if g.protocol != SC_PROTOCOL and g.pairing == "paired":
            out.setdefault((g.source, g.mode), []).append(g)
    return {k: sorted(v, key=lambda g: (order.get(g.protocol, 99), g.protocol))
            for k, v in out.items()}


def _task_view(g: GroupScores, task: str) -> View | None:
    return task_view(g, task)


def _present(gs: list[GroupScores], make: Callable[[GroupScores], View | None]
             ) -> tuple[list[str], list[View]]:
    pairs = [(g.protocol, make(g)) for g in gs]
    kept = [(p, v) for p, v in pairs if v is not None]
    return [p for p, _ in kept], [v for _, v in kept]


def summary_records(groups: list[GroupScores], n_boot: int = 1000, seed: int = 0) -> list[Record]:
    """Mean over the core protocols of each (task, metric) in :data:`SUMMARY_METRICS`.

    Tables 2, 3, 5: "Mean denotes the average across protocols", over the core protocols
    present."""
    out = []
    for (source, mode), gs in _core_paired(groups).items():
        for task, metric in SUMMARY_METRICS:
            protos, views = _present(gs, partial(_task_view, task=task))
            if not views or (metric in ("acc", "macro_f1") and views[0].prediction() is None):
                continue
            est = estimate(views, metric, n_boot, seed)
            out.append({"source": source, "mode": mode, "task": task, "metric": metric,
                        "protocols": protos} | _cell("value", est) | _counts(views))
    return out


def _diff_of_means(k: int) -> Callable[[F64], F64]:
    return lambda v: mean_of(v[:, :k]) - mean_of(v[:, k:])


def _gap(gs: list[GroupScores], task: str, first: tuple[str, str], second: tuple[str, str],
         n_boot: int, seed: int) -> tuple[Record, Record]:
    """Per-protocol and mean gap AUC(first) − AUC(second) on ``task``'s scores."""
    per: Record = {}
    a_all, b_all = [], []
    for g in gs:
        a, b = variant_view(g, task, *first), variant_view(g, task, *second)
        if a is not None and b is not None:
            per[g.protocol] = estimate([a, b], "auc", n_boot, seed, _diff_of_means(1))
            a_all.append(a)
            b_all.append(b)
    if not a_all:
        return per, {}
    return per, estimate(a_all + b_all, "auc", n_boot, seed, _diff_of_means(len(a_all)))


def _delta_e_s(gs: list[GroupScores], n_boot: int, seed: int) -> Record:
    env, speech = [], []
    for g in gs:
        e, s = task_view(g, "env"), task_view(g, "speech")
        if e is not None and s is not None:
            env.append(e)
            speech.append(s)
    if not env:
        return {}
    views = env + speech
    return _cell("delta_E_S", estimate(views, "auc", n_boot, seed, _diff_of_means(len(env))))


def component_records(groups: list[GroupScores], n_boot: int = 1000,
                      seed: int = 0) -> list[Record]:
    """Table 3's diagnostics per (source, mode): Δ_E−S, and G_S, G_E per protocol and mean.

    §5.2: Δ_E−S = mean over protocols of AUC_E − mean over protocols of AUC_S, where AUC_E
    is the environment task ({E,Q} vs {R,S}, head H_E) and AUC_S the speech task ({S,Q} vs
    {R,E}, head H_S); G_S = AUC(S vs R) − AUC(Q vs E) on the speech task's scores and
    G_E = AUC(E vs R) − AUC(Q vs S) on the environment task's scores."""
    out = []
    for (source, mode), gs in _core_paired(groups).items():
        gs_per, gs_mean = _gap(gs, "speech", ("S", "R"), ("Q", "E"), n_boot, seed)
        ge_per, ge_mean = _gap(gs, "env", ("E", "R"), ("Q", "S"), n_boot, seed)
        key = {"source": source, "mode": mode}
        for proto in [g.protocol for g in gs]:
            rec = key | {"protocol": proto}
            rec |= _cell("G_S", gs_per[proto]) if proto in gs_per else {}
            rec |= _cell("G_E", ge_per[proto]) if proto in ge_per else {}
            out.append(rec)
        mean = key | {"protocol": "mean"} | _delta_e_s(gs, n_boot, seed)
        mean |= (_cell("G_S", gs_mean) if gs_mean else {}) | (_cell("G_E", ge_mean) if ge_mean
                                                               else {})
        out.append(mean)
    return out


def variant_records(groups: list[GroupScores], n_boot: int = 1000, seed: int = 0) -> list[Record]:
    """Diagnostics only: AUC of each fake variant vs R under the binary task's scores."""
    out = []
    for gs in _core_paired(groups).values():
        for g in gs:
            cells: Record = {}
            for x in ("S", "E", "Q"):
                view = variant_view(g, "binary", x, "R")
                if view is not None:
                    cells |= _cell(f"auc_{x}R", estimate([view], "auc", n_boot, seed))
            if cells:
                out.append(_key(g) | cells)
    return out


def _find(groups: list[GroupScores], source: str, mode: str, pairing: str) -> GroupScores | None:
    return next((g for g in groups if (g.source, g.protocol, g.mode, g.pairing)
                 == (source, SC_PROTOCOL, mode, pairing)), None)


def _aligned_views(p: GroupScores, sh: GroupScores, cond: str) -> tuple[View, View] | None:
    """P and Sh views over the same test rows: those usable in both."""
    pos = pd.Index(sh.test["sample_id"].astype(str)).get_indexer(p.test["sample_id"].astype(str))
    s_sh = np.full(len(p.test), np.nan)
    s_sh[pos >= 0] = sh.scores["scene"][pos[pos >= 0]]
    rows = condition_mask(p.test, cond) & np.isfinite(s_sh) & np.isfinite(p.scores["scene"])
    shadow = GroupScores(p.protocol, p.mode, "shuffled", p.test, {"scene": s_sh},
                         p.thresholds, p.prior_logodds, llr_like=sh.llr_like, source=p.source)
    vp, vs = task_view(p, "scene", rows), task_view(shadow, "scene", rows)
    return (vp, vs) if vp is not None and vs is not None else None


def _pair_record(p: GroupScores, sh: GroupScores | None, cond: str, n_boot: int,
                 seed: int) -> Record | None:
    key = {"source": p.source, "mode": p.mode, "condition": cond}
    total = task_view(p, "scene", condition_mask(p.test, cond))
    if total is None:
        return None
    views = _aligned_views(p, sh, cond) if sh is not None else None
    if views is None:
        return (key | _cell("auc_P", estimate([total], "auc", n_boot, seed))
                | _cell("ap_P", estimate([total], "ap", n_boot, seed)) | _counts([total]))
    vp, vs = views
    rec = key | _cell("auc_P", estimate([vp], "auc", n_boot, seed))
    rec |= _cell("auc_Sh", estimate([vs], "auc", n_boot, seed))
    rec |= _cell("ap_P", estimate([vp], "ap", n_boot, seed))
    rec |= _cell("ap_Sh", estimate([vs], "ap", n_boot, seed))
    rec |= _cell("delta_pair", estimate([vp, vs], "auc", n_boot, seed, _diff_of_means(1)))
    return rec | {"n": vp.n, "n_excluded": total.n_total - vp.n,
                  "excluded_rate": (total.n_total - vp.n) / total.n_total}


def pair_records(groups: list[GroupScores], n_boot: int = 1000, seed: int = 0) -> list[Record]:
    """Table 4 per (source, mode, condition): AUC_P, AUC_Sh and Δ_pair = AUC_P − AUC_Sh.

    §5.3: on the same test rows scored once with the intended and once with the shuffled
    video."""
    out = []
    for p in groups:
        if p.protocol == SC_PROTOCOL and p.pairing == "paired" and "scene" in p.scores:
            sh = _find(groups, p.source, p.mode, "shuffled")
            for cond in SC_CONDITIONS:
                rec = _pair_record(p, sh, cond, n_boot, seed)
                if rec is not None:
                    out.append(rec)
    return out


def _matched_views(first: list[GroupScores], second: list[GroupScores],
                   task: str) -> tuple[list[View], list[View]]:
    """Views of ``task`` in both lists, for the protocols both have."""
    out_a: list[View] = []
    out_b: list[View] = []
    for a in first:
        for b in (b for b in second if b.protocol == a.protocol):
            va, vb = task_view(a, task), task_view(b, task)
            if va is not None and vb is not None:
                out_a.append(va)
                out_b.append(vb)
    return out_a, out_b


def ablation_records(groups: list[GroupScores], n_boot: int = 1000, seed: int = 0,
                     base: str = "A", full: str = "AV") -> list[Record]:
    """Table 5's difference, mean over protocols of the A-V metric minus the A metric."""
    out = []
    core = _core_paired(groups)
    for (source, mode), gs in core.items():
        other = core.get((source, full))
        if mode != base or other is None:
            continue
        for task, metric in (("binary", "auc"), ("fourway", "macro_f1"), ("speech", "auc"),
                             ("env", "auc")):
            av, a = _matched_views(other, gs, task)
            if av and av[0].prediction() is not None:
                est = estimate(av + a, metric, n_boot, seed, _diff_of_means(len(av)))
                out.append({"source": source, "task": task, "metric": metric}
                           | _cell("delta_AV_A", est))
    return out


def generator_records(groups: list[GroupScores]) -> list[Record]:
    """Per generator: AUC/EER of its test fakes vs all test reals (binary task), N per cell."""
    out = []
    for g in (g for g in groups if g.pairing == "paired" and "binary" in g.scores):
        keys, real = _generator_keys(g.test), g.test["variant"].astype(str).to_numpy() == "R"
        finite = np.isfinite(g.scores["binary"])
        for gen in sorted(set().union(*keys)):
            fake = np.array([gen in k for k in keys])
            rows = (fake | real) & finite
            y, s = fake[rows].astype(int), g.scores["binary"][rows]
            if 0 < y.sum() < y.size:
                out.append(_key(g) | {"generator": gen, "auc": M.auc(y, s),
                                      "eer": M.eer_asvspoof(y, s),
                                      "ap": M.average_precision(y, s), "n_fake": int(y.sum()),
                                      "n_real": int(y.size - y.sum())})
    return out


def logo_records(groups: list[GroupScores]) -> list[Record]:
    """Leave-one-generator-out: held-out AUC vs the all-generator head's AUC on the same rows."""
    out = []
    for g in (g for g in groups if "binary" in g.scores and g.source == "head"):
        keys, real = _generator_keys(g.test), g.test["variant"].astype(str).to_numpy() == "R"
        for head in (k for k in g.scores if k.startswith("logo:")):
            gen = head.removeprefix("logo:")
            fake = np.array([gen in k for k in keys])
            if not fake.any():
                continue
            rows = fake | real
            y = fake[rows].astype(int)
            held, seen = M.auc(y, g.scores[head][rows]), M.auc(y, g.scores["binary"][rows])
            out.append(_key(g) | {"generator": gen, "auc_held_out": held, "auc_seen": seen,
                                  "drop": seen - held,
                                  "ap_held_out": M.average_precision(y, g.scores[head][rows]),
                                  "ap_seen": M.average_precision(y, g.scores["binary"][rows]),
                                  "n_fake": int(fake.sum()),
                                  "n_real": int(real.sum())})
    return out


ROBUST_TASKS = ("binary", "speech", "env", "scene")
"""Tasks scored under every robustness condition (the binary ones)."""


def _robust_views(groups: list[GroupScores], task: str
                  ) -> dict[tuple[str, str, str, str], View]:
    """(source, mode, condition, protocol) → the task's view, paired groups only."""
    out = {}
    for g in (g for g in groups if g.pairing == "paired" and task in g.scores):
        if (task == "scene") != (g.protocol == SC_PROTOCOL):
            continue
        view = task_view(g, task)
        if view is not None:
            out[(g.source, g.mode, g.condition or "clean", g.protocol)] = view
    return out


def _point(view: View) -> Record:
    y, s = view.binary_labels(), view.ranking()
    return {"auc": M.auc(y, s), "eer": M.eer_asvspoof(y, s), "ap": M.average_precision(y, s),
            "n": view.n}


def _robust_mean(clean: list[View], cond: list[View], n_boot: int, seed: int) -> Record:
    rec: Record = _cell("auc", estimate(cond, "auc", n_boot, seed))
    rec |= _cell("ap", estimate(cond, "ap", n_boot, seed))
    rec["eer"] = float(np.mean([_point(v)["eer"] for v in cond]))
    rec |= _cell("auc_drop", estimate(clean + cond, "auc", n_boot, seed,
                                      _diff_of_means(len(clean))))
    rec["ap_drop"] = float(np.mean([_point(v)["ap"] for v in clean])
                           - np.mean([_point(v)["ap"] for v in cond]))
    rec["eer_rise"] = rec["eer"] - float(np.mean([_point(v)["eer"] for v in clean]))
    return rec | {"n": sum(v.n for v in cond)}


def robustness_records(clean: list[GroupScores], perturbed: list[GroupScores],
                       n_boot: int = 1000, seed: int = 0) -> list[Record]:
    """Per (source, mode, task, condition): each protocol's point AUC/EER/AP and drop from
    clean, and (``protocol="mean"``) the mean over the core protocols with intervals.

    Beyond the paper: every binary task with the clean heads; the drop from clean is
    ΔAUC = clean − condition, with a clip-paired interval (the condition's samples are the
    clean test clips).

    The ``clean`` condition's own records come first, so a table reads top to bottom.
    """
    out = []
    order = list(dict.fromkeys(g.condition for g in perturbed))
    for task in ROBUST_TASKS:
        base, views = _robust_views(clean, task), _robust_views(perturbed, task)
        keys = sorted({k[:3] for k in views}, key=lambda k: (k[0], k[1], order.index(k[2])))
        for source, mode in dict.fromkeys((k[0], k[1]) for k in keys):
            conds = ["clean", *dict.fromkeys(k[2] for k in keys if k[:2] == (source, mode))]
            for cond in conds:
                out += _robust_rows(base, views, source, mode, task, cond, n_boot, seed)
    return out


def _robust_rows(base: dict[tuple[str, str, str, str], View],
                 views: dict[tuple[str, str, str, str], View], source: str, mode: str,
                 task: str, cond: str, n_boot: int, seed: int) -> list[Record]:
    mine = base if cond == "clean" else views
    protos = sorted(p for (s, m, c, p) in mine if (s, m, c) == (source, mode, cond))
    key: Record = {"source": source, "mode": mode, "task": task, "condition": cond}
    rows = []
    for proto in protos:
        rec = key | {"protocol": proto} | _point(mine[(source, mode, cond, proto)])
        ref = base.get((source, mode, "clean", proto))
        if ref is not None:
            rec |= {"auc_drop": _point(ref)["auc"] - rec["auc"],
                    "eer_rise": rec["eer"] - _point(ref)["eer"],
                    "ap_drop": _point(ref)["ap"] - rec["ap"]}
        rows.append(rec)
    core = [p for p in protos if p in CORE_PROTOCOLS and (source, mode, "clean", p) in base]
    if core and task != "scene":
        ref_views = [base[(source, mode, "clean", p)] for p in core]
        cond_views = [mine[(source, mode, cond, p)] for p in core]
        rows.append(key | {"protocol": "mean", "protocols": core}
                    | _robust_mean(ref_views, cond_views, n_boot, seed))
    return rows
