"""The model catalog: one card per model; the registry, every model's place in the graphs
(both profiles, the demo's lists, the QC roles), the GPU table and the reference licences
are derived from the cards, and the tests here check the cards against the graphs, the
Makefile and the images."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from madbench_common.benchmarks.deaf.graph import PAPER_MODELS, build_deaf_graph
from madbench_common.benchmarks.madbench.eval_models import EVAL_MODELS
from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.omni_models import OMNI_MODELS
from madbench_common.core.errors import ConfigError
from madbench_common.models.catalog import (
    LIST_STAGES,
    cards,
    demo_params,
    load_card,
    qc_cards,
    stage_name,
)
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.gpuplan import load_gpu_models
from madbench_common.pipeline.stage import stage_params
from tests.paths import CATALOG, ROOT

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
        found = [c for c in cards().values() if c.slot and not c.reference
                 and any(s.startswith(prefix) and s not in LIST_STAGES for s in c.slot.stages)]
        return [c.slug for c in sorted(found, key=lambda c: c.slot.order if c.slot else 0)]

    assert [m.slug for m in EVAL_MODELS] == slotted("features_")
    assert [m.slug for m in OMNI_MODELS] == slotted("omni_")
    assert [m.slug for m in PAPER_MODELS] == slotted("answer_")
    full = build_graph().profiled("full")
    assert sorted(slotted("speech_") + slotted("env_")) == sorted(
        s.model for s in full if s.name.startswith(("speech_", "env_")))
    for m in EVAL_MODELS:
        card = cards()[m.slug]
        assert (m.image, m.detector) == (card.image, card.role == "detector")


def test_every_slot_stage_runs_its_card_on_its_image() -> None:
    """A paper card's slot names stages of a graph whose ``full`` profile runs that card's
    model on that card's image, with the slot's pod memory and GPU."""
    stages = {**build_graph().stages, **build_deaf_graph().stages}
    bad = []
    for card in cards().values():
        if card.reference:
            continue
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


def test_a_reference_card_is_the_default_of_the_stages_its_slot_names() -> None:
    """A reference card's slot makes it a stage's default model, which every profile runs
    unless a paper card fills the stage; in a list stage, a member of its ``models`` in the
    slot's order. Every default model of both graphs is placed so."""
    graphs = (build_graph(), build_deaf_graph())
    stages = {name: stage for graph in graphs for name, stage in graph.stages.items()}
    placed: dict[str, set[str]] = {}
    for card in cards().values():
        for name in card.slot.stages if card.reference and card.slot else ():
            placed.setdefault(name, set()).add(card.slug)
    for name in LIST_STAGES:
        members = stages[name].params["models"]
        assert set(members) == placed.pop(name)
        assert members == sorted(members, key=lambda s: (cards()[s].slot or 0).order)
    assert {n: {stages[n].model} for n in placed} == placed
    # answer_<name> runs its paper card in every profile; split its QC speaker (qc:)
    defaults = {name for name, s in stages.items() if s.swappable
                and not name.startswith("answer_") and name != "split"}
    assert defaults == set(placed)


def test_the_qc_stages_run_the_cards_of_their_qc_roles() -> None:
    """``qc:`` places a model in the QC stages by role: the reference cards by default, the
    paper cards in the ``full`` profile; ``split`` runs the ``speaker``."""
    graph = build_graph()
    for profile, reference in (("embedded", True), ("full", False)):
        roles = {role: card.slug for role, card in qc_cards(reference).items()}
        stages = graph.profiled(profile)
        source_qc, component_qc = stages["source_qc"], stages["component_qc"]
        assert {k: source_qc.params[k] for k in ("vad", "asr", "tagger")} == \
            {k: roles[k] for k in ("vad", "asr", "tagger")}
        assert source_qc.model == "+".join(roles[k] for k in ("vad", "asr", "tagger"))
        assert component_qc.model == "+".join(roles[k] for k in ("vad", "asr", "speaker",
                                                                 "tagger"))
        assert stage_params(component_qc, {})["prompt_model"] == roles.get("prompt_model", "")
        assert stages["split"].model == roles["speaker"]


def test_gpu_figures_come_from_the_cards() -> None:
    """Every ``gpu`` block is the table's row of its stages, each a stage that runs the
    card's model in the ``full`` profile (as its model or one of the QC stage's)."""
    table = load_gpu_models()
    full = {s.name: s for g in (build_graph(), build_deaf_graph()) for s in g.profiled("full")}
    for card in cards().values():
        for block in card.gpu:
            for stage in block["stages"]:
                assert table[stage].model == block["model"]
                assert table[stage].params_m == float(block["params_m"])
                runs = [*full[stage].model.split("+"), full[stage].params.get("prompt_model")]
                assert card.slug in runs, (card.slug, stage)
    assert {s for c in cards().values() for b in c.gpu for s in b["stages"]} == set(table)


