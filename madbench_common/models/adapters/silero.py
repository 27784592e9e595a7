"""Silero VAD as the QC image's VAD (``qc-silero-vad``): the same model as ``ref-silero-vad``.

The paper's VAD checks (§3.2–3.4) name no model. Silero VAD is a trained VAD whose
weights ship in its wheel, so the QC image uses it as is; this slug only marks it as a
model of the ``qc`` image in provenance (not a CPU stand-in).
"""

from __future__ import annotations

from madbench_common.models.reference.vad import SileroVAD

__all__ = ["QCSileroVAD"]


class QCSileroVAD(SileroVAD):
    """Silero VAD v6 (weights in the silero-vad wheel)."""

    slug = "qc-silero-vad"
    reference = False
