"""Registry slots for paper models that cannot run here: loading one names the blocker.

The paper's Tables 2–5 list these models; their registry entries keep the rows (slug,
``paper_model``, group) so reports can show them as unavailable. They have no feature
stage in the graph and are never replaced by a stand-in: instantiating one raises a
:class:`~madbench_common.core.errors.ConfigError` (exit 3) that says what is missing.
"""

from __future__ import annotations

from typing import ClassVar

from madbench_common.core.errors import ConfigError

__all__ = ["AudioMosaicSlot", "UnavailableModel"]


class UnavailableModel:
    """Base of the slots: ``blocker`` is the reason, raised on construction."""

    slug: ClassVar[str] = ""
    paper_model: ClassVar[str] = ""
    blocker: ClassVar[str] = ""

    def __init__(self) -> None:
        raise ConfigError(f"{self.slug} ({self.paper_model}) is unavailable: {self.blocker}")


class AudioMosaicSlot(UnavailableModel):
    slug, paper_model = "det-audiomosaic", "AudioMosaic"
    blocker = ("no public code or weights were found (Huang et al. 2026, arXiv 2605.14231; "
               "the paper evaluates a checkpoint fine-tuned on the EnvSDD TTA split). Ask the "
               "authors; add an adapter and an image when the checkpoint is published.")
