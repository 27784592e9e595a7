"""DEAF design, sentence sets, clip plans (Table 1 counts), prompts and trials per level."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from madbench_common.benchmarks.deaf.design import (
    CROSS_CATEGORY,
    ENVIRONMENTS,
    category_of,
    cross_mismatch,
    level2_cross_claim,
    within_mismatch,
)
from madbench_common.benchmarks.deaf.plan import ClipSpec, plan_bsc, plan_esc, plan_sic
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
    bsc = plan_bsc(SENTENCES)
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
    # L2 BSC: each of the 36 neutral clips per SNR asked with a Within and a Cross claim
    assert by[("bsc", "L2", "q1")] == 36 * 2 * 5
    l2 = Counter(t.subdim for t in trials if t.conflict == "bsc" and t.level == "L2")
    assert l2 == {"within": 180, "cross": 180}
    assert by[("sic", "L1", "q1")] == 136 and by[("sic", "L2", "q1")] == 80
    for t in trials:
        if t.question == "q1":
            # an L2 BSC claim over a background no neutral clip carries has no ASS pair
            bsc_l2 = t.conflict == "bsc" and t.level == "L2"
            assert (t.control_stimulus or bsc_l2) and t.correct != t.trap
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


def test_level2_bsc_claims_within_and_cross_per_appendix_a3() -> None:
    # A.3 keys claims by the background's category: nature -> busy city with traffic
    # (STRAFFIC), office -> forest with birds (NPARK); Domestic is not listed -> A.2.2's
    # Domestic -> Street pairing at the same index (DKITCHEN -> SCAFE).
    assert [level2_cross_claim(c) for c in ("NRIVER", "OOFFICE", "DKITCHEN", "STRAFFIC")] == [
        "STRAFFIC", "NPARK", "SCAFE", "DWASHING"]
    # n1 over DKITCHEN, NPARK, OOFFICE; n2 over DLIVING, STRAFFIC (controls for n1's claims)
    clips = [_neutral("n1", "DKITCHEN"), _neutral("n1", "NPARK"), _neutral("n1", "OOFFICE"),
             _neutral("n2", "DLIVING"), _neutral("n2", "STRAFFIC")]
    trials = {(t.test_stimulus.split("-")[3], t.subdim): t
              for t in build_trials(clips, load_prompts()) if t.sentence_id == "n1"}
    claims = {k: (t.claim, t.control_stimulus) for k, t in trials.items()}
    assert claims == {
        ("DKITCHEN", "within"): ("DLIVING", "bsc-n2-neutral-DLIVING-snr5"),  # other sentence
        ("DKITCHEN", "cross"): ("SCAFE", ""),                               # no clip: no pair
        ("NPARK", "within"): ("NRIVER", ""),
        ("NPARK", "cross"): ("STRAFFIC", "bsc-n2-neutral-STRAFFIC-snr5"),
        ("OOFFICE", "within"): ("OHALLWAY", ""),
        ("OOFFICE", "cross"): ("NPARK", "bsc-n1-neutral-NPARK-snr5"),       # own sentence
    }
    t = trials[("OOFFICE", "cross")]
    assert (t.level, t.correct, t.trap) == ("L2", "OOFFICE", "NPARK")
    assert t.prompt.startswith("This audio was recorded outdoors in a forest with birds.")
