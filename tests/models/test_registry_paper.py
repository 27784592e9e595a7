"""The references stand in for the paper's models, and say which (paper §3.2–3.4)."""

from __future__ import annotations

from madbench_common.benchmarks.madbench.graph import PAPER_SLOTS, build_graph
from madbench_common.models.registry import REGISTRY


def test_generator_references_name_their_paper_slot() -> None:
    """Each generator stage's default reference stands in for that stage's paper model."""
    for stage in build_graph():
        if stage.role in ("speech_generator", "env_generator", "separator"):
            paper = PAPER_SLOTS[stage.name][0]
            assert REGISTRY[stage.model].paper_model == paper, stage.name


def test_the_separator_is_mossformer2() -> None:
    assert REGISTRY["ref-deepfilternet3"].paper_model == "MossFormer2"
    papers = {s.paper_model for s in REGISTRY.values() if s.role == "env_generator"}
    assert papers == {"AudioLDM2-TTA", "AudioGen", "MMAudio", "FoleyCrafter", "AudioX",
                      "AudioLDM2-ATA"}
    assert not papers & {"TangoFlux", "HunyuanVideo-Foley"}
