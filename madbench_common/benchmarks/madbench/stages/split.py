"""Split stage: speaker embeddings, speaker clusters, grouped train/val/test split.

Clips are linked when they share a speaker cluster, a given speaker label or a
source group; each connected component goes to one split as a whole, so no
speaker and no source group spans two splits. Groups are assigned greedily to the
split furthest below its target share, in a seed-determined order, before any
generation happens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from sklearn.cluster import AgglomerativeClustering

from madbench_common.benchmarks.madbench.rows import SourceQCRow, SourceRow, SplitRow, StemRow
from madbench_common.core.compat import zip_strict
from madbench_common.models.registry import load_model
from madbench_common.models.roles import SpeakerEmbedder
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["SPLITS", "SplitStage", "assign_splits", "cluster_speakers", "link_groups"]

SPLITS = ("train", "val", "test")


def cluster_speakers(embeddings: np.ndarray, threshold: float) -> np.ndarray:
    """Average-linkage clusters under cosine distance ``threshold``; labels 0..k-1."""
    if len(embeddings) < 2:
        return np.zeros(len(embeddings), dtype=int)
    model = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average",
                                    distance_threshold=threshold)
    labels = model.fit_predict(embeddings)
    # relabel by first appearance so labels do not depend on sklearn internals
    order = {lab: i for i, lab in enumerate(dict.fromkeys(labels.tolist()))}
    return np.array([order[lab] for lab in labels.tolist()], dtype=int)


def link_groups(keys: Sequence[Sequence[str]]) -> list[int]:
    """Union-find over items: items sharing any key end up in the same group (0..g-1)."""
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, item_keys in enumerate(keys):
        for key in item_keys:
            if key in owner:
                parent[find(i)] = find(owner[key])
            else:
                owner[key] = i
    roots = {r: g for g, r in enumerate(dict.fromkeys(find(i) for i in range(len(keys))))}
    return [roots[find(i)] for i in range(len(keys))]


def assign_splits(sizes: Sequence[int], ratios: Sequence[float],
                  rng: np.random.Generator) -> list[str]:
    """A split name per group: largest groups first (seeded tie order), to the neediest split."""
    total = float(sum(sizes))
    target = np.asarray(ratios, dtype=float) / float(sum(ratios)) * total
    filled = np.zeros(len(ratios))
    order = sorted(rng.permutation(len(sizes)).tolist(), key=lambda g: -sizes[g])
    out = [""] * len(sizes)
    for g in order:
        split = int(np.argmax(target - filled))
        filled[split] += sizes[g]
        out[g] = SPLITS[split]
    return out


class SplitStage(StageImpl[SplitRow]):
    """Eligible clips → ``splits`` (one task; the split is a global decision)."""

    @dataclass(frozen=True)
    class Params(StageParams):
        ratios: list[float] = param([0.7, 0.1, 0.2], unit="fractions (train, val, test)",
                                    paper="§3.2", doc="split shares (\"partitioned "
                                    "approximately 7:1:2\"), by speaker cluster and source group")
        cluster_threshold: float = param(0.2, unit="cosine distance", doc="speaker clusters "
                                         "merge below this embedding distance (the references' "
                                         "embedder; ECAPA: 0.75, one minus its same-speaker "
                                         "threshold)")

    p: Params

    @cached_property
    def eligible(self) -> list[tuple[SourceRow, StemRow]]:
        ok = {r.clip_id for r in self.ctx.read_input("source_qc", SourceQCRow) if r.eligible}
        sources = {r.clip_id: r for r in self.ctx.read_input("ingest", SourceRow)}
        stems = self.ctx.read_input("separate", StemRow)
        return [(sources[s.clip_id], s) for s in stems if s.clip_id in ok]

    def plan(self) -> list[str]:
        return ["all"]

    def run_items(self, items: Sequence[str]) -> list[SplitRow]:
        if not items or not self.eligible:
            return []
        embedder: SpeakerEmbedder = load_model(self.p.model or self.ctx.stage.model)
        embs = np.stack([self._embed(embedder, stem) for _, stem in self.eligible])
        clusters = cluster_speakers(embs, self.p.cluster_threshold)
        keys = [(f"cluster:{c}", f"group:{src.source_group}")
                + ((f"speaker:{src.speaker}",) if src.speaker else ())
                for c, (src, _) in zip_strict(clusters, self.eligible)]
        groups = link_groups(keys)
        sizes = np.bincount(groups).tolist()
        splits = assign_splits(sizes, self.p.ratios, self.ctx.rng("split"))
        prov = self.ctx.provenance(embedder.slug, embedder.version)
        return [
            SplitRow(clip_id=src.clip_id, split=splits[g], speaker_cluster=int(c), group_id=g,
                     source_group=src.source_group, gender=src.gender,
                     embedding=tuple(float(v) for v in emb)).with_provenance(prov)
            for (src, _), c, g, emb in zip_strict(self.eligible, clusters, groups, embs)
        ]

    def _embed(self, embedder: SpeakerEmbedder, stem: StemRow) -> np.ndarray:
        speech, rate = self.ctx.load_audio(stem.speech_uri, stem.speech_sha256)
        return embedder.embed(speech, rate)
