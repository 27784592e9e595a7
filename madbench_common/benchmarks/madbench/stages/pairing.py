"""Pairing stage: target speakers for cross-identity generation (paper §3.4).

For each eligible source clip, ``targets`` clips whose speaker is of the same gender
(estimated from ŝ's median F0 where the sources give none), from a different source video
(source group) and speaker cluster (and speaker label, when given), with speaker-embedding
cosine similarity under ``max_similarity`` (:func:`pair_speakers`). Targets always come
from the source's own split (§3.2: all derived samples inherit their source's split, so a
target from another split would leak a speaker). Similarity statistics go to
``pairing/<fp>/stats.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from madbench_common.benchmarks.madbench.rows import PairRow
from madbench_common.benchmarks.madbench.sources import bounded_id
from madbench_common.benchmarks.madbench.stages.clips import ClipInputs, load_clip_inputs
from madbench_common.core.compat import zip_strict
from madbench_common.media.dsp import f0_track
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["PairingStage", "Speaker", "estimate_gender", "pair_speakers", "pair_stats"]

_F0_SPLIT_HZ = 160.0
RELAX_ORDER = ("cluster", "similarity", "source_group", "gender")


@dataclass(frozen=True)
class Speaker:
    """What pairing needs to know about one clip's speaker."""

    clip_id: str
    gender: str
    speaker: str
    cluster: int
    group: str
    split: str


def estimate_gender(speech: np.ndarray, rate: int) -> str:
    """``f`` when ŝ's median voiced F0 is at least 160 Hz, else ``m`` (``""`` if unvoiced)."""
    f0 = f0_track(speech, rate)
    voiced = f0[f0 > 0]
    if not len(voiced):
        return ""
    return "f" if float(np.median(voiced)) >= _F0_SPLIT_HZ else "m"


def _constraints(a: Speaker, b: Speaker, sim: float, limit: float,
                 ) -> dict[str, bool]:
    """Which constraints the pair (a → b) satisfies (``True`` = holds)."""
    diff_speaker = not (a.speaker and a.speaker == b.speaker)
    return {"split": a.split == b.split,
            "cluster": a.cluster != b.cluster and diff_speaker,
            "speaker": diff_speaker,
            "similarity": sim < limit,
            "source_group": a.group != b.group,
            "gender": bool(a.gender) and a.gender == b.gender}


def _candidates(i: int, speakers: Sequence[Speaker], sims: np.ndarray, limit: float,
                relaxed: tuple[str, ...]) -> list[int]:
    out = []
    for j, b in enumerate(speakers):
        if j == i:
            continue
        ok = _constraints(speakers[i], b, float(sims[i, j]), limit)
        if not (ok["speaker"] and ok["split"]):
            continue  # never the same speaker label, never another split
        if all(v for k, v in ok.items() if k not in relaxed and k not in ("speaker", "split")):
            out.append(j)
    return out


def pair_speakers(
    speakers: Sequence[Speaker], embeddings: np.ndarray, k: int, limit: float,
    rng: np.random.Generator, relax: Sequence[str] = (),
) -> list[tuple[int, int, int, tuple[str, ...]]]:
    """(source index, target index, rank, relaxed constraints) for every pair.

    Sources with the fewest candidates choose first, one target per round (round robin),
    each taking the least-used candidate (ties: lower similarity, then a seeded order),
    which balances target usage. A paper constraint is never relaxed silently: by default
    (``relax: []``) a source with too few candidates gets fewer targets, and ``madbench
    status`` counts such sources. Only the constraints in ``relax`` may be dropped, one at
    a time in :data:`RELAX_ORDER` (``cluster``: a different speaker label still required,
    ``similarity``, ``source_group``, ``gender``); each pair records what was relaxed."""
    ladder = [c for c in RELAX_ORDER if c in relax]
    emb = np.asarray(embeddings, np.float64)
    sims = emb @ emb.T
    tie = rng.permutation(len(speakers))
    strict = [len(_candidates(i, speakers, sims, limit, ())) for i in range(len(speakers))]
    order = sorted(range(len(speakers)), key=lambda i: (strict[i], tie[i]))
    usage = np.zeros(len(speakers), dtype=int)
    chosen: dict[int, list[int]] = {i: [] for i in order}
    pairs = []
    for rank in range(k):  # round robin: every source takes its r-th target in turn
        for i in order:
            for level in range(len(ladder) + 1):
                relaxed = tuple(ladder[:level])
                pool = [j for j in _candidates(i, speakers, sims, limit, relaxed)
                        if j not in chosen[i]]
                if pool:
                    j = min(pool, key=lambda j: (usage[j], sims[i, j], tie[j]))
                    chosen[i].append(j)
                    usage[j] += 1
                    pairs.append((i, j, rank, relaxed))
                    break
    return sorted(pairs, key=lambda p: (speakers[p[0]].clip_id, p[2]))


