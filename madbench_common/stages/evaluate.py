"""Evaluation stage: heads, metrics and the report for one encoder's features (and detector scores).

Reads ``samples`` from ``assemble`` (param ``samples_stage``), features from the
stage named by ``features_stage`` (default ``features``) and, when
``scores_stage`` is set, a detector's native scores (direct transfer). Writes the
report (``report.md``, ``report.json``, ``report.html``) under
``<stage>/<fingerprint>/report/`` and one :class:`ScoreRow` per test sample and head.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from madbench_common.compat import zip_strict
from madbench_common.eval.runner import FeatureSet, GroupScores
from madbench_common.eval.suite import EvalConfig, EvalResult, run_evaluation
from madbench_common.manifest import rows_to_frame
from madbench_common.pipeline.stage import StageImpl
from madbench_common.rows import FeatureRow, SampleRow, ScoreRow

__all__ = ["EvaluateStage", "feature_set"]


def feature_set(rows: Sequence[FeatureRow]) -> FeatureSet:
    """Group ok feature rows into matrices per (mode, pairing)."""
    fs = FeatureSet()
    parts: dict[tuple[str, str], list[FeatureRow]] = {}
    for r in (r for r in rows if r.ok):
        parts.setdefault((r.mode, r.pairing), []).append(r)
    for (mode, pairing), part in parts.items():
        fs.add(mode, pairing, [r.sample_id for r in part], np.array([r.features for r in part]))
    return fs


def _score_rows(g: GroupScores) -> list[ScoreRow]:
    rows = []
    for task, scores in g.scores.items():
        for sid, sha, s in zip_strict(g.test["sample_id"], g.test["audio_sha256"], scores):
            value = float(s) if np.ndim(s) == 0 else float(1 - np.exp(s[0]))
            answer = "" if np.ndim(s) == 0 else "RSEQ"[int(np.argmax(s))]
            rows.append(ScoreRow(sample_id=str(sid), sample_sha256=str(sha), mode=g.mode,
                                 pairing=g.pairing, task=task, score=value, answer=answer))
    return rows


class EvaluateStage(StageImpl[ScoreRow]):
    """One item (the whole evaluation): fit, score, report."""

    row_type = ScoreRow
    id_field = "sample_id"

    def plan(self) -> list[str]:
        return ["evaluation"]

    def _samples(self) -> pd.DataFrame:
        rows = self.ctx.read_input(str(self.ctx.params.get("samples_stage", "assemble")), SampleRow)
        return rows_to_frame(SampleRow, [r for r in rows if r.ok])

    def _config(self) -> EvalConfig:
        p = self.ctx.params
        return EvalConfig(c=float(p.get("c", 1.0)), n_boot=int(p.get("n_boot", 1000)),
                          seed=self.ctx.seed, logo=bool(p.get("logo", True)),
                          score_kind=str(p.get("score_kind", "prob")))

    def evaluate(self) -> EvalResult:
        p = self.ctx.params
        feats = self.ctx.read_input(str(p.get("features_stage", "features")), FeatureRow)
        scores = None
        if p.get("scores_stage"):
            score_rows = self.ctx.read_input(str(p["scores_stage"]), ScoreRow)
            usable = [r for r in score_rows if r.ok and r.score is not None]
            scores = rows_to_frame(ScoreRow, usable)
        model = str(p.get("model_name") or (feats[0].model_slug if feats else "model"))
        return run_evaluation(model, self._samples(), features=feature_set(feats), scores=scores,
                              config=self._config())

    def run_items(self, items: Sequence[str]) -> list[ScoreRow]:
        from madbench_common.eval.report import write_report

        result = self.evaluate()
        write_report(result, lambda name, data: self.ctx.run.put_bytes(
            self.ctx.key("report", name), data))
        prov = self.ctx.provenance(result.model)
        return [r.with_provenance(prov) for g in result.groups for r in _score_rows(g)]
