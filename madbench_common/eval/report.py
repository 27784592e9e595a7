"""Reports of an evaluation: Markdown and JSON tables shaped like the paper's Tables 2–5, and HTML.

Table 2: main results per protocol and input mode (binary AUC/EER/accuracy, four-way
accuracy and macro-F1, speech and environment AUC, Δ_E−S). Table 3: AUC of each
variant against R and the interference gaps G_S, G_E. Table 4: scene consistency,
Δ_pair for D-R, S-R, D-S. Table 5: modality ablation A vs A-V. Then the
per-generator breakdown (N per cell) and leave-one-generator-out generalisation.
The HTML report adds ROC curves and confusion matrices as inline SVG (no plotting
dependency). Bracketed ranges are clip-paired bootstrap 95% intervals.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from madbench_common.compat import zip_strict
from madbench_common.eval.metrics import roc_points
from madbench_common.eval.suite import EvalResult
from madbench_common.eval.tasks import task_labels

__all__ = ["main_table", "render_html", "render_json", "render_markdown", "write_report"]

Record = dict[str, Any]


def _fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float):
        return "–" if math.isnan(x) else f"{x:.{digits}f}"
    return "–" if x is None else str(x)


def _ci(r: Record, name: str) -> str:
    lo, hi = r.get(f"{name}_lo", float("nan")), r.get(f"{name}_hi", float("nan"))
    base = _fmt(r.get(name))
    return base if isinstance(lo, float) and math.isnan(lo) else f"{base} [{_fmt(lo)}, {_fmt(hi)}]"


def _md(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _by_task(res: EvalResult) -> dict[tuple[str, str, str, str, str], Record]:
    return {(r.get("head", "heads"), r["protocol"], r["mode"], r["pairing"], r["task"]): r
            for r in res.tables.get("tasks", [])}


def main_table(res: EvalResult) -> str:
    """Table 2: one row per (head type, protocol, input mode), paired video."""
    tasks, rows = _by_task(res), []
    for head, proto, mode, pairing, _ in sorted(k for k in tasks if k[4] == "binary"):
        if pairing != "paired":
            continue
        get = lambda t, h=head, p=proto, m=mode: tasks.get((h, p, m, "paired", t), {})  # noqa: E731
        b, four = get("binary"), get("fourway")
        var = next((v for v in res.tables.get("variants", []) if v.get("head", "heads") == head
                    and (v["protocol"], v["mode"]) == (proto, mode)), {})
        rows.append([res.model, head, proto, mode, _ci(b, "auc"), _ci(b, "eer"), _fmt(b.get("acc")),
                     _fmt(four.get("acc")), _fmt(four.get("macro_f1")),
                     _ci(get("speech"), "auc"), _ci(get("env"), "auc"), _ci(var, "delta_E_S")])
    return _md(["model", "head", "protocol", "mode", "AUC", "EER", "Acc", "4-way Acc",
                "4-way F1", "speech AUC", "env AUC", "Δ_E−S"], rows)


def _table(records: list[Record], cols: list[tuple[str, str, Callable[[Record], str]]]) -> str:
    return _md([c[1] for c in cols], [[fn(r) for _, _, fn in cols] for r in records])


def _col(name: str, title: str = "", ci: bool = False) -> tuple[str, str, Callable[[Record], str]]:
    return (name, title or name, (lambda r: _ci(r, name)) if ci else (lambda r: _fmt(r.get(name))))


def render_markdown(res: EvalResult) -> str:
    """All tables as one Markdown document."""
    head = _col("head")
    t = res.tables
    parts = [
        f"# MADBench evaluation: {res.model}", "## Table 2: main results", main_table(res),
        "## Table 3: per-variant AUC vs R and interference gaps",
        _table(t.get("variants", []), [head, _col("protocol"), _col("mode"),
               _col("auc_SR", "S vs R", True), _col("auc_ER", "E vs R", True),
               _col("auc_QR", "Q vs R", True), _col("G_S", "G_S", True), _col("G_E", "G_E", True)]),
        "## Table 4: scene consistency (Δ_pair = AUC_P − AUC_Sh)",
        _table(t.get("pairing", []), [head, _col("protocol"), _col("mode"), _col("task"),
               _col("auc_AV_paired", "AUC_P"), _col("auc_AV_shuffled", "AUC_Sh"),
               _col("delta_pair", "Δ_pair", True), _col("n", "N")]),
        "## Table 5: modality ablation (A-V − A)",
        _table(t.get("ablation", []), [_col("protocol"), _col("task"),
               _col("auc_A_paired", "AUC A"), _col("auc_AV_paired", "AUC A-V"),
               _col("delta_AV_A", "Δ", True), _col("n", "N")]),
        "## Per-generator breakdown",
        _table(t.get("generators", []), [head, _col("protocol"), _col("mode"), _col("generator"),
               _col("auc", "AUC"), _col("eer", "EER"), _col("n_fake", "N fake"),
               _col("n_real", "N real")]),
        "## Leave-one-generator-out",
        _table(t.get("logo", []), [_col("protocol"), _col("mode"), _col("generator"),
               _col("auc_seen", "AUC seen"), _col("auc_held_out", "AUC held out"),
               _col("drop", "drop"), _col("n_fake", "N fake"), _col("n_real", "N real")]),
    ]
    return "\n\n".join(parts) + "\n"


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x.item() if isinstance(x, np.generic) else x


def render_json(res: EvalResult) -> str:
    """Every table as JSON (NaN → null)."""
    return json.dumps(_clean({"model": res.model, "tables": res.tables}), indent=1)


def _roc_svg(curves: list[tuple[str, np.ndarray, np.ndarray]], size: int = 220) -> str:
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    lines = [f'<svg width="{size}" height="{size}" viewBox="0 0 1 1" '
             'preserveAspectRatio="none" style="border:1px solid #999">',
             '<line x1="0" y1="1" x2="1" y2="0" stroke="#ccc" stroke-width="0.005"/>']
    for i, (_, fpr, tpr) in enumerate(curves):
        pts = " ".join(f"{x:.4f},{1 - y:.4f}" for x, y in zip_strict(fpr, tpr))
        lines.append(f'<polyline fill="none" stroke="{colours[i % 6]}" stroke-width="0.01" '
                     f'points="{pts}"/>')
    legend = "".join(f'<span style="color:{colours[i % 6]}">■ {html.escape(n)}</span> '
                     for i, (n, _, _) in enumerate(curves))
    return "\n".join([*lines, "</svg>", f"<div>{legend}</div>"])


def _confusion_html(rec: Record) -> str:
    cm, classes = rec["confusion"], rec["classes"]
    top = max(max(row) for row in cm) or 1
    cells = "".join(
        "<tr><th>" + html.escape(c) + "</th>" + "".join(
            f'<td style="background:rgba(31,119,180,{v / top:.2f})">{v}</td>' for v in row)
        + "</tr>" for c, row in zip_strict(classes, cm))
    header = "".join(f"<th>{html.escape(c)}</th>" for c in classes)
    return f"<table class=cm><tr><th>true \\ pred</th>{header}</tr>{cells}</table>"


def _group_html(g: Any, tasks: dict[Any, Record]) -> str:
    curves = []
    for task in ("binary", "speech", "env", "scene_dr", "scene_sr", "scene_ds"):
        if task in g.scores:
            mask, y = task_labels(g.test, task)
            if mask.any() and 0 < y.sum() < y.size:
                fpr, tpr, _ = roc_points(y, g.scores[task][mask])
                curves.append((task, fpr, tpr))
    key = ("heads" if g.heads else "direct", g.protocol, g.mode, g.pairing, "fourway")
    cm = _confusion_html(tasks[key]) if key in tasks else ""
    title = html.escape(f"{key[0]} · {g.protocol} · {g.mode} · {g.pairing}")
    return f"<section><h3>{title}</h3><div class=row>{_roc_svg(curves)}{cm}</div></section>"


def render_html(res: EvalResult) -> str:
    """A self-contained HTML page: ROC curves, confusion matrices, then the tables."""
    tasks = _by_task(res)
    body = "".join(_group_html(g, tasks) for g in res.groups)
    tables = html.escape(render_markdown(res))
    style = ("body{font-family:sans-serif;margin:2em} .row{display:flex;gap:2em}"
             " table.cm td{padding:4px 8px;text-align:right} pre{font-size:12px}")
    return (f"<!doctype html><html><head><meta charset=utf-8><title>MADBench: "
            f"{html.escape(res.model)}</title><style>{style}</style></head><body>"
            f"<h1>MADBench evaluation: {html.escape(res.model)}</h1><h2>ROC curves and "
            f"confusion matrices (test split)</h2>{body}<h2>Tables</h2><pre>{tables}</pre>"
            "</body></html>")


def write_report(res: EvalResult, put: Callable[[str, bytes], Any]) -> list[str]:
    """Write ``report.md``, ``report.json`` and ``report.html`` through ``put(name, data)``."""
    files = {"report.md": render_markdown(res), "report.json": render_json(res),
             "report.html": render_html(res)}
    for name, text in files.items():
        put(name, text.encode())
    return list(files)
