"""The whole build graph on six demo clips: every benchmark invariant on real outputs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import (
    ComponentRow,
    PairRow,
    SampleRow,
    SceneRow,
    SourceRow,
    SplitRow,
    StemRow,
)
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore
from madbench_common.media.audio import read_wav_bytes, rms_dbfs
from madbench_common.media.mix import fit_track
from madbench_common.media.mux import video_packets
from madbench_common.models.taxonomy import load_taxonomy
from madbench_common.pipeline.status import collect_status

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]  # the fixture builds the graph


@pytest.fixture(scope="module")
def run(demo_build: RunStore) -> RunStore:
    return demo_build


def _rows(run: RunStore, stage: str, cls: type) -> list:
    return read_manifest_bytes(cls, run.get_bytes(f"{stage}/manifest.parquet"))


def _audio(run: RunStore, uri: str, sha: str) -> np.ndarray:
    return read_wav_bytes(run.get_bytes(run.key_of(uri), sha))[0]


def _samples(run: RunStore) -> list[SampleRow]:
    samples = [s for s in _rows(run, "assemble", SampleRow) if s.ok]
    assert samples, "no clip was assembled"
    return samples


def test_scenes_and_pairs(run: RunStore) -> None:
    tax = load_taxonomy()
    scenes = _rows(run, "scene", SceneRow)
    assert scenes and all(s.scene_label in tax.fine and s.caption_source == "hint"
                          for s in scenes)
    assert all(s.mismatch_label in tax.fine[s.scene_label].mismatch for s in scenes)
    pairs = _rows(run, "pairing", PairRow)
    for p in pairs:
        assert p.clip_id != p.target_clip_id
        if "gender" not in p.relaxed:
            assert p.gender == p.target_gender
    assert max(Counter(p.clip_id for p in pairs).values(), default=0) <= 4
    assert all(p.split == p.target_split and not p.relaxed for p in pairs)


def test_variants_share_components_and_inherit_splits(run: RunStore) -> None:
    splits = {r.clip_id: r.split for r in _rows(run, "split", SplitRow)}
    qc = {c.component_id: c for c in _rows(run, "component_qc", ComponentRow)}
    by: dict[tuple[str, str], dict[str, SampleRow]] = {}
    for s in _samples(run):
        assert s.split == splits[s.clip_id]
        if s.protocol == "scene_consistency":
            continue
        assert s.sample_id == f"{s.clip_id}-{s.variant}-{s.protocol}"
        by.setdefault((s.clip_id, s.protocol), {})[s.variant] = s
    for (_, protocol), v in by.items():
        assert set(v) == {"R", "S", "E", "Q"}
        assert v["S"].speech_component_id == v["Q"].speech_component_id != ""
        assert v["E"].env_component_id == v["Q"].env_component_id != ""
        assert v["R"].audio_sha256 != v["S"].audio_sha256 != v["Q"].audio_sha256
        for comp in (v["Q"].speech_component_id, v["Q"].env_component_id):
            assert qc[comp].qc_pass, comp
        labels = [(x.speech_fake, x.env_fake) for x in (v["R"], v["S"], v["E"], v["Q"])]
        assert labels == [(False, False), (True, False), (False, True), (True, True)]
        if protocol != "balanced":
            assert v["E"].scene_consistent == (protocol == "scene_matched")


def test_mismatches_are_valid(run: RunStore) -> None:
    tax = load_taxonomy()
    sources = {r.clip_id: r for r in _rows(run, "ingest", SourceRow)}
    splits = {r.clip_id: r.split for r in _rows(run, "split", SplitRow)}
    for s in _samples(run):
        if s.scene_class != "D":
            continue
        assert not s.scene_consistent and s.mismatch_mode in ("prompt", "replaced")
        assert s.env_scene_label in tax.fine[s.scene_label].mismatch
        if s.mismatch_mode == "replaced":
            d = s.env_donor_clip_id
            assert d != s.clip_id and splits[d] == s.split
            assert sources[d].source_group != sources[s.clip_id].source_group


def test_levels_are_source_relative_and_r_is_the_source(run: RunStore) -> None:
    stems = {r.clip_id: r for r in _rows(run, "separate", StemRow)}
    comps = {c.component_id: c for c in _rows(run, "component_qc", ComponentRow)}
    for s in _samples(run):
        stem = stems[s.clip_id]
        s_hat = _audio(run, stem.speech_uri, stem.speech_sha256)
        e_hat = _audio(run, stem.env_uri, stem.env_sha256)
        mix = _audio(run, s.audio_uri, s.audio_sha256)
        speech = s_hat if not s.speech_fake else _audio(
            run, comps[s.speech_component_id].uri, comps[s.speech_component_id].sha256)
        env = e_hat if not s.env_fake else _audio(
            run, comps[s.env_component_id].uri, comps[s.env_component_id].sha256)
        if s.env_donor_clip_id and not s.env_fake:  # a D-R/S-R swap: the donor's real ê
            donor = stems[s.env_donor_clip_id]
            env = fit_track(_audio(run, donor.env_uri, donor.env_sha256), len(mix))
        env = np.pad(env, (0, max(0, len(mix) - len(env))))[: len(mix)]
        g_s = 10 ** ((s.speech_gain_db + s.common_gain_db) / 20)
        g_e = 10 ** ((s.env_gain_db + s.common_gain_db) / 20)
        assert np.allclose(mix, speech * g_s + env * g_e, atol=1e-4)
        assert abs(rms_dbfs(speech * g_s) - rms_dbfs(s_hat) - s.common_gain_db) < 0.5
        assert abs(rms_dbfs(env * g_e) - rms_dbfs(e_hat) - s.common_gain_db) < 0.5
        if s.variant == "R" and not s.env_donor_clip_id:
            assert s.speech_gain_db == s.env_gain_db == 0.0
            assert np.allclose(mix, (s_hat + e_hat) * 10 ** (s.common_gain_db / 20), atol=1e-5)


def test_video_stream_is_byte_identical(run: RunStore, tmp_path: Path) -> None:
    sources = {r.clip_id: r for r in _rows(run, "ingest", SourceRow)}
    seen = set()
    for s in _samples(run):
        if s.video_sha256 in seen:
            continue
        seen.add(s.video_sha256)
        src, out = tmp_path / "src.mp4", tmp_path / "out.mp4"
        row = sources[s.clip_id]
        src.write_bytes(run.get_bytes(run.key_of(row.video_uri), row.video_sha256))
        out.write_bytes(run.get_bytes(run.key_of(s.video_uri), s.video_sha256))
        assert video_packets(out) == video_packets(src)
        assert s.mux_sample_rate == row.orig_sample_rate


def test_status_shows_table_one_counts(run: RunStore) -> None:
    status = {s.stage: s for s in collect_status(run, build_graph()).stages}
    assert all(s.done for s in status.values())
    assert status["source_qc"].counts["eligible"] >= 1
    qc = status["component_qc"].counts
    assert qc["speech_generated"] >= qc["speech_retained"] >= 1
    assert qc["env_generated"] >= qc["env_retained"] >= 1
    samples = status["assemble"].counts
    assert samples["clips"] >= 1 and samples["protocols_hold_4x_same_clips"] is True
    assert any(k.startswith("scene_mismatched/") for k in samples)


def test_every_protocol_holds_the_same_clips_four_times(run: RunStore) -> None:
    core = [s for s in _samples(run) if s.protocol != "scene_consistency"]
    per: dict[str, set[str]] = {}
    for s in core:
        per.setdefault(s.protocol, set()).add(s.clip_id)
    assert set(per) == {"balanced", "scene_matched", "scene_mismatched"}
    clips = per["balanced"]
    assert all(v == clips for v in per.values())
    assert Counter(s.protocol for s in core) == dict.fromkeys(per, 4 * len(clips))


def test_scene_consistency_samples_are_paired_and_share_files(run: RunStore) -> None:
    """§5.3: D-R/S-R swap a donor's real ê into R; D-S relabels the matched/mismatched E."""
    sources = {r.clip_id: r for r in _rows(run, "ingest", SourceRow)}
    scenes = {r.clip_id: r for r in _rows(run, "scene", SceneRow)}
    tax = load_taxonomy()
    samples = _samples(run)
    sc = [s for s in samples if s.protocol == "scene_consistency"]
    core = {(s.clip_id, s.protocol, s.variant): s for s in samples
            if s.protocol != "scene_consistency"}
    by: dict[tuple[str, str], dict[bool, SampleRow]] = {}
    for s in sc:
        by.setdefault((s.clip_id, s.sc_condition), {})[s.scene_consistent] = s
    assert all(set(v) == {True, False} for v in by.values())  # paired per condition
    clips = {c for c, *_ in core}
    assert {c for c, cond in by if cond == "D-S"} == clips
    for (clip, cond), pair in by.items():
        yes, no = pair[True], pair[False]
        if cond == "D-S":
            assert yes.audio_sha256 == core[(clip, "scene_matched", "E")].audio_sha256
            assert no.audio_sha256 == core[(clip, "scene_mismatched", "E")].audio_sha256
            continue
        assert yes.variant == no.variant == "R" and not no.env_fake and not no.speech_fake
        assert yes.audio_sha256 == core[(clip, "balanced", "R")].audio_sha256
        donor = no.env_donor_clip_id
        assert donor and no.split == scenes[donor].split
        assert sources[donor].source_group != sources[clip].source_group
        assert no.env_donor_scene_label == scenes[donor].scene_label
        # §5.3: D-R from another coarse scene, S-R the same coarse scene, another fine label
        same_coarse = tax.fine[no.env_donor_scene_label].coarse == scenes[clip].coarse_label
        assert same_coarse == (cond == "S-R")
        assert cond == "D-R" or no.env_donor_scene_label != scenes[clip].scene_label
        assert no.env_fit in ("exact", "trim", "loop") and yes.env_fit == ""
