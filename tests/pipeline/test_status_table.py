"""``madbench status`` Table 1 counts on hand-built manifests (paper §3.5, Table 1)."""

from __future__ import annotations

from madbench_common.benchmarks.madbench.rows import ComponentRow, PairRow, SampleRow
from madbench_common.pipeline.status import RunStatus, StageStatus, _stage_counts, table_one


def _samples() -> list[SampleRow]:
    rows = []
    for clip, split in (("a", "train"), ("b", "test")):
        for proto in ("balanced", "scene_matched", "scene_mismatched"):
            rows += [SampleRow(sample_id=f"{clip}-{v}-{proto}", clip_id=clip, variant=v,
                               protocol=proto, split=split) for v in "RSEQ"]
        for cond in ("D-R", "D-S"):
            rows += [SampleRow(sample_id=f"{clip}-{cond}-{c}", clip_id=clip, variant="R",
                               protocol="scene_consistency", sc_condition=cond, split=split,
                               scene_consistent=c,
                               env_fit="loop" if (cond, clip, c) == ("D-R", "b", False)
                               else "") for c in (True, False)]
    return rows


def test_samples_per_protocol_are_four_times_the_same_clips() -> None:
    counts = _stage_counts(_samples())
    assert counts["clips"] == 2 and counts["clips_train"] == counts["clips_test"] == 1
    assert counts["balanced"] == counts["scene_matched"] == 8
    assert counts["protocols_hold_4x_same_clips"] is True
    assert counts["scene_consistency/D-R/consistent"] == 2
    assert counts["scene_consistency/D-S/inconsistent"] == 2
    broken = [r for r in _samples() if r.sample_id != "b-Q-scene_matched"]
    assert _stage_counts(broken)["protocols_hold_4x_same_clips"] is False


def test_components_per_setting_and_matched_or_mismatched() -> None:
    rows = [ComponentRow(component_id=f"a.{s}.{i}", clip_id="a", component="env",
                         setting=s, scene_match=m, uri="u", qc_pass=p, stage="component_qc")
            for i, (s, m, p) in enumerate((("env_t2a_a", True, True),
                                           ("env_t2a_a", False, False),
                                           ("env_v2a_a", True, True)))]
    counts = _stage_counts(rows)
    assert (counts["env_generated"], counts["env_retained"]) == (3, 2)
    assert (counts["env_t2a_a_generated"], counts["env_t2a_a_retained"]) == (2, 1)
    assert (counts["env_mismatched_generated"], counts["env_mismatched_retained"]) == (1, 0)


def test_sources_with_fewer_targets_are_counted() -> None:
    pairs = [PairRow(pair_id=f"a>{t}", clip_id="a", target_clip_id=t) for t in "bcde"]
    pairs += [PairRow(pair_id="b>a", clip_id="b", target_clip_id="a")]
    counts = _stage_counts(pairs)
    assert counts["sources_with_4_targets"] == 1 and counts["sources_with_1_targets"] == 1


def test_table_one_rows() -> None:
    status = RunStatus("r", "file:///r", [
        StageStatus("source_qc", True, counts={"eligible": 5}),
        StageStatus("assemble", True, counts=_stage_counts(_samples()))], [])
    table = dict(table_one(status))
    assert table["Generation-eligible source clips"] == "5"
    assert table["Source clips (train / val / test)"] == "2 (1/0/1)"
    assert table["Samples per protocol, balanced (train / val / test)"] == "8 (4/0/4)"
    assert table["Every protocol = 4 × the same clips"] == "True"
    assert table["Scene consistency D-R (consistent / inconsistent)"] == "2 / 2"
    # b's D-R donor ê was shorter than b and looped: one of the two inconsistent samples
    assert table["  D-R donor ê looped to the clip's length (shorter donor)"] == "1 / 2 (50 %)"
    assert table["  S-R donor ê looped to the clip's length (shorter donor)"] == "0 / 0"
