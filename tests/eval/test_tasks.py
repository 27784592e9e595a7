"""Task label vectors and subsets on a tiny hand-made samples table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from madbench_common.eval.tasks import generator_keys, task_labels

FRAME = pd.DataFrame({
    "variant": list("RSEQRSEQ"),
    "scene_consistent": [True, True, True, True, True, True, False, False],
    "speech_generator": ["", "f5", "", "f5", "", "vc1", "", "vc1"],
    "env_generator": ["", "", "aldm", "aldm", "", "", "mmaudio", "mmaudio"],
})


@pytest.mark.parametrize(("task", "mask", "labels"), [
    ("binary", [1] * 8, [0, 1, 1, 1, 0, 1, 1, 1]),
    ("fourway", [1] * 8, [0, 1, 2, 3, 0, 1, 2, 3]),
    ("speech", [1] * 8, [0, 1, 0, 1, 0, 1, 0, 1]),
    ("env", [1] * 8, [0, 0, 1, 1, 0, 0, 1, 1]),
    ("scene_dr", [1, 0, 0, 0, 1, 0, 1, 0], [0, 0, 1]),
    ("scene_sr", [1, 0, 1, 0, 1, 0, 0, 0], [0, 1, 0]),
    ("scene_ds", [0, 0, 1, 0, 0, 0, 1, 0], [0, 1]),
])
def test_task_labels(task: str, mask: list[int], labels: list[int]) -> None:
    m, y = task_labels(FRAME, task)
    assert m.tolist() == [bool(x) for x in mask]
    assert y.tolist() == labels


def test_generator_keys_follow_the_variant() -> None:
    keys = generator_keys(FRAME)
    assert keys[0] == set() and keys[1] == {"speech:f5"} and keys[2] == {"env:aldm"}
    assert keys[3] == {"speech:f5", "env:aldm"}


def test_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown variants"):
        task_labels(FRAME.assign(variant=list("RSEQRSEX")), "binary")
    assert np.all(task_labels(FRAME, "binary")[0])
