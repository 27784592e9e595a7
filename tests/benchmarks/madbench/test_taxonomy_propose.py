"""``madbench taxonomy propose``: a draft taxonomy from the demo corpus's real scene captions."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from madbench_common.benchmarks.madbench.taxonomy_propose import (
    captions_for_taxonomy,
    propose_taxonomy,
)
from madbench_common.cli import main
from madbench_common.core.errors import ConfigError
from madbench_common.models.taxonomy import load_taxonomy

DEMO = Path(__file__).resolve().parents[3] / "data" / "demo" / "sources.csv"


def _captions() -> list[str]:
    with open(DEMO, newline="") as fh:
        return [r["scene_caption"] for r in csv.DictReader(fh)]


def test_draft_groups_identical_scenes_and_keeps_relations_sound() -> None:
    captions = _captions()
    draft = propose_taxonomy(captions, fine=6, coarse=3)
    fine = draft.doc["fine"]
    assert draft.n_captions == len(captions) and sum(f["n_captions"] for f in fine) == len(captions)
    assert len({f["name"] for f in fine}) == len(fine) == 6
    assert {f["coarse"] for f in fine} == {c["name"] for c in draft.doc["coarse"]}
    by_name = {f["name"]: f for f in fine}
    tax = load_taxonomy()
    for f in fine:
        assert set(tax.always_excluded) <= set(f["excluded"])
        assert set(f["expected_sounds"]) <= set(tax.sounds)
        assert f["closest_committed_label"] in tax.fine
        for m in f["mismatch"]:
            assert by_name[m]["coarse"] != f["coarse"] and f["name"] in by_name[m]["mismatch"]
    for caption in set(captions):  # the same photograph's caption lands in one cluster
        homes = [f["name"] for f in fine if caption in f["examples"]]
        assert len(homes) <= 1


def test_only_train_and_val_captions_are_used() -> None:
    rows = [{"caption": "a forest", "split": "train"}, {"caption": "a beach", "split": "test"},
            {"caption": "a kitchen", "split": "val"}, {"caption": " ", "split": "train"}]
    assert captions_for_taxonomy(rows) == ["a forest", "a kitchen"]
    with pytest.raises(ConfigError, match="at least 2 captions"):
        propose_taxonomy(["only one"])


def test_cli_writes_draft_and_review_sheet(tmp_path: Path) -> None:
    out = tmp_path / "draft"
    assert main(["taxonomy", "propose", "--captions", _caption_csv(tmp_path), "--fine", "4",
                 "--coarse", "2", "--out", str(out)]) == 0
    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["draft"] is True and len(doc["fine"]) == 4
    assert "Review before use" in out.with_suffix(".md").read_text()


def _caption_csv(tmp_path: Path) -> str:
    path = tmp_path / "captions.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["caption", "split"])
        w.writerows([c, "train"] for c in _captions())
    return str(path)


def test_hostile_captions_reach_the_review_sheet_escaped(tmp_path: Path) -> None:
    """HTML/JS, links, formulas, right-to-left overrides and a megabyte caption: the sheet
    shows each as text (escaped, formula-safe), the CLI reads the CSV whole."""
    hostile = ["<script>alert(1)</script> forest birds",
               "=cmd|' /C calc'!A0 forest birds",
               "[click](javascript:alert(1)) forest birds | table",
               "\u202edrib\u202c forest \x1b[31mbirds",
               "forest birds " + "wind " * 30_000]  # over the csv module's default field
    path = tmp_path / "captions.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["caption", "split"])
        w.writerows([c, "train"] for c in hostile)
    out = tmp_path / "draft"
    assert main(["taxonomy", "propose", "--captions", str(path), "--fine", "5",
                 "--coarse", "2", "--out", str(out)]) == 0
    sheet = out.with_suffix(".md").read_text(encoding="utf-8")
    for raw in ("<script>", "](javascript", "\u202e", "\x1b", "example: =cmd"):
        assert raw not in sheet, raw
    examples = [ln for ln in sheet.splitlines() if ln.startswith("- example: ")]
    assert len(examples) == len(hostile)  # one cluster each: every caption is shown
    assert all("|" not in ln.replace("\\|", "") for ln in examples)
    assert any(ln.startswith("- example: '=cmd") for ln in examples)
    assert any("&lt;script&gt;" in ln for ln in examples)
