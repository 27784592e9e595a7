"""The report's figures: ROC/DET per protocol, robustness, per-generator bars (inline SVG).

Drawn with matplotlib from result records only (``curves``, ``robustness``,
``generators``), never from scored groups, so a report read back from ``report.json``
(``madbench compare``) gets the same figures as the run that wrote it. Each model is drawn
in its primary input mode from the source the tables use for the task
(:mod:`madbench_common.benchmarks.madbench.eval.tables`).
"""

from __future__ import annotations

import html
import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.stats import norm

from madbench_common.benchmarks.madbench.eval.robust_tables import conditions_of, robust_mean
from madbench_common.benchmarks.madbench.eval.suite import EvalResult
from madbench_common.benchmarks.madbench.eval.tables import Table, _label, _primary_mode
from madbench_common.benchmarks.madbench.eval.tasks import CORE_PROTOCOLS, SC_PROTOCOL
from madbench_common.core.errors import EnvironmentMissing

__all__ = [
    "DET_TICKS",
    "det_axes",
    "figure_groups",
    "figures_html",
    "generator_bars",
    "generator_figure",
    "protocol_order",
    "robustness_figure",
    "robustness_lines",
    "roc_curves",
    "roc_det_figure",
    "to_svg",
]

Record = dict[str, Any]
DET_TICKS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9)
"""DET axis ticks (rates); the axes run from 0.05 % to 95 %."""
_DET_RANGE = (0.0005, 0.95)
_CLIP = (0.0005, 0.9995)
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
            "#17becf", "#7f7f7f", "#bcbd22")
_STYLES = ("-", "--", "-.", ":")

_TITLES = {"balanced": "Balanced", "scene_matched": "Scene-matched",
           "scene_mismatched": "Scene-mismatched",
           SC_PROTOCOL: "Scene consistency (H_SC^FM, paired video; D-R ∪ S-R ∪ D-S)"}



# ---------------------------------------------------------------- drawing


def _pyplot() -> Any:
    """pyplot set up for deterministic SVG (fixed hash salt, no date) that keeps text as
    text, so labels and legends are searchable in the page."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise EnvironmentMissing("the report's figures need matplotlib: pip install "
                                 "'madbench-common[report]'") from None
    matplotlib.use("Agg", force=True)
    matplotlib.rcParams.update({"svg.hashsalt": "madbench", "svg.fonttype": "none",
                                "font.size": 9, "axes.grid": True, "grid.alpha": 0.3})
    import matplotlib.pyplot as plt

    return plt


def to_svg(fig: Any) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog, no date), then closed."""
    plt = _pyplot()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.find("<svg"):]


def det_axes(ax: Any) -> None:
    """Normal-deviate axes on ``ax``: ticks at :data:`DET_TICKS`, labelled in percent."""
    ticks = norm.ppf(DET_TICKS)
    labels = [f"{100 * p:g}" for p in DET_TICKS]
    lo, hi = norm.ppf(_DET_RANGE)
    for axis, setter in ((ax.xaxis, ax.set_xlim), (ax.yaxis, ax.set_ylim)):
        axis.set_ticks(ticks, labels)
        setter(lo, hi)
    ax.set_xlabel("False-positive (false-alarm) rate, % (normal deviate scale)")
    ax.set_ylabel("False-negative (miss) rate, % (normal deviate scale)")
    ax.set_aspect("equal")


