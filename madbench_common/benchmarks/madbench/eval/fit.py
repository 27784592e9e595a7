"""Fitting and scoring every head of one model: per protocol × input mode, all tasks at once.

Paper §4.2: "The prediction heads use the same logistic-regression architecture but
are trained independently for each task on the training split, with thresholds
calibrated on the validation split." A *group* is one feature matrix: the samples of one
protocol encoded in one input mode (``A``, ``V``, ``AV``); each standardises its training
rows once and fits all of its heads together (:func:`fit_group`). Core protocols:
:func:`_fit_core`; scene consistency (§5.3): :func:`_fit_scene`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from madbench_common.benchmarks.madbench.eval.heads import Head, HeadSpec, Standardiser, fit_heads
from madbench_common.benchmarks.madbench.eval.metrics import eer_threshold
from madbench_common.benchmarks.madbench.eval.tasks import (
    CORE_TASKS,
    SC_PROTOCOL,
    TASKS,
    core_rows,
    generator_keys,
    task_labels,
)
from madbench_common.core.compat import zip_strict

__all__ = ["FeatureSet", "GroupScores", "condition_order", "fit_group", "run_heads",
           "score_conditions", "union_rows"]

F32 = npt.NDArray[np.float32]
log = logging.getLogger("madbench")
_SPLITS = ("train", "val", "test")


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
    """One group's scores on its test rows: from fitted heads or from native outputs."""

    protocol: str
    mode: str
    pairing: str
    test: pd.DataFrame
    scores: dict[str, npt.NDArray[np.float64]] = field(default_factory=dict)
    """Task → logits (binary tasks, higher = positive) or (n, K) log-probabilities;
    NaN marks a test row without a usable score (excluded, see ``native``)."""
    thresholds: dict[str, float] = field(default_factory=dict)
    prior_logodds: dict[str, float] = field(default_factory=dict)
    heads: dict[str, Head] = field(default_factory=dict)
    llr_like: bool = True
    """Whether ``score − prior_logodds`` may be read as an LLR (minDCF, actDCF, Cllr)."""
    source: str = "head"
    """``head`` (fitted on frozen features) or ``native`` (the model's own scores)."""
    standardiser: Standardiser | None = None
    condition: str = ""
    """A robustness condition's name where the test rows are perturbed, else
    ``""`` (the clean test split)."""


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
    group = GroupScores(protocol, mode, pairing, frames["test"].reset_index(drop=True),
                        standardiser=std)
    for head, spec in zip_strict(fit_heads(x["train"], specs, c=c), specs):
        group.heads[head.key] = head
        group.scores[head.key] = head.decision(x["test"])
        rows = spec.labels[spec.labels >= 0]
        if head.n_classes == 2:
            group.prior_logodds[head.key] = float(np.log(rows.sum() / (rows.size - rows.sum())))
        _calibrate(group, head, frames["val"], x["val"])
    return group


def union_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The set union of scene-consistency rows: one row per distinct (audio, video) input.

    The consistent sample of a clip appears in D-R and in S-R as the same mix; it is
    one training sample of H_SC^FM, not two. Without content hashes every row counts.
    """
    cols = [c for c in ("audio_sha256", "video_sha256") if c in frame]
    if len(cols) < 2 or frame[cols].isna().any(axis=None) or (
            frame[cols].astype(str) == "").any(axis=None):
        return frame
    return frame.drop_duplicates(subset=[*cols, "scene_consistent"])


def _splits(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {s: frame[frame["split"] == s] for s in _SPLITS}


def _fit_core(samples: pd.DataFrame, features: FeatureSet, tasks: list[str], c: float,
              logo: bool) -> list[GroupScores]:
    """H_bin, H_4way, H_S, H_E (and, with ``logo``, leave-one-generator-out binary heads)
    per core protocol, on paired features only. Every head scores every test row, so a
    head can be read on any subset (the speech head on Q vs E for G_S)."""
    core = samples[core_rows(samples)]
    protocol = core["protocol"].astype(str).replace("", "all")
    groups = []
    for proto in sorted(protocol.unique()):
        frames = _splits(core[protocol == proto])
        for mode, pairing in sorted(features.matrices):
            if pairing != "paired":
                continue
            present = _with_features(features, mode, pairing, frames, proto)
            if present["train"].empty or present["test"].empty:
                continue
            xs = {s: features.rows(mode, pairing, f["sample_id"]) for s, f in present.items()}
            groups.append(fit_group(proto, mode, pairing, present, xs, tasks, c=c, logo=logo))
    return groups


def _fit_scene(samples: pd.DataFrame, features: FeatureSet, c: float) -> list[GroupScores]:
    """H_SC^FM per input mode (paired), then the same head on shuffled test features.

    §5.3: **one pooled head per input mode**, "trained on the union of the paired D-R, S-R,
    and D-S samples … rather than fitting a separate head for each condition", calibrated
    on val (:func:`union_rows`), scored on the test rows of every condition; at test time
    every condition keeps all of its rows."""
    frames = _splits(samples[~core_rows(samples)])
    groups = []
    for mode in sorted({m for m, p in features.matrices if p == "paired"}):
        present = _with_features(features, mode, "paired", frames, SC_PROTOCOL)
        fit_frames = {"train": union_rows(present["train"]), "val": union_rows(present["val"]),
                      "test": present["test"]}
        if fit_frames["train"]["scene_consistent"].nunique() < 2 or present["test"].empty:
            log.warning("%s %s: scene-consistency training rows lack a class; no H_SC^FM",
                        SC_PROTOCOL, mode)
            continue
        xs = {s: features.rows(mode, "paired", f["sample_id"]) for s, f in fit_frames.items()}
        paired = fit_group(SC_PROTOCOL, mode, "paired", fit_frames, xs, ["scene"], c=c)
        groups.append(paired)
        if (mode, "shuffled") in features.matrices:
            groups.append(_shuffled(paired, features, frames["test"]))
    return groups


def _shuffled(paired: GroupScores, features: FeatureSet, test: pd.DataFrame) -> GroupScores:
    """Sh: the paired group's head and standardiser on shuffled-video test features.

    The shuffled condition "keeps the audio and label unchanged and replaces only the
    video"; shuffled features never enter training or calibration."""
    assert paired.standardiser is not None
    test = test[features.has(paired.mode, "shuffled", test["sample_id"])].reset_index(drop=True)
    x = paired.standardiser.transform(features.rows(paired.mode, "shuffled", test["sample_id"]))
    head = paired.heads["scene"]
    return GroupScores(SC_PROTOCOL, paired.mode, "shuffled", test,
                       scores={"scene": head.decision(x)}, thresholds=dict(paired.thresholds),
                       prior_logodds=dict(paired.prior_logodds), heads={"scene": head},
                       standardiser=paired.standardiser)


