"""DEAF design, sentence sets, clip plans (Table 1 counts), prompts and trials per level."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from madbench_common.benchmarks.deaf.clip_plan import (
    ClipSpec,
    bsc_control_backgrounds,
    plan_bsc,
    plan_esc,
    plan_sic,
)
from madbench_common.benchmarks.deaf.design import (
    CROSS_CATEGORY,
    ENVIRONMENTS,
    category_of,
    cross_mismatch,
    level2_bsc_claim,
    level2_extension_claims,
    within_mismatch,
)
from madbench_common.benchmarks.deaf.prompts import load_judge_prompt, load_prompts
from madbench_common.benchmarks.deaf.sentences import (
    committed_sentences,
    load_sentences,
    read_emis_sentences,
    select_subset,
)
from madbench_common.benchmarks.deaf.trials import build_trials, sic_conflict_attrs
from madbench_common.core.errors import ConfigError

SENTENCES = committed_sentences()


def test_committed_sentence_counts_follow_the_paper() -> None:
    by = Counter((s.conflict, s.subdim, s.condition) for s in SENTENCES)
    assert sum(v for (c, _, _), v in by.items() if c == "esc") == 104
    assert by[("esc", "", "explicit")] == by[("esc", "", "implicit")] == 39
    assert by[("esc", "", "neutral")] == 26
    assert by[("bsc", "", "explicit")] == by[("bsc", "", "implicit")] == 36
    assert by[("bsc", "", "neutral")] == 12
    sic = Counter(s.subdim for s in SENTENCES if s.conflict == "sic")
    assert sic == {"gender": 20, "age": 20, "combined": 32, "neutral": 10}
    bsc_env = Counter(s.label for s in SENTENCES if s.conflict == "bsc" and s.label != "neutral")
    assert set(bsc_env) == {e.code for e in ENVIRONMENTS} and set(bsc_env.values()) == {4}


def test_pairings_follow_appendix_a22() -> None:
    assert [within_mismatch(c) for c in ("DWASHING", "DKITCHEN", "DLIVING")] == [
        "DKITCHEN", "DLIVING", "DWASHING"]
    for env in ENVIRONMENTS:
        assert category_of(within_mismatch(env.code)) == env.category != \
            category_of(cross_mismatch(env.code))
    assert CROSS_CATEGORY["Domestic"] == "Street" and CROSS_CATEGORY["Street"] == "Domestic"
    assert CROSS_CATEGORY["Office"] == "Nature" and CROSS_CATEGORY["Public"] == "Domestic"


def test_table1_counts() -> None:
    esc = [c for s in "abc" for c in plan_esc(SENTENCES, s)]
    assert len(esc) == 1248 and sum(c.matched for c in esc) == 312
    planned = plan_bsc(SENTENCES)
    bsc = [c for c in planned if c.pairing != "control"]  # eq. 2's controls: not in Table 1
    controls = [c for c in planned if c.pairing == "control"]
    assert controls and all(c.semantic == "neutral" and not c.matched for c in controls)
    for c in controls:  # each is its neutral sentence over an environment it otherwise lacks
        own = {x.acoustic for x in bsc if x.sentence_id == c.sentence_id}
        assert c.acoustic not in own and len(own) == 3
    assert len(bsc) == 1260 and Counter(c.snr_db for c in bsc) == {s: 252 for s in
                                                                   (-10, -5, 0, 5, 10)}
    per_snr = Counter(c.pairing for c in bsc if c.snr_db == 0)
    assert per_snr == {"matched": 72, "within": 72, "cross": 72, "neutral": 36}
    for c in (c for c in bsc if c.pairing == "neutral" and c.snr_db == 0):
        cats = [category_of(x.acoustic) for x in bsc if x.sentence_id == c.sentence_id
                and x.snr_db == 0]
        assert len(set(cats)) == 3  # three different categories per neutral sentence
    sic = plan_sic(SENTENCES)
    assert len(sic) == 248 and sum(c.subdim == "neutral" for c in sic) == 40
    assert sum(c.matched for c in sic) == 72  # one matched voice per identity sentence


def test_trial_counts_per_level() -> None:
    clips = [c for s in "abc" for c in plan_esc(SENTENCES, s)] + plan_bsc(SENTENCES) + \
        plan_sic(SENTENCES)
    prompts = load_prompts()
    trials = build_trials(clips, prompts)
    by = Counter((t.conflict, t.level, t.question) for t in trials)
    assert by[("esc", "L1", "q1")] == by[("esc", "L3", "q1")] == by[("esc", "L1", "q2")] == 936
    assert by[("esc", "L2", "q1")] == 26 * 3 * 3
    assert by[("bsc", "L1", "q1")] == by[("bsc", "L3", "q1")] == 144 * 5
    # L2 BSC (A.3): a neutral clip over a Street, Nature or Office background gets A.3's
    # claim for its category; Domestic, Public and Transportation backgrounds get none.
    neutral = [c for c in clips if c.conflict == "bsc" and c.pairing == "neutral"]
    a3 = [c for c in neutral if category_of(c.acoustic) in ("Street", "Nature", "Office")]
    assert by[("bsc", "L2", "q1")] == len(a3) > 0
    l2 = [t for t in trials if t.conflict == "bsc" and t.level == "L2"]
    beach = [t for t in l2 if category_of(t.test_stimulus.split("-")[3]) == "Street"]
    assert {t.claim for t in beach} == {"beach"}
    assert {(t.status, t.reason) for t in beach} == {("rejected", "control_unavailable")}
    # every other L2 BSC trial (and every L2x one) has the same sentence as its control
    scored = [t for t in trials if t.conflict == "bsc" and t.level in ("L2", "L2x")
              and t.status != "rejected"]
    assert len(scored) == len(l2) - len(beach) + by[("bsc", "L2x", "q1")]
    stim = {c.stimulus_id: c for c in clips}
    for t in scored:
        control = stim[t.control_stimulus]
        assert control.sentence_id == t.sentence_id and control.acoustic == t.claim
        assert control.snr_db == t.snr_db
    assert not any(t.status == "rejected" for t in trials if t.reason != "control_unavailable")
    assert by[("sic", "L1", "q1")] == 136 and by[("sic", "L2", "q1")] == 80
    for t in trials:
        if t.question == "q1":
            assert (t.control_stimulus or t.reason == "control_unavailable")
            assert t.correct != t.trap
            assert (t.level == "L1") == (not t.claim)
        if t.level == "L3":
            assert t.prompt.startswith(prompts.claim(t.conflict, t.claim))


def test_level2_esc_claims_follow_appendix_a3() -> None:
    p = load_prompts()
    assert p.esc_level2 == {"happy": "sad", "sad": "happy", "angry": "neutral"}
    assert p.claim("esc", "sad") == "The speaker sounds very sad and melancholic in this " \
        "recording."
    assert p.text("esc", "q1", "sad").endswith(p.question("esc", "q1"))
    assert len(p.version) == 12 and len(load_judge_prompt().version) == 12


def test_sic_conflict_attrs() -> None:
    assert sic_conflict_attrs("young_male", "female") == ("gender",)
    assert sic_conflict_attrs("young_male", "elderly_female") == ("gender", "age")
    assert sic_conflict_attrs("young_female", "elderly_female") == ("age",)


def test_subset_keeps_every_stratum() -> None:
    subset = select_subset(SENTENCES, 1)
    assert {s.stratum for s in subset} == {s.stratum for s in SENTENCES}
    assert len(subset) < 50


def test_user_csv_replaces_its_conflict_and_is_validated(tmp_path: Path) -> None:
    good = tmp_path / "s.csv"
    good.write_text("sentence_id,conflict,subdim,condition,label,text\n"
                    "u1,esc,,explicit,happy,I am so glad.\n")
    loaded = load_sentences(str(good))
    assert [s.sentence_id for s in loaded if s.conflict == "esc"] == ["u1"]
    bad = tmp_path / "bad.csv"
    bad.write_text("sentence_id,conflict,subdim,condition,label,text\nu1,esc,,explicit,joy,x\n")
    with pytest.raises(ConfigError, match="emotion 'joy'"):
        load_sentences(str(bad))


def test_emis_copy_is_read_from_names_and_table(tmp_path: Path) -> None:
    (tmp_path / "sentences.csv").write_text("ID,Sentence\n1,I am thrilled today.\n"
                                            "2,The bus leaves at noon.\n")
    for name in ("1_happyexplicit_sad_0011_cosyvoice.wav", "2_neutral_angry_0012_f5.wav"):
        (tmp_path / name).write_bytes(b"")
    got = {s.sentence_id: s for s in read_emis_sentences(tmp_path)}
    assert got["emis001"].label == "happy" and got["emis001"].condition == "explicit"
    assert got["emis002"].label == "neutral" and got["emis002"].condition == "neutral"
    empty = tmp_path / "no-wavs"
    empty.mkdir()
    (empty / "sentences.csv").write_text("ID,Sentence\n1,I am thrilled today.\n")
    with pytest.raises(ConfigError, match="no EMIS WAVs"):
        read_emis_sentences(empty)


def _neutral(sid: str, bg: str, snr: int = 5) -> ClipSpec:
    return ClipSpec(f"bsc-{sid}-neutral-{bg}-snr{snr}", "bsc", sid, "", "neutral",
                    "Let me know which option you prefer.", "neutral", bg, False,
                    pairing="neutral", snr_db=snr)


def _control(sid: str, bg: str, snr: int = 5) -> ClipSpec:
    return ClipSpec(f"bsc-{sid}-control-{bg}-snr{snr}", "bsc", sid, "", "neutral",
                    "Let me know which option you prefer.", "neutral", bg, False,
                    pairing="control", snr_db=snr)


def test_level2_bsc_claims_and_same_sentence_controls_per_appendix_a3_and_eq2() -> None:
    """A.3's BSC claims by background category (traffic -> beach, nature -> busy city with
    traffic = STRAFFIC, office -> forest with birds = NPARK), each trial's control the same
    sentence over the claimed environment (eq. 2); this project's Within/Cross claims are
    level L2x."""
    assert [level2_bsc_claim(c) for c in ("NRIVER", "OOFFICE", "SCAFE", "DKITCHEN", "TBUS",
                                          "PRESTO")] == ["STRAFFIC", "NPARK", "beach", None,
                                                         None, None]
    assert level2_extension_claims("DKITCHEN") == [("DLIVING", "within"), ("SCAFE", "cross")]
    assert level2_extension_claims("OOFFICE") == [("OHALLWAY", "within")]
    # n1 over DKITCHEN, NPARK, OOFFICE; n2 over STRAFFIC (a Nature claim's environment)
    assert bsc_control_backgrounds(["DKITCHEN", "NPARK", "OOFFICE"]) == [
        "DLIVING", "SCAFE", "STRAFFIC", "NRIVER", "OHALLWAY"]  # NPARK: n1 has it already
    clips = [_neutral("n1", "DKITCHEN"), _neutral("n1", "NPARK"), _neutral("n1", "OOFFICE"),
             _control("n1", "DLIVING"), _control("n1", "SCAFE"), _control("n1", "STRAFFIC"),
             _neutral("n2", "STRAFFIC")]
    trials = {(t.test_stimulus.split("-")[3], t.level, t.subdim): t
              for t in build_trials(clips, load_prompts()) if t.sentence_id == "n1"}
    claims = {k: (t.claim, t.control_stimulus, t.reason) for k, t in trials.items()}
    assert claims == {
        ("DKITCHEN", "L2x", "within"): ("DLIVING", "bsc-n1-control-DLIVING-snr5", ""),
        ("DKITCHEN", "L2x", "cross"): ("SCAFE", "bsc-n1-control-SCAFE-snr5", ""),
        ("NPARK", "L2", "cross"): ("STRAFFIC", "bsc-n1-control-STRAFFIC-snr5", ""),
        ("NPARK", "L2x", "within"): ("NRIVER", "", "control_missing"),  # left out above
        ("OOFFICE", "L2", "cross"): ("NPARK", "bsc-n1-neutral-NPARK-snr5", ""),
        ("OOFFICE", "L2x", "within"): ("OHALLWAY", "", "control_missing"),
    }
    # n2's clip over STRAFFIC is never n1's control, and control clips are never tested
    assert all("n2" not in t.control_stimulus for t in trials.values())
    assert not any("control" in t.test_stimulus for t in build_trials(clips, load_prompts()))
    t = trials[("OOFFICE", "L2", "cross")]
    assert (t.level, t.correct, t.trap) == ("L2", "OOFFICE", "NPARK")
    assert t.prompt.startswith("This audio was recorded outdoors in a forest with birds.")
