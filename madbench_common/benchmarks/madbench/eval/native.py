"""Direct transfer and zero-shot: a model's own per-task outputs, scored task by task.

Paper §4.2: pretrained detectors' "native scores are used for binary direct transfer,
while lightweight prediction heads are fitted to frozen detector outputs for tasks not
supported by the original models"; omni models answer each task's own prompt (P_bin,
P_4way, P_comp, P_SC). So every task is scored **only from rows with that task** (a task
without rows is reported as absent, never read from another task's score), and a row
without a usable score or answer is excluded, never replaced by a guess
(:func:`native_groups`). Parse rates are reported per task × mode × pairing on the test split.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.special import logit

from madbench_common.benchmarks.madbench.eval.fit import GroupScores
from madbench_common.benchmarks.madbench.eval.metrics import eer_threshold
from madbench_common.benchmarks.madbench.eval.tasks import CORE_TASKS, TASKS, VARIANTS, task_labels
from madbench_common.core.compat import zip_strict

__all__ = ["NEGATIVE", "POSITIVE", "SCORE_KINDS", "native_groups", "parse_records"]

SCORE_KINDS = ("auto", "prob", "llr", "raw")
POSITIVE = {"binary": ("fake",), "speech": ("fake",), "env": ("fake",),
            "scene": ("inconsistent", "fake")}
"""Parsed answers read as the positive class when a row has no score."""
NEGATIVE = {"binary": ("real",), "speech": ("real",), "env": ("real",),
            "scene": ("consistent", "real")}
_EPS = 1e-12
F64 = npt.NDArray[np.float64]


def resolve_kind(score: F64, kind: str) -> str:
    """``auto`` → ``prob`` if every finite score is in [0, 1], else ``raw``.

    ``kind`` says how to read ``score``: ``prob`` (P in [0, 1], read through its logit as an
    LLR), ``llr`` as is, ``raw`` (ranked only: minDCF, actDCF and Cllr omitted)."""
    if kind not in SCORE_KINDS:
        raise ValueError(f"score_kind {kind!r}: expected one of {SCORE_KINDS}")
    finite = score[np.isfinite(score)]
    in_unit = bool(((finite >= 0) & (finite <= 1)).all())
    if kind == "prob" and not in_unit:
        raise ValueError("score_kind 'prob' needs scores in [0, 1]")
    return ("prob" if in_unit else "raw") if kind == "auto" else kind


def _as_llr(score: F64, kind: str) -> F64:
    if kind == "prob":
        return np.asarray(logit(np.clip(score, _EPS, 1 - _EPS)), dtype=np.float64)
    return score.astype(np.float64)


def _column(frame: pd.DataFrame, name: str, default: Any) -> pd.Series:
    if name in frame:
        return frame[name]
    return pd.Series([default] * len(frame), index=frame.index)


def _normalise(scores: pd.DataFrame) -> pd.DataFrame:
    sc = scores.copy()
    for name, default in (("task", "binary"), ("mode", "A"), ("pairing", "paired"),
                          ("parsed", ""), ("excluded", False)):
        sc[name] = _column(sc, name, default)
    sc["task"] = sc["task"].replace("", "binary").fillna("binary").astype(str)
    sc["parsed"] = sc["parsed"].fillna("").astype(str)
    sc["excluded"] = sc["excluded"].fillna(False).astype(bool)
    sc["score"] = pd.to_numeric(_column(sc, "score", np.nan), errors="coerce")
    unknown = sorted(set(sc["task"]) - set(TASKS))
    if unknown:
        raise ValueError(f"scores name unknown tasks {unknown}; expected {tuple(TASKS)}")
    return sc


def _binary_values(rows: pd.DataFrame, task: str, kind: str) -> tuple[F64, int]:
    """LLR-like values (NaN = excluded) and how many came from hard answers.

    Per row: ``score`` (P(positive): fake, or scene-inconsistent), else the parsed answer as
    a hard decision (``fake``/``real``, ``inconsistent``/``consistent``); else (a refusal,
    an unparsed answer, ``excluded``) the row is **excluded** (NaN), counted in the
    exclusion rate beside the metric, never replaced by a guess."""
    score = rows["score"].to_numpy(np.float64)
    out = np.where(np.isfinite(score), _as_llr(np.nan_to_num(score, nan=0.5), kind), np.nan)
    parsed = rows["parsed"].to_numpy(str)
    hard = ~np.isfinite(score) & np.isin(parsed, POSITIVE[task] + NEGATIVE[task])
    finite = np.abs(out[np.isfinite(out)])
    top = float(logit(1 - 1e-6)) if kind == "prob" else float(finite.max(initial=0.0)) + 1.0
    out[hard] = np.where(np.isin(parsed[hard], POSITIVE[task]), top, -top)
    out[rows["excluded"].to_numpy(bool)] = np.nan
    return out, int(hard.sum())


def _fourway_values(rows: pd.DataFrame) -> tuple[F64, int]:
    """(n, 4) log-probabilities (NaN rows = excluded) and how many came from letters."""
    out = np.full((len(rows), 4), np.nan)
    probs = _column(rows, "probs", ())
    hard = 0
    for i, (p, parsed) in enumerate(zip_strict(probs, rows["parsed"].astype(str))):
        vec = np.asarray(p if p is not None else (), dtype=np.float64).ravel()
        if vec.size == 4 and np.isfinite(vec).all() and vec.sum() > 0:
            out[i] = np.log(np.clip(vec / vec.sum(), _EPS, 1.0))
        elif parsed in VARIANTS:
            out[i] = np.log(np.where(np.array(VARIANTS) == parsed, 1.0, _EPS))
            hard += 1
    out[rows["excluded"].to_numpy(bool)] = np.nan
    return out, hard


def _values(rows: pd.DataFrame, task: str, kind: str) -> tuple[F64, int]:
    return _fourway_values(rows) if task == "fourway" else _binary_values(rows, task, kind)


def _aligned(test: pd.DataFrame, rows: pd.DataFrame, values: F64) -> F64:
    """Values per test row (NaN where the test sample has no row of this task)."""
    pos = pd.Index(rows["sample_id"].astype(str)).get_indexer(test["sample_id"].astype(str))
    shape = (len(test), *values.shape[1:])
    out = np.full(shape, np.nan)
    out[pos >= 0] = values[pos[pos >= 0]]
    return out


def _calibrate(g: GroupScores, task: str, val: pd.DataFrame, values: F64, kind: str) -> None:
    # The accuracy threshold of a binary task: the validation split's EER point where val
    # rows exist, else P = 1/2 for probabilities (zero-shot models have no training data).
    mask, y = task_labels(val, task)
    s = values[mask]
    ok = np.isfinite(s)
    if ok.any() and 0 < y[ok].sum() < ok.sum():
        g.thresholds[task] = eer_threshold(y[ok], s[ok])
    elif kind == "prob":
        g.thresholds[task] = 0.0


def _protocol_frame(samples: pd.DataFrame, task: str) -> pd.DataFrame:
    mask, _ = task_labels(samples, task)
    return samples[mask].assign(protocol=samples["protocol"].astype(str).replace("", "all"))


def _task_groups(samples: pd.DataFrame, sc: pd.DataFrame, task: str, kind: str,
                 groups: dict[tuple[str, str, str], GroupScores]) -> None:
    frame = _protocol_frame(samples, task)
    for (mode, pairing), rows in sc[sc["task"] == task].groupby(["mode", "pairing"]):
        if pairing != "paired" and task != "scene":
            continue  # shuffled video is a scene-consistency control only (§5.3)
        rows = rows.drop_duplicates("sample_id", keep="last")
        values, n_hard = _values(rows, task, kind)
        for proto, part in frame.groupby("protocol"):
            test, val = part[part["split"] == "test"], part[part["split"] == "val"]
            if test.empty or not test["sample_id"].isin(rows["sample_id"]).any():
                continue
            key = (str(proto), str(mode), str(pairing))
            g = groups.setdefault(key, GroupScores(*key, test.reset_index(drop=True),
                                                   llr_like=kind != "raw", source="native"))
            g.scores[task] = _aligned(g.test, rows, values)
            g.llr_like = g.llr_like and n_hard == 0
            if task != "fourway":
                g.prior_logodds[task] = 0.0
                _calibrate(g, task, val.reset_index(drop=True), _aligned(val, rows, values), kind)


def native_groups(samples: pd.DataFrame, scores: pd.DataFrame,
                  kind: str = "auto") -> list[GroupScores]:
    """One :class:`GroupScores` per (protocol, mode, pairing) that has rows of some task.

    ``scores`` has ``sample_id`` and optionally ``task`` (default ``binary``),
    ``score``, ``probs``, ``parsed``, ``excluded``, ``mode`` (``A``) and ``pairing``
    (``paired``). A binary-type row is read by :func:`_binary_values`, a four-way row from
    ``probs`` (R, S, E, Q) or a parsed letter (:func:`_fourway_values`); a test sample with
    no row of a task is excluded too.
    """
    sc = _normalise(scores)
    kind = resolve_kind(sc.loc[sc["task"] != "fourway", "score"].to_numpy(np.float64), kind)
    groups: dict[tuple[str, str, str], GroupScores] = {}
    for task in (*CORE_TASKS, "scene"):
        _task_groups(samples, sc, task, kind, groups)
    return [groups[k] for k in sorted(groups)]


def parse_records(samples: pd.DataFrame, scores: pd.DataFrame) -> list[dict[str, Any]]:
    """Shares of each parsed answer per task × mode × pairing, over test-split rows."""
    sc = _normalise(scores)
    sc = sc[sc["parsed"] != ""]
    test = set(samples.loc[samples["split"] == "test", "sample_id"].astype(str))
    sc = sc[sc["sample_id"].astype(str).isin(test)]
    out = []
    for (task, mode, pairing), rows in sc.groupby(["task", "mode", "pairing"]):
        shares = rows["parsed"].value_counts(normalize=True)
        prompts = sorted({str(h) for h in _column(rows, "prompt_hash", "") if h})
        out.append({"task": task, "mode": mode, "pairing": pairing, "n": len(rows),
                    "prompt_hashes": prompts,
                    "excluded_rate": float(rows["excluded"].mean()),
                    "shares": {str(k): float(v) for k, v in _ordered(shares).items()}})
    return out


def _ordered(shares: pd.Series) -> pd.Series:
    first: Sequence[str] = ("fake", "real", "inconsistent", "consistent", *VARIANTS)
    last = ("refusal", "unparsed")
    keys = [k for k in first if k in shares] + sorted(
        k for k in shares.index if k not in first and k not in last)
    return shares[keys + [k for k in last if k in shares]]
