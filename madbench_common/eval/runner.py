"""Fitting and scoring every head: per protocol × input mode × pairing, all tasks at once.

A *group* is one feature matrix: the samples of one protocol, encoded in one input
mode (``A``, ``V``, ``AV``) with paired or shuffled video. Each group standardises
its training rows once and fits all of its heads together with
:func:`~madbench_common.eval.heads.fit_heads`: the four main tasks (paired only),
the scene-consistency tasks (paired and shuffled), and — optionally —
leave-one-generator-out binary heads. Binary thresholds are calibrated on the
validation split at its EER point; every head scores every test row, so a head
can be read on any subset (e.g. the speech head on Q vs E for G_S).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from madbench_common.compat import zip_strict
from madbench_common.eval.heads import Head, HeadSpec, Standardiser, fit_heads
from madbench_common.eval.metrics import eer_threshold
from madbench_common.eval.tasks import TASKS, generator_keys, task_labels

__all__ = ["FeatureSet", "GroupScores", "fit_group", "run_heads"]

F32 = npt.NDArray[np.float32]
log = logging.getLogger("madbench")
_MAIN = ("binary", "fourway", "speech", "env")


@dataclass
class FeatureSet:
    """Feature matrices keyed by (mode, pairing); rows identified by sample id."""

    matrices: dict[tuple[str, str], tuple[npt.NDArray[np.str_], F32]] = field(default_factory=dict)

    def add(self, mode: str, pairing: str, sample_ids: npt.ArrayLike, x: npt.ArrayLike) -> None:
        self.matrices[(mode, pairing)] = (np.asarray(sample_ids).astype(str),
                                          np.asarray(x, dtype=np.float32))

    def has(self, mode: str, pairing: str, sample_ids: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Which of ``sample_ids`` have a row in the (mode, pairing) matrix."""
        ids, _ = self.matrices[(mode, pairing)]
        return np.isin(np.asarray(sample_ids).astype(str), ids)

    def rows(self, mode: str, pairing: str, sample_ids: npt.ArrayLike) -> F32:
        """The matrix rows for ``sample_ids`` (raises KeyError naming a missing id)."""
        ids, x = self.matrices[(mode, pairing)]
        index = pd.Index(ids)
        want = np.asarray(sample_ids).astype(str)
        pos = index.get_indexer(want)
        if (pos < 0).any():
            raise KeyError(f"no {mode}/{pairing} features for sample {want[pos < 0][0]!r}")
        return x[pos]


@dataclass
class GroupScores:
    """One group's fitted heads and their scores on every test row."""

    protocol: str
    mode: str
    pairing: str
    test: pd.DataFrame
    scores: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    """Task → logits (binary heads, higher = positive) or (n, K) log-probabilities."""
    thresholds: dict[str, float] = field(default_factory=dict)
    prior_logodds: dict[str, float] = field(default_factory=dict)
    heads: dict[str, Head] = field(default_factory=dict)
    llr_like: bool = True
    """Whether ``score − prior_logodds`` may be read as an LLR (minDCF, actDCF, Cllr)."""


def _specs(train: pd.DataFrame, tasks: list[str], logo: bool) -> list[HeadSpec]:
    specs = []
    for name in tasks:
        mask, y = task_labels(train, name)
        if mask.any() and len(np.unique(y)) >= TASKS[name].n_classes:
            labels = np.full(len(train), -1, np.int64)
            labels[mask] = y
            specs.append(HeadSpec(name, labels, TASKS[name].n_classes))
    if logo and "binary" in tasks:
        specs.extend(_logo_specs(train))
    return specs


def _logo_specs(train: pd.DataFrame) -> list[HeadSpec]:
    """Binary heads that never see one generator's fakes in training."""
    keys = generator_keys(train)
    fake = train["variant"].astype(str).to_numpy() != "R"
    specs = []
    for g in sorted(set().union(*keys)):
        held_out = np.array([g in k for k in keys])
        labels = np.where(held_out, -1, fake.astype(np.int64))
        if (labels == 1).any() and (labels == 0).any():
            specs.append(HeadSpec(f"logo:{g}", labels))
    return specs


def _calibrate(group: GroupScores, head: Head, val: pd.DataFrame, x_val: F32) -> None:
    if head.n_classes != 2 or len(val) == 0:
        return
    mask, y = task_labels(val, "binary" if head.key.startswith("logo:") else head.key)
    if mask.any() and 0 < y.sum() < y.size:
        group.thresholds[head.key] = eer_threshold(y, head.decision(x_val[mask]))


def fit_group(protocol: str, mode: str, pairing: str, frames: dict[str, pd.DataFrame],
              xs: dict[str, F32], tasks: list[str], *, c: float = 1.0,
              logo: bool = False) -> GroupScores:
    """Fit one group's heads on ``train``, calibrate on ``val``, score every ``test`` row."""
    std = Standardiser.fit(xs["train"])
    x = {split: std.transform(m) for split, m in xs.items()}
    specs = _specs(frames["train"], tasks, logo)
    group = GroupScores(protocol, mode, pairing, frames["test"].reset_index(drop=True))
    for head, spec in zip_strict(fit_heads(x["train"], specs, c=c), specs):
        group.heads[head.key] = head
        group.scores[head.key] = head.decision(x["test"])
        rows = spec.labels[spec.labels >= 0]
        if head.n_classes == 2:
            group.prior_logodds[head.key] = float(np.log(rows.sum() / (rows.size - rows.sum())))
        _calibrate(group, head, frames["val"], x["val"])
    return group


def _group_tasks(pairing: str, tasks: list[str]) -> list[str]:
    return [t for t in tasks if pairing == "paired" or TASKS[t].scene]


def run_heads(samples: pd.DataFrame, features: FeatureSet, *, tasks: list[str] | None = None,
              c: float = 1.0, logo: bool = False) -> list[GroupScores]:
    """Every group's heads: protocols × the (mode, pairing) matrices in ``features``."""
    tasks = list(tasks or TASKS)
    protocol = samples["protocol"].astype(str).replace("", "all")
    groups = []
    for proto in sorted(protocol.unique()):
        frame = samples[protocol == proto]
        frames = {s: frame[frame["split"] == s] for s in ("train", "val", "test")}
        if frames["train"].empty or frames["test"].empty:
            continue
        for mode, pairing in sorted(features.matrices):
            present = _with_features(features, mode, pairing, frames, proto)
            if present["train"].empty or present["test"].empty:
                continue
            xs = {s: features.rows(mode, pairing, f["sample_id"]) for s, f in present.items()}
            group_tasks = _group_tasks(pairing, tasks)
            if group_tasks:
                groups.append(fit_group(proto, mode, pairing, present, xs, group_tasks, c=c,
                                        logo=logo and pairing == "paired"))
    return groups


def _with_features(features: FeatureSet, mode: str, pairing: str,
                   frames: dict[str, pd.DataFrame], proto: str) -> dict[str, pd.DataFrame]:
    """Split frames restricted to samples that have this matrix's features.

    Shuffled pairing needs a second clip in the same protocol and split, so a split
    with one clip has no shuffled rows; those samples leave only this group (logged).
    """
    out = {}
    for split, frame in frames.items():
        mask = features.has(mode, pairing, frame["sample_id"])
        if not mask.all():
            log.warning("%s %s/%s: %d %s samples have no features; left out of this group",
                        proto, mode, pairing, int((~mask).sum()), split)
        out[split] = frame[mask]
    return out