def _style(i: int) -> dict[str, Any]:
    return {"color": _COLOURS[i % len(_COLOURS)], "linestyle": _STYLES[(i // 10) % 4],
            "linewidth": 1.6}


def roc_det_figure(title: str, curves: Sequence[tuple[str, Record]]) -> Any:
    """ROC (left) and DET (right) of ``curves``: (label, curve record with AUC and EER).

    ROC: false-positive against true-positive rate, linear axes. DET (the ASVspoof
    convention): false-positive (false-alarm) against false-negative (miss) rate on
    normal-deviate axes (each axis is Φ⁻¹(rate), ticked in percent), rates clipped to
    [0.05 %, 99.95 %] so a point at 0 or 1 stays on the plot. Each legend entry carries the
    curve's AUC and EER."""
    plt = _pyplot()
    fig, (roc, det) = plt.subplots(1, 2, figsize=(10.5, 4.8))
    roc.plot([0, 1], [0, 1], color="#aaaaaa", linewidth=0.8, linestyle=":")
    for i, (label, c) in enumerate(curves):
        fpr, tpr = np.asarray(c["fpr"]), np.asarray(c["tpr"])
        name = f"{label} (AUC {c['auc']:.3f}, EER {100 * c['eer']:.1f}%)"
        roc.plot(fpr, tpr, label=name, drawstyle="default", **_style(i))
        fnr = np.clip(1.0 - tpr, *_CLIP)
        det.plot(norm.ppf(np.clip(fpr, *_CLIP)), norm.ppf(fnr), label=name, **_style(i))
    roc.set_xlim(0, 1)
    roc.set_ylim(0, 1.01)
    roc.set_xlabel("False-positive rate (real scored as fake)")
    roc.set_ylabel("True-positive rate (fake detected)")
    roc.set_title("ROC")
    roc.set_aspect("equal")
    det_axes(det)
    det.plot(norm.ppf(_DET_RANGE), norm.ppf(_DET_RANGE), color="#aaaaaa", linewidth=0.8,
             linestyle=":")
    det.set_title("DET")
    fig.suptitle(title)
    handles, labels = roc.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2 if len(labels) > 3 else 1,
               bbox_to_anchor=(0.5, -0.02 - 0.035 * math.ceil(len(labels) / 2)),
               frameon=False)
    return fig


def _auc_axes(ax: Any, labels: list[str], rotation: int, xlabel: str, title: str,
              chance: str) -> None:
    """Finish an axes of binary AUC per category: the chance line (0.5, colour ``chance``),
    one tick per label, AUC in [0, 1.02], the legend right of the plot."""
    ax.axhline(0.5, color=chance, linewidth=0.8, linestyle=":")
    ax.set_xticks(np.arange(len(labels)), labels, rotation=rotation, ha="right")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("AUC, binary task (mean over protocols)")
    ax.set_ylim(0.0, 1.02)
    ax.set_title(title)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)


def robustness_figure(conditions: Sequence[str],
                      lines: Sequence[tuple[str, Sequence[float | None]]]) -> Any:
    """AUC against condition, one line per model ((label, AUC per condition or None))."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(7.0, 0.6 * len(conditions) + 3), 4.6))
    x = np.arange(len(conditions))
    for i, (label, values) in enumerate(lines):
        y = np.array([np.nan if v is None else v for v in values], dtype=float)
        ax.plot(x, y, marker="o", markersize=4, label=label, **_style(i))
    _auc_axes(ax, list(conditions), 40, "Condition",
              "Robustness: AUC per condition (heads trained on clean data)", "#aaaaaa")
    return fig


def generator_figure(generators: Sequence[str],
                     bars: Sequence[tuple[str, Sequence[float | None]]]) -> Any:
    """Grouped bars: AUC per generator, one bar per model ((label, AUC per generator))."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(7.0, 0.9 * len(generators) + 3), 4.6))
    width = 0.8 / max(1, len(bars))
    x = np.arange(len(generators))
    for i, (label, values) in enumerate(bars):
        y = np.array([np.nan if v is None else v for v in values], dtype=float)
        ax.bar(x + (i - (len(bars) - 1) / 2) * width, np.nan_to_num(y, nan=0.0), width,
               label=label, color=_COLOURS[i % len(_COLOURS)])
    _auc_axes(ax, list(generators), 30, "Generator of the test fakes (vs all test reals)",
              "Per-generator detection", "#555555")
    return fig


def protocol_order(protocols: set[str]) -> list[str]:
    """Core protocols in the paper's order, then scene consistency, then others."""
    known = [p for p in (*CORE_PROTOCOLS, SC_PROTOCOL) if p in protocols]
    return known + sorted(protocols - set(known))


# ---------------------------------------------------------------- the report's figure section


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
    for proto in protocol_order(protocols):
        curves = roc_curves(results, proto)
        if curves:
            title = _TITLES.get(proto, proto)
            fig = roc_det_figure(title, curves)
            parts.append(_figure(f"ROC and DET: {title}", to_svg(fig),
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
            "Robustness", to_svg(robustness_figure(conds, lines)),
            "AUC of the binary task per condition, one line per model (heads trained on "
            "clean data only).")
    gens, bars = generator_bars(results)
    if gens and bars:
        out["generators"] = _figure(
            "Per-generator detection", to_svg(generator_figure(gens, bars)),
            "AUC of each generator's test fakes against all test reals.")
    return out


def figures_html(results: list[EvalResult]) -> str:
    """Every figure of the report as HTML ``<figure>`` elements with inline SVG."""
    return "".join(figure_groups(results).values())
