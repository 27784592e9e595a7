"""Component selection for assembly: QC-passed only, balanced settings, valid mismatches."""

from __future__ import annotations

from collections import Counter

import numpy as np

from madbench_common.benchmarks.madbench.rows import (
    ComponentRow,
    SceneRow,
    SourceQCRow,
    SourceRow,
    SplitRow,
    StemRow,
)
from madbench_common.benchmarks.madbench.stages.assemble import select_components
from madbench_common.benchmarks.madbench.stages.clips import ClipInputs
from madbench_common.models.taxonomy import load_taxonomy, pick_mismatch

SCENES = ["forest", "cafe", "forest", "cafe", "beach", "boat", "forest", "cafe"] * 3


def _clips() -> dict[str, ClipInputs]:
    out = {}
    for i, label in enumerate(SCENES):
        cid = f"c{i:02d}"
        out[cid] = ClipInputs(
            SourceRow(clip_id=cid, source_path="", source_group=f"g{i // 2}", duration=1.0,
                      sample_rate=16000),
            StemRow(clip_id=cid), SourceQCRow(clip_id=cid),
            SplitRow(clip_id=cid, split="train" if i < 18 else "test"),
            SceneRow(clip_id=cid, scene_label=label))
    return out


def _components(clips: dict[str, ClipInputs], fail: set[str] = frozenset()) -> list[ComponentRow]:
    rows = []
    for i, (cid, c) in enumerate(clips.items()):
        split, label = c.split.split, c.scene.scene_label  # type: ignore[union-attr]
        for setting, comp, branch in (("speech_vc_a", "speech", "vc"),
                                      ("speech_tts_same_a", "speech", "tts_same"),
                                      ("speech_tts_cross_b", "speech", "tts_cross"),
                                      ("env_t2a_a", "env", "t2a"), ("env_v2a_a", "env", "v2a"),
                                      ("env_a2a_b", "env", "a2a")):
            rows.append(ComponentRow(component_id=f"{cid}.{setting}", clip_id=cid,
                                     component=comp, branch=branch, setting=setting,
                                     generator=setting, split=split, scene_label=label,
                                     prompt_label=label, qc_pass=f"{cid}.{setting}" not in fail))
        rows.append(ComponentRow(component_id=f"{cid}.env_t2a_a.mismatch", clip_id=cid,
                                 component="env", branch="t2a", setting="env_t2a_a",
                                 scene_match=False, split=split, scene_label=label,
                                 prompt_label=pick_mismatch(label, i), qc_pass=True))
    return rows


def test_only_qc_passed_components_are_selected() -> None:
    clips = _clips()
    fail = {"c00.speech_vc_a", "c00.speech_tts_same_a"}
    sel = select_components(clips, _components(clips, fail), 2, np.random.default_rng(0))
    assert sel["c00"].speech is not None and sel["c00"].speech.setting == "speech_tts_cross_b"
    everything = _components(clips, {f"c01.{s}" for s in ("speech_vc_a", "speech_tts_same_a",
                                                          "speech_tts_cross_b")})
    sel = select_components(clips, everything, 2, np.random.default_rng(0))
    assert sel["c01"].speech is None and "speech" in sel["c01"].missing


def test_settings_are_balanced_within_each_split() -> None:
    clips = _clips()
    sel = select_components(clips, _components(clips), 2, np.random.default_rng(1))
    for split in ("train", "test"):
        ids = [c for c in sel if clips[c].split.split == split]
        for attr in ("speech", "env_match", "env_mismatch"):
            use = Counter(getattr(sel[c], attr).setting for c in ids)
            assert max(use.values()) - min(use.values()) <= 1, (split, attr, use)
        flags = Counter(sel[c].balanced_mismatch for c in ids)
        assert abs(flags[True] - flags[False]) <= 1


def test_replaced_mismatches_are_incompatible_same_split_other_group_and_capped() -> None:
    clips = _clips()
    tax = load_taxonomy()
    sel = select_components(clips, _components(clips), 2, np.random.default_rng(2))
    donors: Counter[str] = Counter()
    replaced = 0
    for cid, s in sel.items():
        env = s.env_mismatch
        assert env is not None
        me = clips[cid]
        assert env.prompt_label in tax.fine[me.scene.scene_label].mismatch  # type: ignore[union-attr]
        if s.mismatch_mode == "replaced":
            replaced += 1
            donor = clips[env.clip_id]
            assert env.clip_id != cid and env.branch in ("v2a", "a2a")
            assert donor.source.source_group != me.source.source_group
            assert donor.split.split == me.split.split
            donors[env.component_id] += 1
        else:
            assert s.mismatch_mode == "prompt" and env.clip_id == cid and env.branch == "t2a"
    assert replaced and max(donors.values()) <= 2
