"""Role interfaces of the DEAF stimulus generators (the answer models are ``OmniModel``s).

* :class:`EmotionalTTS` — ESC (§2.1): a sentence spoken with a given emotional prosody.
* :class:`VoiceTTS` — SIC (§2.1) and BSC speech (Appendix A.2.2): a sentence spoken in a
  voice profile (``young_male`` … ``elderly_female``, or ``narrator``, BSC's one neutral
  voice).

Audio is mono float32 at the ``sample_rate`` the caller passes. Implementations declare
``slug``, ``version`` and ``reference`` (``True`` for the CPU references).
"""

from __future__ import annotations

from typing import Protocol

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.roles import Model

__all__ = ["NARRATOR", "EmotionalTTS", "VoiceTTS"]

NARRATOR = "narrator"
"""BSC's voice: one neutral male voice for every sentence (the paper: en-US-GuyNeural)."""


class EmotionalTTS(Model, Protocol):
    def synthesise(self, text: str, emotion: str, sample_rate: Hertz, seed: int = 0) -> Audio:
        ...


class VoiceTTS(Model, Protocol):
    def synthesise(self, text: str, profile: str, sample_rate: Hertz, seed: int = 0) -> Audio:
        ...
