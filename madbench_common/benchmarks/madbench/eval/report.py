"""Reports of an evaluation: the paper's Tables 2–5 in Markdown and HTML, the long JSON.

The first screen of every report is Table 2 (Markdown top, HTML top and what
``madbench report`` prints); then Tables 3, 4 and 5
(:mod:`madbench_common.benchmarks.madbench.eval.tables`),
the zero-shot parse rates, the per-generator breakdown (N per cell) and
leave-one-generator-out generalisation, average precision and, where the run has
robustness conditions, the robustness tables. The HTML report ends with figures drawn
by matplotlib as inline SVG (:mod:`~madbench_common.benchmarks.madbench.eval.figures`: ROC and DET
curves,
robustness, per-generator bars) and the four-way confusion matrices. The JSON keeps
every record of every model (``models[].tables``, the figures' curves included) plus
the tables as laid out.
Bracketed ranges are clip-paired bootstrap 95% intervals.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.eval.prompt_table import prompt_table
from madbench_common.benchmarks.madbench.eval.robust_tables import (
    conditions_of,
    robustness_pivot,
    robustness_table,
)
from madbench_common.benchmarks.madbench.eval.suite import EvalResult
from madbench_common.benchmarks.madbench.eval.tables import (
    Table,
    ap_table,
    col,
    cross_table,
    long_table,
    paper_tables,
    parse_table,
)
from madbench_common.core.compat import zip_strict
from madbench_common.core.safetext import md_text

__all__ = ["main_table", "render_html", "render_json", "render_markdown", "report_tables",
           "write_report"]

_TITLES = {"table2a": "Table 2", "table3": "Table 3", "table4": "Table 4", "table5": "Table 5"}


def _extra_tables(results: Sequence[EvalResult]) -> list[Table]:
    gen = long_table(list(results), "generators", "Per-generator breakdown (binary task)", [
        col("source"), col("protocol"), col("mode"), col("generator"), col("auc", "AUC"),
        col("eer", "EER"), col("ap", "AP"), col("n_fake", "N fake"), col("n_real", "N real")])
    logo = long_table(list(results), "logo", "Leave-one-generator-out (binary head)", [
        col("protocol"), col("mode"), col("generator"), col("auc_seen", "AUC seen"),
        col("auc_held_out", "AUC held out"), col("drop", "drop"),
        col("ap_seen", "AP seen"), col("ap_held_out", "AP held out"), col("n_fake", "N fake"),
        col("n_real", "N real")])
    ap = ap_table(list(results))
    extra = ([cross_table(list(results))] if any(r.tables.get("cross") for r in results)
             else [])
    if conditions_of(list(results)):
        extra += [robustness_pivot(list(results)), robustness_table(list(results))]
    parse = parse_table(list(results))
    if not parse.sections:
        return [ap, *extra, gen, logo]
    return [ap, *extra, parse, prompt_table(list(results)), gen, logo]


def report_tables(results: Sequence[EvalResult]) -> list[Table]:
    """Every table of the report in order: Table 2 (a, b), 3, 4, 5, then the extras."""
    return [*paper_tables(list(results)), *_extra_tables(results)]


def _md_table(t: Table) -> str:
    """``t`` in Markdown; every cell, header and note may quote input (model, generator
    and source names), so each goes through :func:`md_text`."""
    e = md_text
    width = len(t.headers)
    lines = ["| " + " | ".join(map(e, t.headers)) + " |", "|" + "---|" * width]
    for title, rows in t.sections:
        if title:
            lines.append(f"| **{e(title)}** |" + " |" * (width - 1))
        lines += ["| " + " | ".join(map(e, row)) + " |" for row in rows]
    if not t.sections:
        lines.append("| (no results) |" + " |" * (width - 1))
    notes = [f"- {e(n)}" for n in t.notes]
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
    parts = [f"# MADBench evaluation: {md_text(_names(results))}"]
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
        if title:
            body.append(f'<tr class=group><th colspan="{len(t.headers)}">{e(title)}</th></tr>')
        body += ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows]
    notes = "".join(f"<li>{e(n)}</li>" for n in t.notes)
    heading = _heading(t).strip().removeprefix("## ")
    title = (f"<h2>{e(heading)}</h2>" if heading else "") + (
        f"<h3>{e(t.title)}</h3>" if t.key in ("table2a", "table2b") else "")
    return (f"{title}<table class=paper><tr>{head}</tr>{''.join(body)}</table>"
            + (f"<ul class=notes>{notes}</ul>" if notes else ""))


def _confusion_html(rec: dict[str, Any]) -> str:
    cm, classes = rec["confusion"], rec["classes"]
    top = max(max(row) for row in cm) or 1
    cells = "".join(
        "<tr><th>" + html.escape(c) + "</th>" + "".join(
            f'<td style="background:rgba(31,119,180,{v / top:.2f})">{v}</td>' for v in row)
        + "</tr>" for c, row in zip_strict(classes, cm))
    header = "".join(f"<th>{html.escape(c)}</th>" for c in classes)
    return f"<table class=cm><tr><th>true \\ pred</th>{header}</tr>{cells}</table>"


def _matrices_html(r: EvalResult) -> str:
    """The four-way confusion matrices of one model, one per (source, protocol, mode)."""
    parts = []
    for rec in (x for x in r.tables.get("tasks", []) if x["task"] == "fourway"):
        title = html.escape(f"{r.model.name} · {rec['source']} · {rec['protocol']} · "
                            f"{rec['mode']}")
        parts.append(f"<div class=cmbox><h4>{title}</h4>{_confusion_html(rec)}</div>")
    return "".join(parts)


def render_html(results: Sequence[EvalResult]) -> str:
    """A self-contained page: Table 2 first, the other tables, then the figures (ROC and DET
    per protocol, robustness, per-generator bars; matplotlib, inline SVG) and the four-way
    confusion matrices."""
    from madbench_common.benchmarks.madbench.eval.figures import figures_html

    tables = "".join(_html_table(t) for t in report_tables(results))
    figures = figures_html(list(results))
    matrices = "".join(_matrices_html(r) for r in results)
    style = ("body{font-family:sans-serif;margin:2em;max-width:1400px}"
             " table.paper{border-collapse:collapse;font-size:13px}"
             " table.paper td,table.paper th{border:1px solid #ccc;padding:3px 6px}"
             " tr.group th{text-align:left;background:#eee} table.cm td{padding:4px 8px;"
             "text-align:right} .notes{font-size:12px;color:#444}"
             " figure.plot{margin:1.5em 0} figure.plot svg{max-width:100%;height:auto}"
             " figcaption{font-size:13px;margin-bottom:.4em} .cms{display:flex;flex-wrap:wrap;"
             "gap:1.5em} .cmbox h4{font-size:12px;margin:.3em 0}")
    names = html.escape(_names(results))
    return (f"<!doctype html><html><head><meta charset=utf-8><title>MADBench: {names}</title>"
            f"<style>{style}</style></head><body><h1>MADBench evaluation: {names}</h1>"
            f"{tables}<h2 id=figures>Figures (test split)</h2>{figures}"
            f"<h2>Four-way confusion matrices (test split)</h2><div class=cms>{matrices}</div>"
            "</body></html>")


def write_report(results: Sequence[EvalResult], put: Callable[[str, bytes], Any]) -> list[str]:
    """Write ``report.md``, ``report.json`` and ``report.html`` through ``put(name, data)``."""
    files = {"report.md": render_markdown(results), "report.json": render_json(results),
             "report.html": render_html(results)}
    for name, text in files.items():
        put(name, text.encode())
    return list(files)
