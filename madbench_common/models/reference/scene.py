"""Reference scene labeller: the caption given by the sources, then the shared taxonomy step.

``describe`` stands in for a vision-language model (the cluster image uses one such
as Qwen2.5-VL): it returns the ``scene_caption`` hint that the source manifest
provides and refuses to guess when there is none. ``assign`` is the deterministic
caption → fine-label step that every describer shares
(:func:`madbench_common.models.taxonomy.assign_label`).
"""

from __future__ import annotations

from madbench_common.core.errors import ConfigError
from madbench_common.models.roles import Frames
from madbench_common.models.taxonomy import assign_label

__all__ = ["CaptionHintLabeller"]


class CaptionHintLabeller:
    """SceneLabeller whose description is the source's provided ``scene_caption``."""

    slug = "ref-caption-hint"
    version = "1"
    reference = True

    def describe(self, frames: Frames, fps: float, hint: str = "") -> str:
        caption = " ".join(hint.split())
        if not caption:
            raise ConfigError(
                f"{self.slug} cannot look at video: give the clip a scene_caption "
                "(or use a VLM scene labeller)")
        return caption

    def assign(self, caption: str) -> str:
        return assign_label(caption)
