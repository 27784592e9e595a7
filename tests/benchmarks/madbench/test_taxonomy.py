"""Scene taxonomy: structure, label assignment, prompts, mismatch picks, reference labeller."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.models.reference.scene import CaptionHintLabeller
from madbench_common.models.roles import Model
from madbench_common.models.taxonomy import (
    DEFAULT_TAXONOMY_PATH,
    assign_label,
    build_prompt,
    load_taxonomy,
    parse_taxonomy,
    pick_mismatch,
    score_labels,
    taxonomy_problems,
)

ALWAYS = {"speech", "singing", "music", "media playback"}


def test_counts_and_domains() -> None:
    tax = load_taxonomy()
    assert len(tax.coarse) == 10
    assert len(tax.fine) == 63
    domains = {c.domain for c in tax.coarse.values()}
    assert domains >= {"indoor", "outdoor", "transportation", "industrial", "educational",
                       "natural"}


def test_structure() -> None:
    tax = load_taxonomy()
    assert taxonomy_problems(tax) == []
    for coarse in tax.coarse:
        assert sum(f.coarse == coarse for f in tax.fine.values()) >= 3
    for f in tax.fine.values():
        assert f.mismatch and set(f.mismatch) <= set(tax.fine)
        assert f.name not in f.mismatch
        assert set(f.excluded) >= ALWAYS
        assert f.expected_sounds and set(f.expected_sounds) <= set(tax.sounds)
        assert all(tax.fine[m].coarse != f.coarse for m in f.mismatch)


def _raw() -> dict:
    return json.loads(DEFAULT_TAXONOMY_PATH.read_text(encoding="utf-8"))


@pytest.mark.parametrize("breakage", ["self", "unknown", "sound", "excluded", "thin"])
def test_validation_catches_broken_data(breakage: str, tmp_path) -> None:
    raw = copy.deepcopy(_raw())
    first = raw["fine"][0]
    if breakage == "self":
        first["mismatch"].append(first["name"])
    elif breakage == "unknown":
        first["mismatch"].append("moon_base")
    elif breakage == "sound":
        first["expected_sounds"].append("laser_beams")
    elif breakage == "excluded":
        first["excluded"] = ["speech"]
    else:
        raw["fine"] = [f for f in raw["fine"]
                       if f["coarse"] != "workplace" or f["name"] == "office"]
    assert taxonomy_problems(parse_taxonomy(raw))
    path = tmp_path / "taxonomy.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid taxonomy"):
        load_taxonomy(path)


@pytest.mark.parametrize(("caption", "label"), [
    ("A busy coffee shop; the barista steams milk with an espresso machine", "cafe"),
    ("Birds chirping among tall trees in a forest", "forest"),
    ("A car park with cars coming and going", "parking_lot"),
    ("Commuters on a train station platform as a train arrives", "railway_platform"),
    ("Waves crashing on a sandy beach", "beach"),
    ("A man talks in his kitchen next to the stove", "kitchen"),
    ("Workers on a building site with a crane and a jackhammer", "construction_site"),
])
def test_assign_label(caption: str, label: str) -> None:
    assert assign_label(caption) == label


def test_assign_is_deterministic_with_stable_tie_break() -> None:
    scores = score_labels("a bus or a boat")
    assert scores["bus_interior"] == scores["boat"] > 0
    assert assign_label("a bus or a boat") == "boat"  # alphabetical among equals
    assert assign_label("") == load_taxonomy().fallback_label


def test_prompts_round_trip_and_exclude_speech_and_music() -> None:
    tax = load_taxonomy()
    for label, fine in tax.fine.items():
        prompt = build_prompt(label, 7.5)
        assert assign_label(prompt.text) == label
        assert "7.5 seconds" in prompt.text
        assert all(s.replace("_", " ") in prompt.text for s in fine.expected_sounds)
        assert {"speech", "music"} <= set(prompt.negative.split(", "))
    with pytest.raises(ConfigError):
        build_prompt("moon_base", 1.0)


def test_pick_mismatch() -> None:
    tax = load_taxonomy()
    for label, fine in tax.fine.items():
        picks = [pick_mismatch(label, seed) for seed in range(20)]
        assert picks == [pick_mismatch(label, seed) for seed in range(20)]
        assert set(picks) <= set(fine.mismatch)
        assert len(set(picks)) > 1


def test_caption_hint_labeller() -> None:
    labeller = CaptionHintLabeller()
    frames = np.zeros((2, 8, 8, 3), np.uint8)
    assert isinstance(labeller, Model) and labeller.reference
    caption = labeller.describe(frames, 25.0, hint="  rain on a  forest ")
    assert caption == "rain on a forest"
    assert labeller.assign(caption) == "forest"
    with pytest.raises(ConfigError, match="scene_caption"):
        labeller.describe(frames, 25.0)


def test_sibling_mismatch_relations_serve_s_r() -> None:
    """S-R (paper §5.3) needs same-coarse, different-fine incompatible labels."""
    tax = load_taxonomy()
    assert tax.fine["forest"].sibling_mismatch == ("beach",)
    assert "forest" in tax.fine["beach"].sibling_mismatch
    assert "dining_room" not in tax.fine["kitchen"].sibling_mismatch  # reviewed by hand
    assert tax.fine["living_room"].sibling_mismatch == ()  # no distinctive sound
    with_siblings = [f for f in tax.fine.values() if f.sibling_mismatch]
    assert len(with_siblings) == 61
    for f in with_siblings:
        for m in f.sibling_mismatch:
            assert tax.fine[m].coarse == f.coarse and m != f.name
            assert f.name in tax.fine[m].sibling_mismatch
        assert all(tax.fine[m].coarse != f.coarse for m in f.mismatch)


def test_sibling_mismatch_must_stay_in_the_coarse_scene() -> None:
    data = json.loads(DEFAULT_TAXONOMY_PATH.read_text())
    bad = copy.deepcopy(data)
    kitchen = next(f for f in bad["fine"] if f["name"] == "kitchen")
    kitchen["sibling_mismatch"].append("forest")
    problems = taxonomy_problems(parse_taxonomy(bad))
    assert any("sibling mismatch 'forest'" in p for p in problems)
    assert any("not symmetric" in p or "not another label" in p for p in problems)
