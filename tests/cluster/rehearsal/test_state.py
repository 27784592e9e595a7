"""The work folder's state: the parts of a pass resumed across sessions."""

from __future__ import annotations

from pathlib import Path

from madbench_common.cluster.rehearsal.state import State


def test_the_record_adds_up_the_parts_of_a_pass_resumed_across_sessions(
        tmp_path: Path) -> None:
    """A pass of hours runs in parts; the record of the part that completed it said only
    that part's minutes (6.2 of about 141). Each part is in the state from its start, its
    wall time kept up to date at every save, so a part killed outright still counts; a run
    after a complete pass starts a new pass."""
    from madbench_common.cluster.rehearsal.records import _wall_text, add_parts

    path = tmp_path / "state.json"
    state = State(path)
    state.begin_part()
    state.data["passes"][-1]["outcome"] = "complete"  # an earlier, complete pass
    state.data["passes"][-1]["wall_s"] = 999
    state._part = None
    state.begin_part()  # killed outright: nothing ends it; a later process reads the file
    state._part_t0 -= 120
    state.update_image("qc", image_id="sha")
    killed = State(path)
    assert killed.data["passes"][-1]["outcome"] == "killed"
    assert killed.data["passes"][-1]["wall_s"] == 120
    killed.begin_part()
    killed.end_part("interrupted")
    killed.begin_part()
    killed._part_t0 -= 60
    killed.end_part("complete")
    parts = killed.pass_parts()
    assert [p["outcome"] for p in parts] == ["killed", "interrupted", "complete"]
    rec = {"wall_s": 60, "complete": True}
    add_parts(rec, killed)
    # the headline is the pass's: every part added up; this part's is kept beside it
    assert rec["wall_s"] == 120 + parts[1]["wall_s"] + 60 and rec["part_wall_s"] == 60
    assert _wall_text(rec).startswith(f"{rec['wall_s'] / 60:.1f} min in 3 parts (this "
                                      "part 1.0 min)")
    again = State(path)
    again.begin_part()
    assert [p["outcome"] for p in again.pass_parts()] == ["killed"]  # a new pass
