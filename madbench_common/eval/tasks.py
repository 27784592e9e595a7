"""Evaluation tasks: label vectors and subsets over a samples table (paper §4–5).

Every task maps a samples frame (columns of :class:`~madbench_common.rows.SampleRow`)
to a boolean row mask (which samples take part) and integer labels for those rows.
Scene-consistency tasks use the environment-only fakes (variant ``E``), so the
speech track is authentic and only the environment's fit to the video varies.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from madbench_common.compat import zip_strict

__all__ = [
    "SCENE_TASKS",
    "TASKS",
    "VARIANTS",
    "Task",
    "generator_keys",
    "task_labels",
]

VARIANTS = ("R", "S", "E", "Q")
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Task:
    """One head's prediction target: classes, and who takes part."""

    name: str
    classes: tuple[str, ...]
    description: str
    select: Callable[[pd.DataFrame], tuple[BoolArray, IntArray]]
    scene: bool = False
    """Scene-consistency task: fitted on paired and on shuffled video."""

    @property
    def n_classes(self) -> int:
        return len(self.classes)


def _variant(df: pd.DataFrame) -> npt.NDArray[np.str_]:
    return df["variant"].astype(str).to_numpy()


def _all_rows(positive: tuple[str, ...]) -> Callable[[pd.DataFrame], tuple[BoolArray, IntArray]]:
    def select(df: pd.DataFrame) -> tuple[BoolArray, IntArray]:
        v = _variant(df)
        return np.ones(len(v), bool), np.isin(v, positive).astype(np.int64)
    return select


def _fourway(df: pd.DataFrame) -> tuple[BoolArray, IntArray]:
    v = _variant(df)
    index = {name: i for i, name in enumerate(VARIANTS)}
    return np.ones(len(v), bool), np.array([index[x] for x in v], dtype=np.int64)


def _scene(kind: str) -> Callable[[pd.DataFrame], tuple[BoolArray, IntArray]]:
    def select(df: pd.DataFrame) -> tuple[BoolArray, IntArray]:
        v = _variant(df)
        consistent = df["scene_consistent"].to_numpy(bool)
        fake_env, real = v == "E", v == "R"
        if kind == "D-R":
            mask, y = (fake_env & ~consistent) | real, fake_env
        elif kind == "S-R":
            mask, y = (fake_env & consistent) | real, fake_env
        else:  # D-S: mismatched (positive) vs matched fake environments
            mask, y = fake_env, ~consistent
        return mask, y.astype(np.int64)
    return select


TASKS: dict[str, Task] = {
    "binary": Task("binary", ("real", "fake"), "R vs S/E/Q", _all_rows(("S", "E", "Q"))),
    "fourway": Task("fourway", VARIANTS, "R/S/E/Q", _fourway),
    "speech": Task("speech", ("real", "fake"), "S,Q vs R,E", _all_rows(("S", "Q"))),
    "env": Task("env", ("real", "fake"), "E,Q vs R,S", _all_rows(("E", "Q"))),
    "scene_dr": Task("scene_dr", ("real", "fake"), "D-R: mismatched fake env vs real",
                     _scene("D-R"), scene=True),
    "scene_sr": Task("scene_sr", ("real", "fake"), "S-R: matched fake env vs real",
                     _scene("S-R"), scene=True),
    "scene_ds": Task("scene_ds", ("matched", "mismatched"), "D-S: mismatched vs matched env",
                     _scene("D-S"), scene=True),
}
SCENE_TASKS = tuple(name for name, t in TASKS.items() if t.scene)


def task_labels(df: pd.DataFrame, task: str) -> tuple[BoolArray, IntArray]:
    """(mask over rows, labels of the masked rows) for ``task``; unknown variants raise."""
    bad = sorted(set(df["variant"].astype(str)) - set(VARIANTS))
    if bad:
        raise ValueError(f"unknown variants {bad}; expected {VARIANTS}")
    mask, y = TASKS[task].select(df)
    return mask, y[mask]


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
