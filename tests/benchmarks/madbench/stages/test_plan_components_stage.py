"""Component plan: balanced rotation of generator settings, one stage per setting."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import (
    SceneRow,
    SourceQCRow,
    SourceRow,
    SplitRow,
    StemRow,
)
from madbench_common.benchmarks.madbench.stages.clips import ClipInputs
from madbench_common.benchmarks.madbench.stages.plan_components import (
    PlanComponentsStage,
    generator_stages,
)
from madbench_common.core.manifest import Provenance
from madbench_common.models.taxonomy import build_prompt


def test_six_speech_and_six_env_settings_two_per_branch() -> None:
    stages = list(build_graph())
    for kind, branches in (("speech", ("tts_same", "tts_cross", "vc")),
                           ("env", ("t2a", "v2a", "a2a"))):
        gens = generator_stages(stages, kind)
        assert len(gens) == 6
        assert Counter(s.params["branch"] for s in gens) == dict.fromkeys(branches, 2)
        assert all(s.gpu == 1 and s.model for s in gens)


def _stage(targets: int, prompts: int) -> PlanComponentsStage:
    ctx = SimpleNamespace(params={"targets": targets, "mismatch_prompts": prompts},
                          stage=SimpleNamespace(name="plan_components"), graph=build_graph(),
                          rng=lambda *s: np.random.default_rng(0),
                          provenance=lambda *a: Provenance("plan_components", "plan", "", "", 0))
    stage = PlanComponentsStage(ctx)  # type: ignore[arg-type]
    clips = {}
    for cid, text in (("a", "hello there"), ("b", "bee text"), ("c", "sea text"),
                      ("d", "dee text"), ("e", "e text")):
        clips[cid] = ClipInputs(
            SourceRow(clip_id=cid, source_path="", duration=4.0, sample_rate=16000),
            StemRow(clip_id=cid), SourceQCRow(clip_id=cid, transcript=text),
            SplitRow(clip_id=cid, split="train"),
            SceneRow(clip_id=cid, scene_label="forest", prompt="forest prompt",
                     negative_prompt="forest negative", mismatch_label="kitchen"))
    stage.__dict__["clips"] = clips
    stage.__dict__["targets"] = {"a": ["b", "c", "d", "e"], "b": ["a"]}
    return stage


def test_paper_plan_is_18_speech_and_12_env_candidates_per_clip() -> None:
    """§3.3: 2 same-identity + 4 targets × (2 cross TTS + 2 VC) = 18; §3.4: 6 + 2 × 3."""
    rows = _stage(4, 3).run_items(["all"])
    a_speech = [r for r in rows if r.clip_id == "a" and r.component == "speech"]
    assert len(a_speech) == 18
    assert Counter(r.branch for r in a_speech) == {"tts_same": 2, "tts_cross": 8, "vc": 8}
    assert Counter(r.target_clip_id for r in a_speech if r.target_clip_id) == dict.fromkeys(
        "bcde", 4)
    b_speech = [r for r in rows if r.clip_id == "b" and r.component == "speech"]
    assert len(b_speech) == 2 + 1 * 4  # one target: fewer candidates, nothing relaxed
    a_env = [r for r in rows if r.clip_id == "a" and r.component == "env"]
    assert len(a_env) == 12 and sum(not r.scene_match for r in a_env) == 6
    mism = [r for r in a_env if not r.scene_match]
    assert all(r.branch == "t2a" for r in mism)
    for setting in ("env_t2a_a", "env_t2a_b"):
        labels = [r.prompt_label for r in mism if r.setting == setting]
        assert len(set(labels)) == 3 and labels[0] in labels and "kitchen" in labels
    assert len({r.component_id for r in rows}) == len(rows)
    # the prompt's scene decides the negative prompt (its exclusions + speech/music)
    assert {r.negative_prompt for r in a_env if r.scene_match} == {"forest negative"}
    assert all(r.negative_prompt == build_prompt(r.prompt_label, 4.0).negative
               and "speech" in r.negative_prompt for r in mism)


def test_cross_identity_tts_takes_the_targets_transcript_as_ref_text() -> None:
    rows = _stage(4, 1).run_items(["all"])
    for r in rows:
        if r.clip_id != "a" or r.component != "speech":
            continue
        assert r.prompt == "hello there"  # the source transcript is what is spoken
        if r.target_clip_id:
            assert r.ref_clip_id == r.target_clip_id
            assert r.ref_text == {"b": "bee text", "c": "sea text", "d": "dee text",
                                  "e": "e text"}[r.target_clip_id]
        else:
            assert r.ref_text == "hello there" and r.ref_clip_id == "a"


def test_demo_knob_shrinks_the_plan() -> None:
    rows = _stage(1, 1).run_items(["all"])
    a = [r for r in rows if r.clip_id == "a"]
    assert sum(r.component == "speech" for r in a) == 6
    assert sum(r.component == "env" for r in a) == 8
