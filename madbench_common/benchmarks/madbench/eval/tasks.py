"""Evaluation tasks: label vectors and subsets over a samples table (paper §4.1, §5.1–5.3).

Every task maps a samples frame (columns of
:class:`~madbench_common.benchmarks.madbench.rows.SampleRow`) to a boolean row mask (which
samples take part) and integer labels for those rows (:func:`task_labels`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from madbench_common.core.compat import zip_strict

__all__ = [
    "CORE_PROTOCOLS",
    "CORE_TASKS",
    "SC_CONDITIONS",
    "SC_PROTOCOL",
    "TASKS",
    "VARIANTS",
    "Task",
    "condition_mask",
    "core_rows",
    "generator_keys",
    "task_labels",
]

VARIANTS = ("R", "S", "E", "Q")
CORE_PROTOCOLS = ("balanced", "scene_matched", "scene_mismatched")
"""The paper's three core protocols, in the column order of Tables 2 and 3."""
SC_PROTOCOL = "scene_consistency"
SC_CONDITIONS = ("D-R", "S-R", "D-S")
"""Scene-consistency conditions in the column order of Table 4."""
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Task:
    """One head's (or prompt's) prediction target: classes, and who takes part."""

    name: str
    classes: tuple[str, ...]
    description: str
    select: Callable[[pd.DataFrame], tuple[BoolArray, IntArray]]

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def scene(self) -> bool:
        return self.name == "scene"


def _variant(df: pd.DataFrame) -> npt.NDArray[np.str_]:
    return df["variant"].astype(str).to_numpy()


def _protocol(df: pd.DataFrame) -> npt.NDArray[np.str_]:
    if "protocol" not in df:
        return np.full(len(df), "", dtype=object).astype(str)
    return df["protocol"].astype(str).to_numpy()


def core_rows(df: pd.DataFrame) -> BoolArray:
    """Rows that belong to a core protocol (everything but scene consistency).

    The core protocols are ``balanced``, ``scene_matched`` and ``scene_mismatched``; a
    table without a protocol column counts as one protocol."""
    return _protocol(df) != SC_PROTOCOL


def _core(positive: tuple[str, ...]) -> Callable[[pd.DataFrame], tuple[BoolArray, IntArray]]:
    def select(df: pd.DataFrame) -> tuple[BoolArray, IntArray]:
        return core_rows(df), np.isin(_variant(df), positive).astype(np.int64)
    return select


def _fourway(df: pd.DataFrame) -> tuple[BoolArray, IntArray]:
    index = {name: i for i, name in enumerate(VARIANTS)}
    return core_rows(df), np.array([index[x] for x in _variant(df)], dtype=np.int64)


def _scene(df: pd.DataFrame) -> tuple[BoolArray, IntArray]:
    inconsistent = ~df["scene_consistent"].to_numpy(bool)
    return ~core_rows(df), inconsistent.astype(np.int64)


TASKS: dict[str, Task] = {
    "binary": Task("binary", ("real", "fake"), "H_bin: R vs S/E/Q", _core(("S", "E", "Q"))),
    "fourway": Task("fourway", VARIANTS, "H_4way: R/S/E/Q", _fourway),
    "speech": Task("speech", ("real", "fake"), "H_S: S,Q vs R,E", _core(("S", "Q"))),
    "env": Task("env", ("real", "fake"), "H_E: E,Q vs R,S", _core(("E", "Q"))),
    "scene": Task("scene", ("consistent", "inconsistent"),
                  "H_SC^FM: scene-inconsistent vs consistent (D-R ∪ S-R ∪ D-S)", _scene),
}
CORE_TASKS = ("binary", "fourway", "speech", "env")


def task_labels(df: pd.DataFrame, task: str) -> tuple[BoolArray, IntArray]:
    """(mask over rows, labels of the masked rows) for ``task``; unknown variants raise.

    Core tasks (§4.1, on :func:`core_rows`): binary any-fake (H_bin: R vs S/E/Q), four-way
    (H_4way: R/S/E/Q), speech component (H_S: {S,Q} vs {R,E}) and environment component
    (H_E: {E,Q} vs {R,S}) (§5.2). Scene consistency (§5.3) takes only
    ``protocol == "scene_consistency"`` rows: label 1 = scene-**inconsistent** (the positive
    class), 0 = consistent; its conditions D-R, S-R and D-S are subsets of the test rows of
    one pooled task, never separate tasks (:func:`condition_mask`)."""
    bad = sorted(set(df["variant"].astype(str)) - set(VARIANTS))
    if bad:
        raise ValueError(f"unknown variants {bad}; expected {VARIANTS}")
    mask, y = TASKS[task].select(df)
    return mask, y[mask]


def condition_mask(df: pd.DataFrame, condition: str) -> BoolArray:
    """Scene-consistency rows of one condition (``D-R``, ``S-R`` or ``D-S``)."""
    if condition not in SC_CONDITIONS:
        raise ValueError(f"unknown scene-consistency condition {condition!r}; "
                         f"expected one of {SC_CONDITIONS}")
    cond = df["sc_condition"].astype(str).to_numpy() if "sc_condition" in df else ""
    return ~core_rows(df) & (cond == condition)


def generator_keys(df: pd.DataFrame) -> list[set[str]]:
    """Per row, the generators that made it: ``speech:<name>`` and/or ``env:<name>``."""
    out: list[set[str]] = []
    for sg, eg, v in zip_strict(df["speech_generator"].astype(str),
                                df["env_generator"].astype(str), _variant(df)):
        keys = set()
        if v in ("S", "Q") and sg:
            keys.add(f"speech:{sg}")
        if v in ("E", "Q") and eg:
            keys.add(f"env:{eg}")
        out.append(keys)
    return out
