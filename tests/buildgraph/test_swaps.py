"""Real-environment swap donors for D-R and S-R (paper §5.3), on a hand-worked pool."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.stages.swaps import SwapClip, pick_env_donors
from madbench_common.taxonomy import load_taxonomy

POOL = [
    SwapClip("a", "train", "g1", "forest"),
    SwapClip("b", "train", "g2", "beach"),      # natural, forest's sibling mismatch
    SwapClip("c", "train", "g3", "kitchen"),    # domestic: in forest's mismatch list
    SwapClip("d", "train", "g1", "forest"),     # a's source group
    SwapClip("e", "test", "g4", "beach"),       # another split
    SwapClip("f", "train", "g5", "riverside"),  # natural, not incompatible with forest
]


def _pick(cond: str, receivers: list[SwapClip], cap: int = 2, seed: int = 0) -> dict[str, str]:
    return pick_env_donors(receivers, POOL, cond, load_taxonomy(), cap,
                           np.random.default_rng(seed))


def test_d_r_takes_another_coarse_scene_same_split_other_group() -> None:
    tax = load_taxonomy()
    assert "kitchen" in tax.fine["forest"].mismatch
    assert _pick("D-R", [POOL[0]]) == {"a": "c"}


def test_s_r_takes_the_same_coarse_scene_another_fine_label() -> None:
    assert _pick("S-R", [POOL[0]]) == {"a": "b"}
    assert _pick("S-R", [POOL[1]])["b"] in {"a", "d", "f"}  # beach ↔ forest, riverside


def test_reuse_cap_leaves_a_clip_without_a_pair_rather_than_breaking_a_rule() -> None:
    got = _pick("S-R", [POOL[0], POOL[3]], cap=1)
    assert list(got.values()) == ["b"] and len(got) == 1
    got = _pick("S-R", [POOL[0], POOL[3]], cap=2)
    assert got == {"a": "b", "d": "b"}


def test_donor_choice_is_seeded_and_deterministic() -> None:
    receivers = [POOL[2]]  # kitchen: forests a, d and beaches b (train) are D-R donors
    picks = {_pick("D-R", receivers, seed=s)["c"] for s in range(12)}
    assert picks <= {"a", "b", "d", "f"} and len(picks) > 1
    assert _pick("D-R", receivers, seed=3) == _pick("D-R", receivers, seed=3)


def test_d_s_has_no_real_swap() -> None:
    with pytest.raises(ValueError):
        _pick("D-S", [POOL[0]])
