"""Native detector scores (``scores_<slug>``): the binary direct-transfer rows of paper §5.1.

A pretrained detector's ``features_<slug>`` stage stores, beside its frozen features,
the native score of every input (:attr:`FeatureRow.score`, P(fake)). This stage turns
those into :class:`~madbench_common.benchmarks.madbench.rows.ScoreRow` v2 rows with
``task="binary"`` and
``model=<slug>``: the native score is used for the binary task only (paper §5.1,
"Pretrained A-V detectors are evaluated using their native predictions"); every other
task comes from heads on the frozen features. It runs no model. Feature rows that were
rejected, or that carry no score, are carried over as rejected rows with their reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from madbench_common.benchmarks.madbench.rows import FeatureRow, ScoreRow
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["DetectorScoreStage", "score_row"]


def score_row(f: FeatureRow, model: str) -> ScoreRow:
    """The binary ScoreRow of one detector feature row."""
    base: dict[str, Any] = {"sample_id": f.sample_id, "sample_sha256": f.sample_sha256,
                            "mode": f.mode, "pairing": f.pairing, "task": "binary",
                            "model": model}
    if not f.ok:
        return ScoreRow(**base, status="rejected", reason=f.reason, detail=f.detail)
    if f.score is None:
        return ScoreRow(**base, status="rejected", reason="no_native_score",
                        detail="the model writes features but no native score")
    return ScoreRow(**base, score=float(f.score))


class DetectorScoreStage(StageImpl[ScoreRow]):
    """One item: every row of the detector's feature stage (param ``features_stage``)."""

    @dataclass(frozen=True)
    class Params(StageParams):
        features_stage: str = param("", paper="§4.2", doc="the detector's feature stage, whose "
                                    "native scores are converted (\"binary direct transfer\")")
        detectors_only: bool = param(False, optional=True, doc="only the rows of models "
                                     "registered as detectors (a stage of several models)")

    p: Params

    @cached_property
    def rows(self) -> list[FeatureRow]:
        """The feature rows to convert; with ``detectors_only`` (a stage that runs several
        models, e.g. ``features_references``) only those of models registered as detectors."""
        rows = self.ctx.read_input(self.p.features_stage, FeatureRow)
        if self.p.detectors_only:
            rows = [r for r in rows if getattr(REGISTRY.get(r.model_slug), "role", "")
                    == "detector"]
        return rows

    def plan(self) -> list[str]:
        return ["scores"] if self.rows else []

    def run_items(self, items: Sequence[str]) -> list[ScoreRow]:
        out = []
        for f in self.rows:
            row = score_row(f, f.model_slug)
            out.append(row.with_provenance(self.ctx.provenance(f.model_slug, f.model_version)))
        return out
