"""The model catalog: one card per model; the registry, the role rows,
the GPU table and the reference licences are derived from the cards, and one test here
checks the cards against the graphs and the images."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from madbench_common.benchmarks.deaf.graph import PAPER_MODELS, build_deaf_graph
from madbench_common.benchmarks.madbench.eval_models import EVAL_MODELS
from madbench_common.benchmarks.madbench.graph import ENV_FULL, SPEECH_FULL, build_graph
from madbench_common.benchmarks.madbench.omni_models import OMNI_MODELS
from madbench_common.core.errors import ConfigError
from madbench_common.models.catalog import cards, load_card
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.gpuplan import load_gpu_models

CATALOG = Path(__file__).resolve().parents[2] / "madbench_common/models/catalog"
_CARD = """slug: x
role: detector
target: models.x:X
image: x
paper: X
section: MADBench §4.2
description: d
"""


def test_every_registered_model_has_one_card_and_every_card_is_registered() -> None:
    files = sorted(p.stem for p in CATALOG.glob("*.yaml"))
    assert files == sorted(REGISTRY) == sorted(cards())
    for slug, card in cards().items():
        spec = REGISTRY[slug]
        assert (spec.role, spec.target, spec.image, spec.paper_model, spec.group,
                spec.reference) == (card.role, f"madbench_common.{card.target}", card.image,
                                    card.paper, card.group, card.reference)


def test_the_cards_are_the_role_rows() -> None:
    """Each per-model stage family is exactly the cards with such a slot, in table order."""
    def slotted(prefix: str) -> list[str]:
        found = [c for c in cards().values()
                 if c.slot and any(s.startswith(prefix) for s in c.slot.stages)]
        return [c.slug for c in sorted(found, key=lambda c: c.slot.order if c.slot else 0)]

    assert [m.slug for m in EVAL_MODELS] == slotted("features_")
    assert [m.slug for m in OMNI_MODELS] == slotted("omni_")
    assert [m.slug for m in PAPER_MODELS] == slotted("answer_")
    assert sorted(s for s, _ in SPEECH_FULL.values()) == sorted(slotted("speech_"))
    assert sorted(s for s, _, _ in ENV_FULL.values()) == sorted(slotted("env_"))
    for m in EVAL_MODELS:
        card = cards()[m.slug]
        assert (m.image, m.detector) == (card.image, card.role == "detector")


def test_every_slot_stage_runs_its_card_on_its_image() -> None:
    """A card's slot names stages of a graph whose ``full`` profile runs that card's model
    on that card's image, with the slot's pod memory and GPU."""
    stages = {**build_graph().stages, **build_deaf_graph().stages}
    bad = []
    for card in cards().values():
        for name in card.slot.stages if card.slot else ():
            stage = stages.get(name)
            if stage is None:
                bad.append(f"{card.slug}: slot stage {name!r} is in no graph")
                continue
            model = stage.full.get("model", stage.model)
            image = stage.full.get("image", stage.image)
            if (model, image) != (card.slug, card.image):
                bad.append(f"{card.slug}: {name} runs {model!r} on {image!r}")
            if card.slot.memory and stage.full.get("memory", stage.memory) != card.slot.memory:
                bad.append(f"{card.slug}: {name} memory {stage.full.get('memory')!r}")
    assert not bad, bad


def test_every_model_stage_of_the_full_profile_has_a_card() -> None:
    """The other way round: a stage that runs one model in the ``full`` profile runs a
    carded model (a stage's image is the image on its model's card)."""
    bad = []
    for graph in (build_graph(), build_deaf_graph()):
        for stage in graph.stages.values():
            model = stage.full.get("model", stage.model)
            if model and "+" not in str(model):
                card = cards().get(str(model))
                image = stage.full.get("image", stage.image)
                if card is None or card.image != image:
                    bad.append(f"{stage.name}: {model!r} on {image!r}")
    assert not bad, bad


def test_gpu_figures_come_from_the_cards() -> None:
    table = load_gpu_models()
    for card in cards().values():
        if card.gpu and card.slot:
            for stage in card.slot.stages:
                assert table[stage].model == card.gpu["model"]
                assert table[stage].params_m == float(card.gpu["params_m"])


def test_a_reference_card_gives_its_licence_to_the_dataset_card() -> None:
    from madbench_common.benchmarks.madbench.release.card import _model_licence

    card = cards()["ref-world-vc"]
    assert _model_licence("ref-world-vc") == (card.licence["spdx"], card.licence["source"])
    assert all(c.licence for c in cards().values()
               if c.reference and c.role in ("speech_generator", "env_generator", "separator"))


@pytest.mark.parametrize(("extra", "message"), [
    ("colour: red\n", "unknown card key(s) ['colour']; valid: slug, role"),
    ("slot: {stages: [s], memroy: 8Gi}\n", "unknown slot key(s) ['memroy']"),
    ("slot: {stages: [s], frames: {fsp: 2}}\n", "unknown slot.frames key(s) ['fsp']"),
    ("gpu: {model: X}\n", "gpu needs"),
    ("licence: {spdx: MIT}\n", "licence needs exactly"),
])
def test_a_bad_card_is_refused_naming_the_file_and_the_valid_keys(extra: str,
                                                                   message: str) -> None:
    load_card(_CARD, "x.yaml")
    with pytest.raises(ConfigError) as exc:
        load_card(_CARD + extra, "catalog/x.yaml")
    assert "catalog/x.yaml" in str(exc.value) and message in str(exc.value)


def test_a_card_with_a_wrong_role_or_target_is_refused() -> None:
    doc = yaml.safe_load(_CARD)
    for key, value, message in (("role", "judge", "is not one of"),
                                ("target", "models.x.X", "not module:Class"),
                                ("group", "video", "is not one of")):
        bad = yaml.safe_dump({**doc, key: value})
        with pytest.raises(ConfigError, match=message):
            load_card(bad, "x.yaml")
    with pytest.raises(ConfigError, match=r"missing \['paper'\]"):
        load_card(yaml.safe_dump({k: v for k, v in doc.items() if k != "paper"}), "x.yaml")
