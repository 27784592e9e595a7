"""The report's figures, drawn with matplotlib and embedded in the HTML as inline SVG.

* **ROC and DET curves** per core protocol (and scene consistency), one curve per model:
  the binary task (H_SC^FM for scene consistency) in the model's primary input, from the
  source the tables use. ROC: false-positive rate against true-positive rate, linear.
  DET (the ASVspoof convention): false-positive (false-alarm) rate against
  false-negative (miss) rate on **normal-deviate axes** (probit scale: each axis is
  Φ⁻¹(rate), ticked in percent), rates clipped to [0.05 %, 99.95 %] so that a point at
  0 or 1 stays on the plot. Every legend entry carries the curve's AUC and EER.
* **Robustness**: AUC of the binary task (mean over the core protocols) against
  condition, one line per model, ``clean`` first.
* **Per-generator bars**: AUC of each generator's test fakes against all test reals
  (binary task, mean over the core protocols), one bar per model and generator.

Curves are stored in ``report.json`` (``curves`` records: ROC vertices, at most
:data:`MAX_POINTS` after thinning), so ``madbench compare`` draws the same figures
from published reports. SVG output is deterministic (fixed hash salt, no date) and keeps
text as text, so labels and legends are searchable in the page.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import norm

from madbench_common.benchmarks.madbench.eval.metrics import auc, eer_asvspoof, roc_points
from madbench_common.benchmarks.madbench.eval.runner import GroupScores
from madbench_common.benchmarks.madbench.eval.tasks import CORE_PROTOCOLS, SC_PROTOCOL, task_labels
from madbench_common.core.errors import EnvironmentMissing

__all__ = [
    "DET_TICKS",
    "MAX_POINTS",
    "curve_records",
    "det_axes",
    "generator_figure",
    "robustness_figure",
    "roc_det_figure",
    "to_svg",
]

Record = dict[str, Any]
MAX_POINTS = 200
DET_TICKS = (0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9)
"""DET axis ticks (rates); the axes run from 0.05 % to 95 %."""
_DET_RANGE = (0.0005, 0.95)
_CLIP = (0.0005, 0.9995)
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
            "#17becf", "#7f7f7f", "#bcbd22")
_STYLES = ("-", "--", "-.", ":")


def _pyplot() -> Any:
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


def _thin(fpr: npt.NDArray[np.float64], tpr: npt.NDArray[np.float64]
          ) -> tuple[list[float], list[float]]:
    """At most :data:`MAX_POINTS` ROC vertices, the first and last kept."""
    if fpr.size > MAX_POINTS:
        keep = np.unique(np.linspace(0, fpr.size - 1, MAX_POINTS).round().astype(int))
        fpr, tpr = fpr[keep], tpr[keep]
    return [round(float(v), 6) for v in fpr], [round(float(v), 6) for v in tpr]


def curve_records(groups: Sequence[GroupScores]) -> list[Record]:
    """ROC vertices of every paired group's binary-type tasks (the figures' data)."""
    out = []
    for g in (g for g in groups if g.pairing == "paired"):
        for task in ("binary", "speech", "env", "scene"):
            if task not in g.scores:
                continue
            mask, y = task_labels(g.test, task)
            s = g.scores[task][mask]
            ok = np.isfinite(s)
            if not ok.any() or not 0 < y[ok].sum() < ok.sum():
                continue
            fpr, tpr, _ = roc_points(y[ok], s[ok])
            xs, ys = _thin(fpr, tpr)
            out.append({"source": g.source, "protocol": g.protocol, "mode": g.mode,
                        "task": task, "fpr": xs, "tpr": ys, "n": int(ok.sum()),
                        "auc": auc(y[ok], s[ok]), "eer": eer_asvspoof(y[ok], s[ok])})
    return out


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
    """ROC (left) and DET (right) of ``curves``: (label, curve record with AUC and EER)."""
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


def robustness_figure(conditions: Sequence[str],
                      lines: Sequence[tuple[str, Sequence[float | None]]]) -> Any:
    """AUC against condition, one line per model ((label, AUC per condition or None))."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(7.0, 0.6 * len(conditions) + 3), 4.6))
    x = np.arange(len(conditions))
    for i, (label, values) in enumerate(lines):
        y = np.array([np.nan if v is None else v for v in values], dtype=float)
        ax.plot(x, y, marker="o", markersize=4, label=label, **_style(i))
    ax.axhline(0.5, color="#aaaaaa", linewidth=0.8, linestyle=":")
    ax.set_xticks(x, list(conditions), rotation=40, ha="right")
    ax.set_xlabel("Condition")
    ax.set_ylabel("AUC, binary task (mean over protocols)")
    ax.set_ylim(0.0, 1.02)
    ax.set_title("Robustness: AUC per condition (heads trained on clean data)")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
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
    ax.axhline(0.5, color="#555555", linewidth=0.8, linestyle=":")
    ax.set_xticks(x, list(generators), rotation=30, ha="right")
    ax.set_xlabel("Generator of the test fakes (vs all test reals)")
    ax.set_ylabel("AUC, binary task (mean over protocols)")
    ax.set_ylim(0.0, 1.02)
    ax.set_title("Per-generator detection")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return fig


def protocol_order(protocols: set[str]) -> list[str]:
    """Core protocols in the paper's order, then scene consistency, then others."""
    known = [p for p in (*CORE_PROTOCOLS, SC_PROTOCOL) if p in protocols]
    return known + sorted(protocols - set(known))
