"""Evaluation stage: heads, metrics and one report for every model of the run.

Reads ``samples`` from ``assemble`` (param ``samples_stage``) and every features and
scores stage of the graph (:class:`EvaluateStage`). Writes the report (``report.md``,
``report.json``, ``report.html``; its summary names the run's sources, code, images and
quarantine: ``eval.facts.run_facts``) under ``<stage>/<fingerprint>/report/`` and one
:class:`ScoreRow` per model, head and test sample (``score`` = P(positive); ``probs`` for
the four-way head).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit

from madbench_common.benchmarks.madbench.eval.fit import FeatureSet, GroupScores
from madbench_common.benchmarks.madbench.eval.suite import (
    EvalConfig,
    EvalResult,
    ModelInfo,
    run_evaluation,
)
from madbench_common.benchmarks.madbench.eval.tables import GROUP_TITLES
from madbench_common.benchmarks.madbench.rows import FeatureRow, PerturbedRow, SampleRow, ScoreRow
from madbench_common.core.compat import zip_strict
from madbench_common.core.manifest import rows_to_frame
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["EvaluateStage", "feature_set", "order_results"]


def feature_set(rows: Sequence[FeatureRow]) -> FeatureSet:
    """Group ok feature rows into matrices per (mode, pairing)."""
    fs = FeatureSet()
    parts: dict[tuple[str, str], list[FeatureRow]] = {}
    for r in (r for r in rows if r.ok):
        parts.setdefault((r.mode, r.pairing), []).append(r)
    for (mode, pairing), part in parts.items():
        fs.add(mode, pairing, [r.sample_id for r in part], np.array([r.features for r in part]))
    return fs


def order_results(results: list[EvalResult]) -> list[EvalResult]:
    """Results in the paper's group order, then by name."""
    rank = {g: i for i, g in enumerate(GROUP_TITLES)}
    return sorted(results, key=lambda r: (rank.get(r.model.group, len(rank)), r.model.name))


def _score_rows(slug: str, g: GroupScores) -> list[ScoreRow]:
    rows = []
    for task, scores in g.scores.items():
        if task.startswith("logo:"):
            continue
        for sid, sha, s in zip_strict(g.test["sample_id"], g.test["audio_sha256"], scores):
            prob = {"score": float(expit(s))} if np.ndim(s) == 0 else {
                "probs": tuple(float(p) for p in np.exp(s))}
            rows.append(ScoreRow(sample_id=str(sid), sample_sha256=str(sha), mode=g.mode,
                                 pairing=g.pairing, task=task, model=slug, **prob))
    return rows


class EvaluateStage(StageImpl[ScoreRow]):
    """One item (the whole evaluation): fit, score and report every model.

    Inputs besides ``samples``: the robustness conditions' samples from ``perturb`` where
    it is an input (the same heads, trained on clean data only, score every condition),
    each stage that writes ``features`` (``features`` or ``features_<slug>``) and each that
    writes ``scores`` (detector native scores, ``omni_<slug>``). Rows are grouped into
    models by their registry slug (``FeatureRow.model_slug``; ``ScoreRow.model``, else its
    ``model_slug``), so one model's features and native scores meet in one evaluation.
    """

    @dataclass(frozen=True)
    class Params(StageParams):
        n_boot: int = param(1000, unit="resamples", doc="clip-paired bootstrap for the 95 % "
                            "intervals (the paper reports none)")
        logo: bool = param(True, paper="§4.1", doc="also fit binary heads that never see one "
                           "generator's fakes (generator generalisation)")
        c: float = param(1.0, unit="inverse regularisation", paper="§4.2", doc="\"the same "
                         "logistic-regression architecture\": scikit-learn's default, on "
                         "standardised features")
        samples_stage: str = param("assemble", optional=True, doc="the stage whose samples "
                                   "are evaluated")
        score_kind: str = param("auto", optional=True, doc="how native scores read: prob, "
                                "llr, raw, or auto (prob when every score is in [0, 1])")

    p: Params

    def plan(self) -> list[str]:
        return ["evaluation"]

    def _samples(self) -> pd.DataFrame:
        rows = self.ctx.read_input(self._samples_stage, SampleRow)
        return rows_to_frame(SampleRow, [r for r in rows if r.ok])

    @property
    def _samples_stage(self) -> str:
        return self.p.samples_stage

    def _perturbed(self) -> pd.DataFrame | None:
        if "perturb" not in self.ctx.stage.inputs:
            return None
        rows = [r for r in self.ctx.read_input("perturb", PerturbedRow) if r.ok]
        return rows_to_frame(PerturbedRow, rows) if rows else None

    def _config(self) -> EvalConfig:
        p = self.p
        return EvalConfig(c=float(p.c), n_boot=p.n_boot, seed=self.ctx.seed, logo=p.logo,
                          score_kind=p.score_kind)

    def _inputs(self, kind: str) -> list[str]:
        stages = self.ctx.graph.stages
        return [n for n in self.ctx.stage.inputs if n not in (self._samples_stage, "perturb")
                and n in stages and stages[n].outputs[:1] == (kind,)]

    def _by_model(self) -> tuple[dict[str, list[FeatureRow]], dict[str, list[ScoreRow]]]:
        feats: dict[str, list[FeatureRow]] = {}
        for name in self._inputs("features"):
            for f in self.ctx.read_input(name, FeatureRow):
                feats.setdefault(f.model_slug or name, []).append(f)
        scores: dict[str, list[ScoreRow]] = {}
        for name in self._inputs("scores"):
            for s in self.ctx.read_input(name, ScoreRow):
                if s.ok:
                    scores.setdefault(s.model or s.model_slug or name, []).append(s)
        return feats, scores

    def evaluate(self) -> list[EvalResult]:
        samples, cfg, perturbed = self._samples(), self._config(), self._perturbed()
        feats, scores = self._by_model()
        results = []
        for slug in sorted(set(feats) | set(scores)):
            fs = feature_set(feats[slug]) if slug in feats else None
            sc = rows_to_frame(ScoreRow, scores[slug]) if slug in scores else None
            results.append(run_evaluation(ModelInfo.lookup(slug), samples, features=fs,
                                          scores=sc, config=cfg, perturbed=perturbed))
        return order_results(results)

    def run_items(self, items: Sequence[str]) -> list[ScoreRow]:
        from madbench_common.benchmarks.madbench.eval.facts import run_facts
        from madbench_common.benchmarks.madbench.eval.report import write_report
        from madbench_common.pipeline.status import rejection_table

        results = self.evaluate()
        facts = run_facts(self.ctx.run, self.ctx.graph, image=self.ctx.image)
        write_report(results, lambda name, data: self.ctx.run.put_bytes(
            self.ctx.key("report", name), data), runs=[facts],
            rejections=rejection_table(self.ctx.run, self.ctx.graph))
        prov = self.ctx.provenance("")
        return [row.with_provenance(prov) for r in results for g in r.groups
                if g.source == "head" for row in _score_rows(r.model.slug, g)]