def pair_stats(rows: Sequence[PairRow]) -> dict[str, float | int]:
    """Similarity and target-usage statistics of a pairing."""
    ok = [r for r in rows if r.ok]
    if not ok:
        return {"pairs": 0}
    sims = np.array([r.similarity for r in ok])
    usage = np.bincount(np.unique([r.target_clip_id for r in ok], return_inverse=True)[1])
    return {"pairs": len(ok), "sources": len({r.clip_id for r in ok}),
            "targets": len(usage), "similarity_mean": float(sims.mean()),
            "similarity_std": float(sims.std()), "similarity_min": float(sims.min()),
            "similarity_max": float(sims.max()), "usage_min": int(usage.min()),
            "usage_max": int(usage.max()),
            "relaxed_pairs": sum(bool(r.relaxed) for r in ok),
            "same_gender": sum(r.gender == r.target_gender for r in ok)}


class PairingStage(StageImpl[PairRow]):
    """``splits`` (embeddings, clusters) → ``pairs`` (one task: pairing is global)."""

    @dataclass(frozen=True)
    class Params(StageParams):
        targets: int = param(4, unit="target speakers", paper="§3.3", doc="targets paired "
                             "with each source (\"paired with four target speakers\")")
        max_similarity: float = param(0.85, unit="cosine", doc="\"exclude near-duplicate "
                                      "voices\": a speaker-embedding cosine above this is "
                                      "the same voice")
        relax: list[str] = param([], doc="paper constraints that may be dropped, one at a "
                                 "time, for a source with too few candidates (cluster, "
                                 "similarity, source_group, gender); none: fewer targets")

    p: Params

    @cached_property
    def clips(self) -> dict[str, ClipInputs]:
        return load_clip_inputs(self.ctx)

    def plan(self) -> list[str]:
        return ["all"]

    def _gender(self, clip: ClipInputs) -> tuple[str, str]:
        given = clip.split.gender or clip.source.gender
        if given:
            return given.lower()[:1], "given"
        speech, rate = self.ctx.load_audio(clip.stem.speech_uri, clip.stem.speech_sha256)
        return estimate_gender(speech, rate), "estimated"

    def run_items(self, items: Sequence[str]) -> list[PairRow]:
        if not items or len(self.clips) < 2:
            return []
        clips = [self.clips[c] for c in sorted(self.clips)]
        genders = [self._gender(c) for c in clips]
        speakers = [Speaker(c.clip_id, g, c.source.speaker, c.split.speaker_cluster,
                            c.source.source_group, c.split.split)
                    for c, (g, _) in zip_strict(clips, genders)]
        emb = np.stack([np.asarray(c.split.embedding, np.float64) for c in clips])
        p = self.p
        pairs = pair_speakers(speakers, emb, p.targets, p.max_similarity,
                              self.ctx.rng("pairing"), tuple(p.relax))
        prov = self.ctx.provenance("split-embeddings")
        rows = [self._row(speakers, genders, emb, i, j, rank, relaxed).with_provenance(prov)
                for i, j, rank, relaxed in pairs]
        stats = json.dumps(pair_stats(rows), indent=1).encode()
        self.ctx.run.put_bytes(self.ctx.key("stats.json"), stats)
        return rows

    @staticmethod
    def _row(speakers: Sequence[Speaker], genders: Sequence[tuple[str, str]], emb: np.ndarray,
             i: int, j: int, rank: int, relaxed: tuple[str, ...]) -> PairRow:
        a, b = speakers[i], speakers[j]
        return PairRow(pair_id=bounded_id(f"{a.clip_id}>{b.clip_id}"), clip_id=a.clip_id,
                       target_clip_id=b.clip_id, rank=rank,
                       similarity=float(emb[i] @ emb[j]), gender=a.gender,
                       target_gender=b.gender, gender_source=genders[i][1], split=a.split,
                       target_split=b.split, speaker_cluster=a.cluster,
                       target_speaker_cluster=b.cluster, relaxed=relaxed)