@pytest.mark.parametrize(("prefix", "slug", "stage"), [
    ("features", "det-xlsr-mamba", "features_det_xlsr_mamba"),
    ("scores", "det-xlsr-mamba", "scores_det_xlsr_mamba"),
    ("omni", "omni-qwen25omni", "omni_qwen25omni"),
    ("answer", "deaf-gemini-2.5-flash", "answer_gemini_25_flash"),
    ("answer", "deaf-gpt-4o-audio", "answer_gpt_4o_audio"),
])
def test_one_rule_names_the_per_model_stages(prefix: str, slug: str, stage: str) -> None:
    assert stage_name(prefix, slug) == stage


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
    ("slot: {stages: [features_xlsr]}\n", "named after it: 'features_x'"),
    ("qc: vad\n", "is not a QC role of a detector model"),
    ("slot: {stages: [s], demo: 1}\n", "slot.demo is true or false"),
    ("slot: {stages: [s], demo: false}\n", "slot.demo narrows a list stage's models"),
    ("gpu: {model: X, params_m: 1, step_params_m: 1, bytes_per_param: 2, steps: 1, passes: 1, "
     "frames: 1, status: estimated, source: s}\n", "gpu figures need the stages"),
    ("slot: {stages: [s]}\ngpu: {stages: [t], model: X, params_m: 1, step_params_m: 1, "
     "bytes_per_param: 2, steps: 1, passes: 1, frames: 1, status: estimated, source: s}\n",
     "are not stages the model runs in"),
    ("reference: true\nslot: {stages: [s], memory: 8Gi}\n", "unknown slot key(s) ['memory']"),
    ("reference: true\nslot: {stages: [features_x]}\n", "is made per paper model"),
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


def test_a_card_alone_places_a_model_in_the_graph_and_the_demo(tmp_path: Path) -> None:
    """A new reference card whose slot names ``features_references`` joins that stage's list
    and ``make demo``'s (``demo: false`` keeps it out of the demo's), with no Python edit."""
    if shutil.which("make") is None:
        pytest.skip("needs make")
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "madbench_common", tree / "madbench_common",
                    ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copytree(ROOT / "madbench_common/data", tree / "madbench_common/data",
                    ignore=shutil.ignore_patterns("noise", "deaf_envlib"))
    shutil.copy2(ROOT / "Makefile", tree / "Makefile")
    shutil.copytree(ROOT / "mk", tree / "mk")
    (tree / "print.mk").write_text("print-%: ; $(info $($*))@:\n")
    card = (CATALOG / "ref-lfcc-stats.yaml").read_text().replace("slug: ref-lfcc-stats",
                                                                 "slug: ref-extra-stats")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MADBENCH_", "PYTHON"))}
    env.update(PYTHONPATH=str(tree), PYTHONDONTWRITEBYTECODE="1")
    graph = ("from madbench_common.benchmarks.madbench.graph import build_graph; "
             "print(build_graph()['features_references'].params['models'])")

    def place(order: int, demo: bool) -> tuple[str, str]:
        text = card.replace("order: 3", f"order: {order}" + "\n  demo: false" * (not demo))
        (tree / "madbench_common/models/catalog/ref-extra-stats.yaml").write_text(text)
        models = subprocess.run([sys.executable, "-c", graph], cwd=tree, env=env, text=True,
                                capture_output=True, check=True).stdout
        made = subprocess.run(["make", "--no-print-directory", "-f", "Makefile", "-f",
                               "print.mk", "print-DEMO_MODELS", f"PY={sys.executable}"],
                              cwd=tree, env=env, text=True, capture_output=True, check=True)
        return models, made.stdout

    models, demo = place(order=9, demo=True)
    assert models.strip().endswith("'ref-av-sync-det', 'ref-extra-stats']")
    assert demo.strip().endswith('"ref-av-sync-det","ref-extra-stats"]\'')
    assert demo.strip() == "--set 'features_references.models=" + str(
        [*demo_params()["features_references"]["models"], "ref-extra-stats"]).replace(
        "'", '"').replace(" ", "") + "'"
    models, demo = place(order=0, demo=False)
    assert models.strip().startswith("['ref-extra-stats', 'ref-av-lfcc'")
    assert "ref-extra-stats" not in demo and "ref-av-lfcc" in demo
