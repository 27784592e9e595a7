"""Task label vectors and subsets on a tiny hand-made samples table (paper §4.1, §5.2, §5.3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval.tasks import (
    condition_mask,
    generator_keys,
    task_labels,
)

CORE = pd.DataFrame({
    "variant": list("RSEQRSEQ"),
    "scene_consistent": [True, True, True, True, True, True, False, False],
    "speech_generator": ["", "f5", "", "f5", "", "vc1", "", "vc1"],
    "env_generator": ["", "", "aldm", "aldm", "", "", "mmaudio", "mmaudio"],
    "protocol": ["balanced"] * 8, "sc_condition": [""] * 8,
})
# Scene consistency (SampleRow v2): D-R and S-R are real mixes (variant R), D-S are E.
SCENE = pd.DataFrame({
    "variant": list("RRRREE"), "scene_consistent": [True, False, True, False, True, False],
    "speech_generator": [""] * 6, "env_generator": ["", "", "", "", "aldm", "aldm"],
    "protocol": ["scene_consistency"] * 6,
    "sc_condition": ["D-R", "D-R", "S-R", "S-R", "D-S", "D-S"],
})
FRAME = pd.concat([CORE, SCENE], ignore_index=True)


@pytest.mark.parametrize(("task", "mask", "labels"), [
    ("binary", [1] * 8 + [0] * 6, [0, 1, 1, 1, 0, 1, 1, 1]),
    ("fourway", [1] * 8 + [0] * 6, [0, 1, 2, 3, 0, 1, 2, 3]),
    ("speech", [1] * 8 + [0] * 6, [0, 1, 0, 1, 0, 1, 0, 1]),
    ("env", [1] * 8 + [0] * 6, [0, 0, 1, 1, 0, 0, 1, 1]),
    # one pooled task: every scene-consistency row, label 1 = inconsistent
    ("scene", [0] * 8 + [1] * 6, [0, 1, 0, 1, 0, 1]),
])
def test_task_labels(task: str, mask: list[int], labels: list[int]) -> None:
    m, y = task_labels(FRAME, task)
    assert m.tolist() == [bool(x) for x in mask]
    assert y.tolist() == labels


def test_scene_conditions_are_subsets_of_the_scene_rows() -> None:
    assert condition_mask(FRAME, "D-R").tolist() == [False] * 8 + [1, 1, 0, 0, 0, 0]
    assert condition_mask(FRAME, "D-S").tolist() == [False] * 8 + [0, 0, 0, 0, 1, 1]
    with pytest.raises(ValueError, match="unknown scene-consistency condition"):
        condition_mask(FRAME, "D-X")


def test_generator_keys_follow_the_variant() -> None:
    keys = generator_keys(FRAME)
    assert keys[0] == set() and keys[1] == {"speech:f5"} and keys[2] == {"env:aldm"}
    assert keys[3] == {"speech:f5", "env:aldm"}


def test_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown variants"):
        task_labels(CORE.assign(variant=list("RSEQRSEX")), "binary")
    assert np.all(task_labels(CORE, "binary")[0])
