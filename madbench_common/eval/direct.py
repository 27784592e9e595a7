"""Direct transfer: a detector's native per-sample scores, read against every binary task.

No head is trained: the score (higher = more likely fake) is evaluated as it is on
each protocol's test split, with the accuracy threshold calibrated at the EER
point of the validation split when one exists. ``score_kind`` says how to read
the score as an LLR: ``llr`` as is, ``prob`` (P(fake) in (0, 1)) through its
logit, ``raw`` not at all (minDCF, actDCF and Cllr are then omitted).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import logit

from madbench_common.eval.metrics import eer_threshold
from madbench_common.eval.runner import GroupScores
from madbench_common.eval.tasks import TASKS, task_labels

__all__ = ["SCORE_KINDS", "direct_groups"]

SCORE_KINDS = ("llr", "prob", "raw")


def _as_llr(score: np.ndarray, kind: str) -> np.ndarray:
    if kind == "prob":
        if ((score < 0) | (score > 1)).any():
            raise ValueError("score_kind 'prob' needs scores in [0, 1]")
        return logit(np.clip(score, 1e-12, 1 - 1e-12))
    return score.astype(np.float64)


def _group(proto: str, mode: str, pairing: str, frame: pd.DataFrame, kind: str) -> GroupScores:
    test, val = frame[frame["split"] == "test"], frame[frame["split"] == "val"]
    g = GroupScores(proto, mode, pairing, test.reset_index(drop=True), llr_like=kind != "raw")
    for task in (t for t, spec in TASKS.items() if spec.n_classes == 2):
        if pairing != "paired" and not TASKS[task].scene:
            continue
        g.scores[task] = _as_llr(test["score"].to_numpy(float), kind)
        g.prior_logodds[task] = 0.0
        mask, y = task_labels(val, task)
        if mask.any() and 0 < y.sum() < y.size:
            g.thresholds[task] = eer_threshold(y, _as_llr(val["score"].to_numpy(float)[mask], kind))
    return g


def direct_groups(samples: pd.DataFrame, scores: pd.DataFrame,
                  kind: str = "prob") -> list[GroupScores]:
    """One :class:`GroupScores` per (protocol, mode, pairing) found in ``scores``.

    ``scores`` has ``sample_id``, ``score`` and optionally ``mode`` (default ``A``)
    and ``pairing`` (default ``paired``); only binary-task rows are used.
    """
    if kind not in SCORE_KINDS:
        raise ValueError(f"score_kind {kind!r}: expected one of {SCORE_KINDS}")
    sc = scores.assign(mode=scores.get("mode", "A"), pairing=scores.get("pairing", "paired"))
    if "task" in sc:
        sc = sc[sc["task"].isin(["binary", ""])]
    merged = samples.merge(sc[["sample_id", "mode", "pairing", "score"]], on="sample_id")
    merged["protocol"] = merged["protocol"].astype(str).replace("", "all")
    groups = []
    for (proto, mode, pairing), frame in merged.groupby(["protocol", "mode", "pairing"]):
        if (frame["split"] == "test").any():
            groups.append(_group(str(proto), str(mode), str(pairing), frame, kind))
    return groups
