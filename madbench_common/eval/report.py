"""Reports of an evaluation: the paper's Tables 2–5 in Markdown and HTML, the long JSON.

The first screen of every report is Table 2 (Markdown top, HTML top and what
``madbench report`` prints); then Tables 3, 4 and 5 (:mod:`madbench_common.eval.tables`),
the zero-shot parse rates, the per-generator breakdown (N per cell) and
leave-one-generator-out generalisation. The HTML report ends with ROC curves and
four-way confusion matrices as inline SVG (no plotting dependency). The JSON keeps
every record of every model (``models[].tables``) plus the tables as laid out.
Bracketed ranges are clip-paired bootstrap 95% intervals.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from madbench_common.compat import zip_strict
from madbench_common.eval.metrics import roc_points
from madbench_common.eval.suite import EvalResult
from madbench_common.eval.tables import Table, col, long_table, paper_tables, parse_table
from madbench_common.eval.tasks import task_labels

__all__ = ["main_table", "render_html", "render_json", "render_markdown", "report_tables",
           "write_report"]

_TITLES = {"table2a": "Table 2", "table3": "Table 3", "table4": "Table 4", "table5": "Table 5"}


def _extra_tables(results: Sequence[EvalResult]) -> list[Table]:
    gen = long_table(list(results), "generators", "Per-generator breakdown (binary task)", [
        col("source"), col("protocol"), col("mode"), col("generator"), col("auc", "AUC"),
        col("eer", "EER"), col("n_fake", "N fake"), col("n_real", "N real")])
    logo = long_table(list(results), "logo", "Leave-one-generator-out (binary head)", [
        col("protocol"), col("mode"), col("generator"), col("auc_seen", "AUC seen"),
        col("auc_held_out", "AUC held out"), col("drop", "drop"), col("n_fake", "N fake"),
        col("n_real", "N real")])
    parse = parse_table(list(results))
    return [parse, gen, logo] if parse.sections else [gen, logo]


def report_tables(results: Sequence[EvalResult]) -> list[Table]:
    """Every table of the report in order: Table 2 (a, b), 3, 4, 5, then the extras."""
    return [*paper_tables(list(results)), *_extra_tables(results)]


def _md_table(t: Table) -> str:
    width = len(t.headers)
    lines = ["| " + " | ".join(t.headers) + " |", "|" + "---|" * width]
    for title, rows in t.sections:
        lines.append(f"| **{title}** |" + " |" * (width - 1))
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    if not t.sections:
        lines.append("| (no results) |" + " |" * (width - 1))
    notes = [f"- {n}" for n in t.notes]
    return "\n".join([f"### {t.title}" if t.key in ("table2a", "table2b") else "", *lines, "",
                      *notes]).strip("\n")


def _heading(t: Table) -> str:
    if t.key == "table2b":
        return ""
    if t.key == "table2a":
        return "## Table 2: binary detection and four-way classification (paper §5.1)\n\n"
    name = _TITLES.get(t.key)
    return f"## {name}: {t.title}\n\n" if name else f"## {t.title}\n\n"


def _names(results: Sequence[EvalResult]) -> str:
    return ", ".join(r.model.name for r in results) or "no models"


def render_markdown(results: Sequence[EvalResult]) -> str:
    """All tables as one Markdown document; the first section is Table 2."""
    parts = [f"# MADBench evaluation: {_names(results)}"]
    for t in report_tables(results):
        parts.append(_heading(t) + _md_table(t))
    return "\n\n".join(parts) + "\n"


def main_table(results: Sequence[EvalResult]) -> str:
    """Table 2 (a) and (b) in Markdown: the report's first screen."""
    return "\n\n".join(_heading(t) + _md_table(t) for t in paper_tables(list(results))[:2])


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x.item() if isinstance(x, np.generic) else x


def render_json(results: Sequence[EvalResult]) -> str:
    """Every record of every model, and the laid-out tables, as strict JSON (NaN → null)."""
    models = [{"slug": r.model.slug, "name": r.model.name, "group": r.model.group,
               "reference": r.model.reference, "stands_in_for": r.model.stands_in_for,
               "in_paper": r.model.in_paper, "tables": r.tables} for r in results]
    layout = {t.key: {"title": t.title, "headers": t.headers,
                      "sections": [{"group": g, "rows": rows} for g, rows in t.sections],
                      "notes": t.notes} for t in report_tables(results)}
    return json.dumps(_clean({"models": models, "layout": layout}), indent=1)


