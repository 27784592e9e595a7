"""The report's figure section: ROC/DET per protocol, robustness, per-generator bars (HTML).

Built from result records only (``curves``, ``robustness``, ``generators``), never from
scored groups, so a report read back from ``report.json`` (``madbench compare``) gets the
same figures as the run that wrote it. Each model is drawn in its primary input mode
from the source the tables use for the task
(:mod:`madbench_common.benchmarks.madbench.eval.tables`).
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.eval import plots
from madbench_common.benchmarks.madbench.eval.robust_tables import conditions_of, robust_mean
from madbench_common.benchmarks.madbench.eval.suite import EvalResult
from madbench_common.benchmarks.madbench.eval.tables import Table, _label, _primary_mode
from madbench_common.benchmarks.madbench.eval.tasks import CORE_PROTOCOLS, SC_PROTOCOL

__all__ = ["figure_groups", "figures_html", "generator_bars", "robustness_lines", "roc_curves"]

Record = dict[str, Any]
_TITLES = {"balanced": "Balanced", "scene_matched": "Scene-matched",
           "scene_mismatched": "Scene-mismatched",
           SC_PROTOCOL: "Scene consistency (H_SC^FM, paired video; D-R ∪ S-R ∪ D-S)"}


def _name(r: EvalResult) -> str:
    return _label(r, Table("_", "", []))


def roc_curves(results: list[EvalResult], protocol: str) -> list[tuple[str, Record]]:
    """(model label, curve record) of every model with a curve on ``protocol``."""
    task = "scene" if protocol == SC_PROTOCOL else "binary"
    out = []
    for r in results:
        key = (r.source_for(task), protocol, _primary_mode(r), task)
        rec = next((c for c in r.tables.get("curves", [])
                    if (c["source"], c["protocol"], c["mode"], c["task"]) == key), None)
        if rec is not None:
            out.append((_name(r), rec))
    return out


def robustness_lines(results: list[EvalResult]
                     ) -> tuple[list[str], list[tuple[str, list[float | None]]]]:
    """Conditions (clean first) and each model's mean binary AUC under them."""
    conds = conditions_of(results)
    lines = []
    for r in (r for r in results if r.tables.get("robustness")):
        values = [(rec or {}).get("auc") for rec in (robust_mean(r, c) for c in conds)]
        lines.append((_name(r), values))
    return conds, lines


def generator_bars(results: list[EvalResult]
                   ) -> tuple[list[str], list[tuple[str, list[float | None]]]]:
    """Generators and each model's AUC on them (binary task, mean over core protocols)."""
    per: dict[str, dict[str, float]] = {}
    for r in results:
        key = (r.source_for("binary"), _primary_mode(r), "paired")
        aucs: dict[str, list[float]] = {}
        for g in r.tables.get("generators", []):
            if (g["source"], g["mode"], g["pairing"]) == key and g["protocol"] in CORE_PROTOCOLS:
                aucs.setdefault(g["generator"], []).append(float(g["auc"]))
        if aucs:
            per[_name(r)] = {k: float(np.mean(v)) for k, v in aucs.items()}
    generators = sorted({k for v in per.values() for k in v})
    return generators, [(m, [v.get(g) for g in generators]) for m, v in per.items()]


def _figure(title: str, svg: str, caption: str) -> str:
    return (f'<figure class=plot><figcaption><b>{html.escape(title)}</b> '
            f"{html.escape(caption)}</figcaption>{svg}</figure>")


def _roc_section(results: list[EvalResult], scene: bool = False) -> list[str]:
    """ROC and DET of the core protocols (``scene``: of scene consistency alone)."""
    protocols = {c["protocol"] for r in results for c in r.tables.get("curves", [])
                 if (c["protocol"] == SC_PROTOCOL) == scene}
    parts = []
    for proto in plots.protocol_order(protocols):
        curves = roc_curves(results, proto)
        if curves:
            title = _TITLES.get(proto, proto)
            fig = plots.roc_det_figure(title, curves)
            parts.append(_figure(f"ROC and DET: {title}", plots.to_svg(fig),
                                 "Test split, binary task (fake = positive) in each model's "
                                 "primary input; DET axes on the normal-deviate scale."))
    return parts


def figure_groups(results: list[EvalResult]) -> dict[str, str]:
    """The report's figures by the table they sit under: ``table2a`` (ROC and DET per core
    protocol), ``table4`` (ROC and DET of scene consistency), ``robustness_pivot``
    (robustness by condition), ``generators`` (per-generator bars); each HTML
    ``<figure>`` elements with inline SVG, absent where there is nothing to draw."""
    out = {}
    if roc := _roc_section(results):
        out["table2a"] = "".join(roc)
    if roc := _roc_section(results, scene=True):
        out["table4"] = "".join(roc)
    conds, lines = robustness_lines(results)
    if conds and lines:
        out["robustness_pivot"] = _figure(
            "Robustness", plots.to_svg(plots.robustness_figure(conds, lines)),
            "AUC of the binary task per condition, one line per model (heads trained on "
            "clean data only).")
    gens, bars = generator_bars(results)
    if gens and bars:
        out["generators"] = _figure(
            "Per-generator detection", plots.to_svg(plots.generator_figure(gens, bars)),
            "AUC of each generator's test fakes against all test reals.")
    return out


def figures_html(results: list[EvalResult]) -> str:
    """Every figure of the report as HTML ``<figure>`` elements with inline SVG."""
    return "".join(figure_groups(results).values())
