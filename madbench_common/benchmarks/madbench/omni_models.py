"""The paper's zero-shot omni models as graph stages: one ``omni_<model>`` per model (§4.2).

Each omni model of paper §4.2 (MiniCPM-o 4.5, Qwen2.5-Omni-7B, Gemma-4-E4B-it,
Baichuan-Omni-1.5) gets its own :class:`~madbench_common.benchmarks.madbench.stages.omni.OmniStage`
on its
own image, writing ScoreRows that ``evaluate`` reads per task. Their defaults are empty
(no model, ``reference-cpu``, no GPU): the embedded run and ``smoke.yaml`` plan nothing
there. The ``full`` profile (``workflows/full.yaml``) sets the model, image and a GPU.
For a local run with a tiny model, see ``make demo-omni`` (README).

Frame sampling per model, where the paper is silent (upstream defaults): Qwen2.5-Omni
2 fps (``qwen-omni-utils``' default rate), MiniCPM-o 4.5 and Baichuan-Omni-1.5 1 fps
(their demos' one frame per second), Gemma 4 1 fps; frames scaled to a 336 px shorter
side (448 for MiniCPM-o's slices), at most 32 frames (MADBench clips are ≤ 12 s).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from madbench_common.benchmarks.madbench.stages.omni import OmniStage
from madbench_common.models.catalog import model_cards, stage_name
from madbench_common.pipeline.graph import Stage
from madbench_common.pipeline.paramspec import declared_defaults

__all__ = ["OMNI_MODELS", "OmniSlot", "omni_model_stages"]


@dataclass(frozen=True)
class OmniSlot:
    """One omni model's stage: slug, frame parameters, image and resources."""

    slug: str
    frames: dict[str, Any] = field(default_factory=dict)
    image: str = ""
    """Image slug; the model's slug unless it shares another model's image."""
    memory: str = "48Gi"
    timeout: int = 6 * 3600


def _from_cards() -> tuple[OmniSlot, ...]:
    """Every catalog card with an ``omni_<name>`` slot, in its table order."""
    return tuple(OmniSlot(c.slug, dict(c.slot.frames), "" if c.image == c.slug else c.image,
                          c.slot.memory or "48Gi", c.slot.timeout or 6 * 3600)
                 for c in model_cards("omni") if c.slot)


OMNI_MODELS: tuple[OmniSlot, ...] = _from_cards()
"""In the order of the paper's Table 2 (each card's ``slot.order``)."""


_DEFAULTS = declared_defaults(OmniStage.Params)
"""What an omni stage runs with unless its card's frames differ (the graph keeps those)."""


def _stage(m: OmniSlot) -> Stage:
    return Stage(
        name=stage_name("omni", m.slug),
        role="omni",
        target="madbench_common.benchmarks.madbench.stages.omni:OmniStage",
        inputs=("assemble",),
        outputs=("scores",),
        shards=4,
        params={k: v for k, v in m.frames.items() if _DEFAULTS.get(k) != v},
        full={"model": m.slug, "image": m.image or m.slug, "gpu": 1, "memory": m.memory,
              "timeout": m.timeout},
    )


def omni_model_stages(models: tuple[OmniSlot, ...] = OMNI_MODELS) -> list[Stage]:
    """One stage per omni model."""
    return [_stage(m) for m in models]
