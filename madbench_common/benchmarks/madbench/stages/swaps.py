"""Real-environment swaps for the scene-consistency conditions D-R and S-R (paper §5.3).

"D-R uses real environmental audio from different coarse scenes; S-R uses real audio
from the same coarse scene but different fine-grained labels." An inconsistent sample
keeps its clip's real ŝ and video and takes a *donor* clip's real residual ê; the
consistent one is the clip's own R. This module only chooses the donors
(:func:`donor_allowed`, :func:`pick_env_donors`); assembly renders the swapped sample
through the same mix path as R (the donor ê levelled to the clip's own ê).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from madbench_common.core.compat import zip_strict
from madbench_common.models.taxonomy import Taxonomy

__all__ = ["DONOR_RULES", "SC_CONDITIONS", "SwapClip", "donor_allowed", "pick_env_donors"]

SC_CONDITIONS = ("D-R", "S-R", "D-S")
"""The scene-consistency conditions of Table 4, in the paper's order."""
DONOR_RULES = ("coarse", "taxonomy")
"""``coarse``: the paper's definitions (default); ``taxonomy``: the mismatch lists."""


@dataclass(frozen=True)
class SwapClip:
    """What donor choice needs to know about one clip."""

    clip_id: str
    split: str
    source_group: str
    scene_label: str
    duration: float = 0.0
    """Seconds of the clip (and of its ê): a donor shorter than the receiver is looped."""


def donor_allowed(clip: SwapClip, donor: SwapClip, condition: str, tax: Taxonomy,
                  rule: str = "coarse") -> bool:
    """Whether ``donor``'s ê may be swapped into ``clip`` for ``condition``.

    The paper's rules for replacement tracks (§3.4: "selected within the same data split
    while excluding the same source clip and related source groups"): same split, another
    clip, another source group. Which scenes may donate (``rule``):

    - ``"coarse"`` (default, §5.3 as written): D-R takes a donor of *any other* coarse
      scene; S-R a donor of the *same* coarse scene with another fine label;
    - ``"taxonomy"`` (stricter, an option): D-R only the clip's taxonomy ``mismatch``
      scenes (49.9 % of different-coarse label pairs), S-R only its ``sibling_mismatch``
      scenes (77.8 % of same-coarse pairs; ``living_room`` and ``museum`` have none). These
      pre-selected pairs sound more different, which makes the task easier and inflates
      AUC_P; use it to study that effect.
    """
    if (donor.clip_id == clip.clip_id or donor.split != clip.split
            or donor.source_group == clip.source_group):
        return False
    fine, other = tax.fine[clip.scene_label], tax.fine[donor.scene_label]
    if rule == "taxonomy":
        related = fine.mismatch if condition == "D-R" else fine.sibling_mismatch
        return donor.scene_label in related
    if condition == "D-R":
        return other.coarse != fine.coarse
    return other.coarse == fine.coarse and other.name != fine.name


def pick_env_donors(receivers: Sequence[SwapClip], donors: Sequence[SwapClip],
                    condition: str, tax: Taxonomy, reuse_cap: int,
                    rng: np.random.Generator, rule: str = "coarse") -> dict[str, str]:
    """Receiver clip id → donor clip id for ``condition`` (``D-R`` or ``S-R``).

    A donor ê at least as long as the clip is preferred over a shorter one, which assembly
    would have to loop (a repeat is an audio-only cue that the shuffled-video control
    cannot remove; §5.3's Δ_pair assumes the cue is the scene). Shorter donors are still
    used where no long-enough one is free; assembly records the fit (``SampleRow.env_fit``)
    and ``madbench status`` reports the looped share. Each donor gives its ê at most
    ``reuse_cap`` times per condition (§3.4: "reuse is limited"); among the allowed donors
    (long enough first) the least-used one is taken, ties broken by a seeded order. Clips
    with the fewest allowed donors choose first, so the cap strands as few clips as
    possible. A clip with no allowed donor gets no pair for that condition (neither
    class), so each condition stays paired; ``madbench status`` reports the count.
    """
    if condition not in ("D-R", "S-R"):
        raise ValueError(f"real-environment swaps exist for D-R and S-R, not {condition!r}")
    if rule not in DONOR_RULES:
        raise ValueError(f"donor rule {rule!r}: expected one of {DONOR_RULES}")
    pool = sorted(donors, key=lambda d: d.clip_id)
    tie = dict(zip_strict([d.clip_id for d in pool], rng.permutation(len(pool)).tolist()))
    options = {c.clip_id: [d for d in pool if donor_allowed(c, d, condition, tax, rule)]
               for c in receivers}
    order = sorted(receivers, key=lambda c: (len(options[c.clip_id]), c.clip_id))
    use: Counter[str] = Counter()
    out: dict[str, str] = {}
    for clip in order:
        free = [d for d in options[clip.clip_id] if use[d.clip_id] < reuse_cap]
        if not free:
            continue
        best = min(free, key=lambda d: (d.duration < clip.duration, use[d.clip_id],
                                        tie[d.clip_id]))
        use[best.clip_id] += 1
        out[clip.clip_id] = best.clip_id
    return out
