"""Real-environment swaps for the scene-consistency conditions D-R and S-R (paper §5.3).

"D-R uses real environmental audio from different coarse scenes; S-R uses real audio
from the same coarse scene but different fine-grained labels." A scene-inconsistent
D-R or S-R sample keeps its clip's real speech ŝ and video and takes the real residual
ê of a *donor* clip; the scene-consistent sample of the same condition is the clip's
own R. This module only chooses the donors; assembly renders the swapped sample
through the same mix path and mux as R (the donor ê is levelled to the clip's own ê,
as every replacing environment is).

Donor rules (the paper's rules for replacement tracks, §3.4: "selected within the same
data split while excluding the same source clip and related source groups, and reuse
is limited"):

* same split, another clip, another source group;
* D-R: the donor's fine label is one of the clip's taxonomy ``mismatch`` scenes (all of
  another coarse scene); S-R: one of its ``sibling_mismatch`` scenes (same coarse scene,
  another fine label, incompatible sounds);
* each donor gives its ê at most ``reuse_cap`` times per condition; among the allowed
  donors the least-used one is taken, ties broken by a seeded order. Clips with the
  fewest allowed donors choose first, so the cap strands as few clips as possible.

A clip with no allowed donor gets no pair for that condition (neither class), so each
condition stays paired; the count is reported in ``madbench status``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from madbench_common.compat import zip_strict
from madbench_common.taxonomy import Taxonomy

__all__ = ["SC_CONDITIONS", "SwapClip", "pick_env_donors"]

SC_CONDITIONS = ("D-R", "S-R", "D-S")
"""The scene-consistency conditions of Table 4, in the paper's order."""


@dataclass(frozen=True)
class SwapClip:
    """What donor choice needs to know about one clip."""

    clip_id: str
    split: str
    source_group: str
    scene_label: str


def _allowed(clip: SwapClip, donor: SwapClip, condition: str, tax: Taxonomy) -> bool:
    if (donor.clip_id == clip.clip_id or donor.split != clip.split
            or donor.source_group == clip.source_group):
        return False
    fine = tax.fine[clip.scene_label]
    related = fine.mismatch if condition == "D-R" else fine.sibling_mismatch
    return donor.scene_label in related


def pick_env_donors(receivers: Sequence[SwapClip], donors: Sequence[SwapClip],
                    condition: str, tax: Taxonomy, reuse_cap: int,
                    rng: np.random.Generator) -> dict[str, str]:
    """Receiver clip id → donor clip id for ``condition`` (``D-R`` or ``S-R``)."""
    if condition not in ("D-R", "S-R"):
        raise ValueError(f"real-environment swaps exist for D-R and S-R, not {condition!r}")
    pool = sorted(donors, key=lambda d: d.clip_id)
    tie = dict(zip_strict([d.clip_id for d in pool], rng.permutation(len(pool)).tolist()))
    options = {c.clip_id: [d for d in pool if _allowed(c, d, condition, tax)]
               for c in receivers}
    order = sorted(receivers, key=lambda c: (len(options[c.clip_id]), c.clip_id))
    use: Counter[str] = Counter()
    out: dict[str, str] = {}
    for clip in order:
        free = [d for d in options[clip.clip_id] if use[d.clip_id] < reuse_cap]
        if not free:
            continue
        best = min(free, key=lambda d: (use[d.clip_id], tie[d.clip_id]))
        use[best.clip_id] += 1
        out[clip.clip_id] = best.clip_id
    return out