def _html_table(t: Table) -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in t.headers)
    body = []
    for title, rows in t.sections:
        body.append(f'<tr class=group><th colspan="{len(t.headers)}">{e(title)}</th></tr>')
        body += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows]
    notes = "".join(f"<li>{e(n)}</li>" for n in t.notes)
    heading = _heading(t).strip().removeprefix("## ")
    title = (f"<h2>{e(heading)}</h2>" if heading else "") + (
        f"<h3>{e(t.title)}</h3>" if t.key in ("table2a", "table2b") else "")
    return (f"{title}<table class=paper><tr>{head}</tr>{''.join(body)}</table>"
            + (f"<ul class=notes>{notes}</ul>" if notes else ""))


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


def _confusion_html(rec: dict[str, Any]) -> str:
    cm, classes = rec["confusion"], rec["classes"]
    top = max(max(row) for row in cm) or 1
    cells = "".join(
        "<tr><th>" + html.escape(c) + "</th>" + "".join(
            f'<td style="background:rgba(31,119,180,{v / top:.2f})">{v}</td>' for v in row)
        + "</tr>" for c, row in zip_strict(classes, cm))
    header = "".join(f"<th>{html.escape(c)}</th>" for c in classes)
    return f"<table class=cm><tr><th>true \\ pred</th>{header}</tr>{cells}</table>"


def _curves(g: Any) -> list[tuple[str, np.ndarray, np.ndarray]]:
    curves = []
    for task in ("binary", "speech", "env", "scene"):
        if task in g.scores:
            mask, y = task_labels(g.test, task)
            s = g.scores[task][mask]
            ok = np.isfinite(s)
            if ok.any() and 0 < y[ok].sum() < ok.sum():
                fpr, tpr, _ = roc_points(y[ok], s[ok])
                curves.append((task, fpr, tpr))
    return curves


def _plots_html(r: EvalResult) -> str:
    fourway = {(x["source"], x["protocol"], x["mode"], x["pairing"]): x
               for x in r.tables.get("tasks", []) if x["task"] == "fourway"}
    parts = []
    for g in r.groups:
        rec = fourway.get((g.source, g.protocol, g.mode, g.pairing))
        title = html.escape(f"{r.model.name} · {g.source} · {g.protocol} · {g.mode} · {g.pairing}")
        cm = _confusion_html(rec) if rec else ""
        parts.append(f"<section><h3>{title}</h3><div class=row>{_roc_svg(_curves(g))}{cm}"
                     "</div></section>")
    return "".join(parts)


def render_html(results: Sequence[EvalResult]) -> str:
    """A self-contained page: Table 2 first, the other tables, then ROC curves and matrices."""
    tables = "".join(_html_table(t) for t in report_tables(results))
    plots = "".join(_plots_html(r) for r in results)
    style = ("body{font-family:sans-serif;margin:2em} .row{display:flex;gap:2em}"
             " table.paper{border-collapse:collapse;font-size:13px}"
             " table.paper td,table.paper th{border:1px solid #ccc;padding:3px 6px}"
             " tr.group th{text-align:left;background:#eee} table.cm td{padding:4px 8px;"
             "text-align:right} .notes{font-size:12px;color:#444}")
    names = html.escape(_names(results))
    return (f"<!doctype html><html><head><meta charset=utf-8><title>MADBench: {names}</title>"
            f"<style>{style}</style></head><body><h1>MADBench evaluation: {names}</h1>"
            f"{tables}<h2>ROC curves and confusion matrices (test split)</h2>{plots}"
            "</body></html>")


def write_report(results: Sequence[EvalResult], put: Callable[[str, bytes], Any]) -> list[str]:
    """Write ``report.md``, ``report.json`` and ``report.html`` through ``put(name, data)``."""
    files = {"report.md": render_markdown(results), "report.json": render_json(results),
             "report.html": render_html(results)}
    for name, text in files.items():
        put(name, text.encode())
    return list(files)
