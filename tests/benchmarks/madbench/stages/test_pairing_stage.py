"""Speaker pairing: constraints, balanced target usage, relaxation recorded."""

from __future__ import annotations

from collections import Counter

import numpy as np

from madbench_common.benchmarks.madbench.rows import PairRow
from madbench_common.benchmarks.madbench.stages.pairing import (
    Speaker,
    estimate_gender,
    pair_speakers,
    pair_stats,
)


def _pool(n: int = 12) -> tuple[list[Speaker], np.ndarray]:
    rng = np.random.default_rng(0)
    speakers = [Speaker(f"c{i:02d}", "f" if i % 2 else "m", f"spk{i // 2}", i // 2,
                        f"g{i // 3}", "train") for i in range(n)]
    emb = rng.standard_normal((n, 16))
    return speakers, emb / np.linalg.norm(emb, axis=1, keepdims=True)


def test_pairs_respect_every_constraint_when_enough_candidates() -> None:
    speakers, emb = _pool(24)
    pairs = pair_speakers(speakers, emb, 4, 0.9, np.random.default_rng(1))
    by_src = Counter(i for i, *_ in pairs)
    assert set(by_src.values()) == {4}
    for i, j, _, relaxed in pairs:
        a, b = speakers[i], speakers[j]
        assert not relaxed
        assert a.gender == b.gender and a.group != b.group and a.cluster != b.cluster
        assert a.speaker != b.speaker and float(emb[i] @ emb[j]) < 0.9


def test_target_usage_is_balanced() -> None:
    speakers, emb = _pool(24)
    pairs = pair_speakers(speakers, emb, 4, 1.1, np.random.default_rng(2))
    usage = Counter(j for _, j, *_ in pairs)
    mean = len(pairs) / len(speakers)
    assert len(usage) == len(speakers)  # every eligible speaker is used as a target
    assert all(abs(u - mean) <= 1 for u in usage.values())  # greedy: within ±1 of the mean


def test_relaxation_is_recorded_and_never_pairs_a_speaker_with_itself() -> None:
    speakers, emb = _pool(6)  # 3 per gender: too few strict candidates for 4 targets
    pairs = pair_speakers(speakers, emb, 4, 0.0, np.random.default_rng(3),
                          relax=("cluster", "similarity", "source_group", "gender"))
    assert any(relaxed for *_, relaxed in pairs)
    for i, j, _, relaxed in pairs:
        assert speakers[i].speaker != speakers[j].speaker
        if "gender" not in relaxed:
            assert speakers[i].gender == speakers[j].gender


def test_pair_stats_and_gender_estimate() -> None:
    rows = [PairRow(pair_id=f"a>{t}", clip_id="a", target_clip_id=t, similarity=s,
                    gender="f", target_gender="f") for t, s in (("b", 0.2), ("c", 0.4))]
    stats = pair_stats(rows)
    assert stats["pairs"] == 2 and abs(stats["similarity_mean"] - 0.3) < 1e-9
    t = np.arange(16000) / 16000
    low = (0.3 * np.sin(2 * np.pi * 110 * t)).astype(np.float32)
    high = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    assert (estimate_gender(low, 16000), estimate_gender(high, 16000)) == ("m", "f")


def test_no_constraint_is_relaxed_unless_asked_fewer_targets_instead() -> None:
    """Paper §3.3: same gender, other video, other cluster, low similarity — never dropped."""
    speakers, emb = _pool(6)  # c00..c05: 3 per gender, groups g0 g0 g0 g1 g1 g1
    pairs = pair_speakers(speakers, emb, 4, 1.1, np.random.default_rng(3))
    assert all(not relaxed for *_, relaxed in pairs)
    by_src = Counter(i for i, *_ in pairs)
    # c00 (m, g0): the only male in another group is c04 (g1) → exactly one target
    assert by_src[0] == 1 and [j for i, j, *_ in pairs if i == 0] == [4]
    assert max(by_src.values()) < 4


def test_targets_come_from_the_sources_own_split() -> None:
    speakers, emb = _pool(24)
    speakers = [Speaker(s.clip_id, s.gender, s.speaker, s.cluster, s.group,
                        "train" if i < 12 else "test") for i, s in enumerate(speakers)]
    pairs = pair_speakers(speakers, emb, 4, 1.1, np.random.default_rng(4),
                          relax=("cluster", "similarity", "source_group", "gender"))
    assert pairs and all(speakers[i].split == speakers[j].split for i, j, *_ in pairs)
