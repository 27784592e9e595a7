"""The dataset card's licence claim is never wrong: clips are matched by the id ingest gave
them (sanitised), and a clip whose licence cannot be read makes the card say so."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.release.card import (
    CardInputs,
    _licence_section,
    _md,
    components,
)
from madbench_common.benchmarks.madbench.rows import SampleRow
from madbench_common.benchmarks.madbench.sources import clip_id_of
from madbench_common.core.manifest import write_manifest_bytes
from madbench_common.core.store import FileStore, RunStore

NC = "CC-BY-NC-4.0"


def _run(tmp: Path, clip_ids: list[str]) -> RunStore:
    """A run whose assemble stage holds one real sample per clip."""
    run = RunStore(FileStore(tmp / "store"), "r")
    data = write_manifest_bytes(SampleRow, [SampleRow(sample_id=f"{c}-R-balanced", clip_id=c,
                                                      variant="R") for c in clip_ids])
    run.put_bytes("assemble/manifest.parquet", data)
    run.put_bytes("assemble/_SUCCESS", json.dumps(
        {"manifest_sha256": hashlib.sha256(data).hexdigest()}).encode())
    return run


def _sources(tmp: Path, rows: list[dict[str, str]]) -> str:
    path = tmp / "sources.csv"
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=["clip_id", "path", "license"])
        w.writeheader()
        w.writerows(rows)
    return str(path)


def _section(run: RunStore, sources: str | None) -> str:
    comps = components(CardInputs(run, build_graph(), {}, sources=sources), [])
    return _licence_section(comps)


def test_a_non_commercial_clip_whose_id_is_sanitised_makes_the_card_non_commercial(
        tmp_path: Path) -> None:
    raw = "Interview #3 (café)"  # the run knows it as its sanitised id
    cid = clip_id_of(raw, "x.mp4")
    assert cid != raw
    run = _run(tmp_path, [cid, "other"])
    sources = _sources(tmp_path, [{"clip_id": raw, "path": "x.mp4", "license": NC},
                                  {"clip_id": "other", "path": "o.mp4", "license": "CC-BY-4.0"}])
    text = _section(run, sources)
    assert "**This dataset is non-commercial.**" in text and NC in text
    assert "No component is under a non-commercial licence" not in text


def test_an_id_from_the_file_name_is_matched_too(tmp_path: Path) -> None:
    run = _run(tmp_path, [clip_id_of("", "clips/my clip.mp4")])
    text = _section(run, _sources(tmp_path, [{"clip_id": "", "path": "clips/my clip.mp4",
                                              "license": "CC-BY-NC-SA-4.0"}]))
    assert "**This dataset is non-commercial.**" in text


def test_an_unmatched_clip_forbids_the_no_non_commercial_claim(tmp_path: Path) -> None:
    run = _run(tmp_path, ["a", "b"])
    sources = _sources(tmp_path, [{"clip_id": "a", "path": "a.mp4", "license": "CC-BY-4.0"}])
    for text in (_section(run, sources), _section(run, None),
                 _section(run, str(tmp_path))):  # no CSV; a folder, not a CSV
        assert "No component is under a non-commercial licence" not in text
        assert "could not be read" in text


def test_licence_and_names_from_input_are_escaped(tmp_path: Path) -> None:
    run = _run(tmp_path, ["a"])
    evil = "<script>alert(1)</script> | [x](javascript:alert(1))"
    text = _section(run, _sources(tmp_path, [{"clip_id": "a", "path": "a.mp4",
                                              "license": evil}]))
    assert "<script>" not in text and "](javascript" not in text
    assert "&lt;script&gt;" in text
    table = _md(["a"], [["x\n| y <img src=x onerror=alert(1)>"]])
    assert "<img" not in table and table.count("\n") == 2