def run_heads(samples: pd.DataFrame, features: FeatureSet, *, tasks: list[str] | None = None,
              c: float = 1.0, logo: bool = False) -> list[GroupScores]:
    """Every group's heads: core protocols × paired matrices, then H_SC^FM per mode."""
    tasks = list(tasks or TASKS)
    core_tasks = [t for t in tasks if t in CORE_TASKS]
    groups = _fit_core(samples, features, core_tasks, c, logo) if core_tasks else []
    if "scene" in tasks and (~core_rows(samples)).any():
        groups += _fit_scene(samples, features, c)
    return groups
def condition_order(perturbed: pd.DataFrame) -> list[str]:
    """The conditions of a perturbed-samples table in their list order (``condition_index``
    where present, else by name)."""
    first = perturbed.drop_duplicates("condition")
    if "condition_index" in first:
        first = first.sort_values(["condition_index", "condition"], kind="stable")
    else:
        first = first.sort_values("condition", kind="stable")
    return [str(c) for c in first["condition"]]


def score_conditions(groups: list[GroupScores], perturbed: pd.DataFrame,
                     features: FeatureSet) -> list[GroupScores]:
    """Robustness: the clean groups' heads, unchanged, on each condition's rows.

    ``perturbed`` holds the conditions' test samples (``condition`` column; the clean
    sample's protocol, labels and clip). Every head fitted on clean training data — with
    its standardiser and validation threshold — scores the perturbed rows of its own
    protocol in its own input mode, paired video only; leave-one-generator-out heads are
    not re-scored. One group per (clean group, condition) with rows that have features.
    """
    out = []
    for g in (g for g in groups if g.source == "head" and g.pairing == "paired"):
        std = g.standardiser
        if std is None or (g.mode, "paired") not in features.matrices:
            continue
        rows = perturbed[perturbed["protocol"].astype(str).replace("", "all") == g.protocol]
        for cond in condition_order(perturbed):
            part = rows[rows["condition"] == cond]
            part = part[features.has(g.mode, "paired", part["sample_id"])].reset_index(drop=True)
            if part.empty:
                continue
            x = std.transform(features.rows(g.mode, "paired", part["sample_id"]))
            heads = {k: h for k, h in g.heads.items() if not k.startswith("logo:")}
            out.append(GroupScores(g.protocol, g.mode, "paired", part,
                                   {k: h.decision(x) for k, h in heads.items()},
                                   dict(g.thresholds), dict(g.prior_logodds), heads,
                                   g.llr_like, g.source, std, str(cond)))
    return out


def _with_features(features: FeatureSet, mode: str, pairing: str,
                   frames: dict[str, pd.DataFrame], proto: str) -> dict[str, pd.DataFrame]:
    """Split frames restricted to samples that have this matrix's features.

    Paired features are expected for every sample (a missing one is logged).
    """
    out = {}
    for split, frame in frames.items():
        mask = features.has(mode, pairing, frame["sample_id"])
        if not mask.all():
            log.warning("%s %s/%s: %d %s samples have no features; left out of this group",
                        proto, mode, pairing, int((~mask).sum()), split)
        out[split] = frame[mask]
    return out
