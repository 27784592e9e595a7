"""The ``deaf_report`` stage: gathers metrics, verdicts, clips and models; writes the report.

Files go under ``<stage prefix>/report/`` (``report.md``, ``report.json``, ``report.html``,
``radar.png``, ``radar.svg``); the manifest has one row per file with its URI.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from madbench_common.benchmarks.deaf.report import ModelInfo, ReportInputs, report_files
from madbench_common.benchmarks.deaf.rows import (
    AnswerRow,
    EnvRow,
    MetricRow,
    ReportRow,
    StimulusRow,
    VerdictRow,
)
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.stage import StageImpl

__all__ = ["ABSENT", "ReportStage", "model_note"]

_FIXED = ("deaf_metrics", "deaf_judge", "deaf_envlib")
ABSENT = "absent: its answer stage failed or did not run (no answers, no metrics)"
"""The note of a model whose answer stage left no answers (see the workflow's run summary
for the failure); its rows in the tables are empty, and it is left out of the radar."""


def model_note(slug: str, version: str) -> str:
    """How a model's answers must be read: stub server, tiny random weights, reference."""
    spec = REGISTRY.get(slug)
    if any(s in version for s in ("127.0.0.1", "localhost", "MADBENCH_API_STUB")):
        return "local stub server: not the model's answers"
    if "tiny-random" in version:
        return "tiny random checkpoint: the real code path, answers are noise"
    if spec is not None and spec.reference:
        return "CPU reference (not a paper model)"
    return ""


class ReportStage(StageImpl[ReportRow]):
    """One row per report file."""

    @cached_property
    def inputs(self) -> ReportInputs:
        deps = self.ctx.stage.inputs
        models = []
        for dep in (d for d in deps if d.startswith("answer_")):
            if dep in self.ctx.stage.optional_inputs and not self.ctx.has_input(dep):
                slug = self.ctx.graph[dep].model
                spec = REGISTRY.get(slug)
                models.append(ModelInfo(dep, slug, "", spec.paper_model if spec else "",
                                        ABSENT, absent=True))
                continue
            rows = self.ctx.read_input(dep, AnswerRow)
            slug = next((r.model_slug for r in rows if r.model_slug), "")
            version = next((r.model_version for r in rows if r.model_version), "")
            spec = REGISTRY.get(slug)
            models.append(ModelInfo(dep, slug, version, spec.paper_model if spec else "",
                                    model_note(slug, version), answers=len(rows),
                                    empty=sum(r.ok and not r.text.strip() for r in rows),
                                    failed=sum(not r.ok for r in rows)))
        stimuli = [r for d in deps if d not in _FIXED and not d.startswith("answer_")
                   for r in self.ctx.read_input(d, StimulusRow)]
        return ReportInputs(self.ctx.read_input("deaf_metrics", MetricRow), models, stimuli,
                            self.ctx.read_input("deaf_envlib", EnvRow),
                            self.ctx.read_input("deaf_judge", VerdictRow))

    @cached_property
    def files(self) -> dict[str, bytes]:
        return report_files(self.inputs)

    def plan(self) -> list[str]:
        return sorted(self.files)

    def run_items(self, items: Sequence[str]) -> list[ReportRow]:
        prov = self.ctx.provenance()
        out = []
        for name in items:
            info = self.ctx.run.put_bytes(self.ctx.key("report", name), self.files[name])
            out.append(ReportRow(name=name, uri=info.uri, sha256=info.sha256)
                       .with_provenance(prov))
        return out
