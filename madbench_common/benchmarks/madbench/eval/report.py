"""Reports of an evaluation: a summary, the paper's Tables 2–5 in Markdown and HTML, the
long JSON.

Every report opens with a one-screen summary: the run's facts
(:mod:`~madbench_common.benchmarks.madbench.eval.facts`), which models ran, and the
headline table (binary AUC and four-way macro-F1, §5.1; Δ_E−S, §5.2; Δ_pair, §5.3; see
:func:`~madbench_common.benchmarks.madbench.eval.tables.summary_table`) with a dot plot;
the marks (†, ‡, ⁿ, ʰ) are explained once, in one legend. Then the tables, each with its
figure (:func:`render_html`, :func:`render_markdown`, :func:`render_json`).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Mapping, Sequence
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
    DASH,
    LEGEND,
    Cell,
    Table,
    ap_table,
    col,
    cross_table,
    long_table,
    paper_tables,
    parse_table,
    summary_table,
)
from madbench_common.core.compat import zip_strict
from madbench_common.core.safetext import md_text

__all__ = ["fact_lines", "main_table", "render_html", "render_json", "render_markdown",
           "report_tables", "report_title", "write_report"]

Facts = dict[str, Any]
_PROTOCOL_NAMES = {"balanced": "Balanced", "scene_matched": "Matched",
                   "scene_mismatched": "Mismatched"}
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


def report_title(results: Sequence[EvalResult], runs: Sequence[Facts] = ()) -> str:
    """The report's title: it names the run (or the compared runs), never every model."""
    if len(runs) == 1:
        return f"MADBench run {runs[0].get('run_id', '?')}"
    if runs:
        return "MADBench comparison: " + " vs ".join(
            str(f.get("label") or f.get("run_id", "?")) for f in runs)
    if len(results) == 1:
        return f"MADBench evaluation: {results[0].model.name}"
    return f"MADBench evaluation of {len(results)} models"


def _split(d: dict[str, Any]) -> str:
    return " / ".join(str(d.get(s, 0)) for s in ("train", "val", "test"))


def _models_line(results: Sequence[EvalResult]) -> str:
    refs = [r for r in results if r.model.reference]
    paper = [r for r in results if not r.model.reference and r.model.in_paper]
    extra = [r for r in results if not r.model.reference and not r.model.in_paper]
    parts = [f"{len(results)} model{'s' if len(results) != 1 else ''}: "
             f"{len(paper)} of the paper's models"]
    if refs:
        parts.append(f"{len(refs)} CPU reference stand-in{'s' if len(refs) != 1 else ''} †"
                     " (not the paper's models; see “Stands in for” below)")
    if extra:
        parts.append(f"{len(extra)} extra model{'s' if len(extra) != 1 else ''} ‡")
    return ", ".join(parts)


def _sources_line(f: Facts) -> str:
    c = f.get("clips") or {}
    protos = " · ".join(f"{_PROTOCOL_NAMES.get(p, p)} {v.get('total', 0)} ({_split(v)})"
                        for p, v in (f.get("samples") or {}).items())
    sc = " · ".join(f"{k} {v}" for k, v in (f.get("scene_consistency") or {}).items())
    conds = f.get("robustness_conditions") or []
    eligible = c.get("eligible")
    return (f"{c.get('ingested', '?')} source clips ingested, "
            + (f"{eligible} eligible, " if eligible is not None else "")
            + f"{c.get('in_samples', 0)} in the benchmark (train / val / test {_split(c)})."
            + (f" Samples per protocol (train / val / test): {protos}." if protos else "")
            + (f" Scene consistency: {sc}." if sc else "")
            + (f" Robustness conditions: {len(conds)}." if conds else ""))


def _quarantine_line(f: Facts) -> str:
    q = f.get("quarantine") or {}
    if not q.get("total"):
        return "none."
    return f"{q['total']} row{'s' if q['total'] != 1 else ''}: " + "; ".join(
        f"{x['reason']} × {x['count']} in {x['stage']} (e.g. "
        f"{', '.join(str(e) for e in x.get('examples', []))})"
        for x in q.get("by_stage", [])) + "."


def fact_lines(results: Sequence[EvalResult], runs: Sequence[Facts] = ()
               ) -> list[tuple[str, str]]:
    """The summary's facts as (label, plain text) lines; renderers escape the text."""
    lines = []
    for f in runs:
        who = f" ({f['label']})" if len(runs) > 1 and f.get("label") else ""
        if "pipeline" not in f:  # a report.json written before reports had run facts
            lines.append((f"Run{who}", f"{f.get('run_id', '?')}, read from "
                          f"{f.get('store', '?')} (this report.json has no run facts)."))
            continue
        desc = f": {f['pipeline_description']}" if f.get("pipeline_description") else ""
        done = (f"; {f['stages_done']} of {f['stages']} stages done" if "stages" in f else "")
        lines.append((f"Pipeline{who}", f"{f['pipeline']}{desc}. Run {f.get('run_id', '?')} "
                      f"in {f.get('store', '?')}{done}."))
        if f.get("unavailable"):
            lines.append((f"Sources{who}", str(f["unavailable"])))
        else:
            lines.append((f"Sources{who}", _sources_line(f)))
        images = "; ".join(f"{img} ({len(st)} stage{'s' if len(st) != 1 else ''})"
                           for img, st in (f.get("images") or {}).items())
        lines.append((f"Code{who}", f"commit {f.get('commit', 'unknown')}; images: "
                      + (images or "none recorded")
                      + (" (embedded = in-process, no container)"
                         if "embedded" in (f.get("images") or {}) else "") + "."))
        if not f.get("unavailable"):
            lines.append((f"Quarantined{who}", _quarantine_line(f)))
    lines.append(("Models", _models_line(results) + "."))
    return lines


def _used_marks(tables: Sequence[Table]) -> list[str]:
    seen: dict[str, None] = {}
    for t in tables:
        seen.update(dict.fromkeys(t.marks))
    return [m for m in LEGEND if m in seen]


_READING = ("Each cell shows one number; hover it (or read report.md / report.json) for "
            "its clip-paired bootstrap 95 % interval and the secondary metrics. Bold: the "
            "best value of its column (↑ higher is better, ↓ lower; a tie of three or more is "
            "not marked). Click a column header "
            "to sort. Every — has its reason in the notes under its table.")


# ---------------------------------------------------------------------------- Markdown

def _md_escape(text: str) -> str:
    """A cell's text safe inside a Markdown table row: on one line, controls visible, no
    HTML, link or pipe that input could inject (:func:`md_text`)."""
    return md_text(text)


def _md_table(t: Table) -> str:
    """``t`` in Markdown; every cell, header and note may quote input (model, generator
    and source names), so each goes through :func:`md_text`."""
    width = len(t.headers)
    lines = ["| " + " | ".join(_md_escape(h) for h in t.headers) + " |", "|" + "---|" * width]
    for title, rows in t.sections:
        if title:
            lines.append(f"| **{_md_escape(title)}** |" + " |" * (width - 1))
        lines += ["| " + " | ".join(_md_escape(c) for c in row) + " |" for row in rows]
    if not t.sections:
        lines.append("| (no results) |" + " |" * (width - 1))
    notes = [f"- {_md_escape(n)}" for n in t.all_notes()]
    return "\n".join([f"### {t.title}" if t.key.removesuffix("_extra") in ("table2a", "table2b")
                      else "", *lines, "",
                      *notes]).strip("\n")


def _heading(t: Table) -> str:
    if t.key in ("table2b", "table2b_extra"):
        return ""
    if t.key == "table2a":
        return "## Table 2: binary detection and four-way classification (paper §5.1)\n\n"
    if t.key == "table2a_extra":
        return ("## Beyond the paper — Table 2's layout for models the paper's Table 2 does "
                "not list\n\n")
    if t.key.endswith("_extra") and t.key.removesuffix("_extra") in _TITLES:
        return f"## Beyond the paper — {_TITLES[t.key.removesuffix('_extra')]}: {t.title}\n\n"
    name = _TITLES.get(t.key)
    return f"## {name}: {t.title}\n\n" if name else f"## {t.title}\n\n"


def _md_summary(results: Sequence[EvalResult], runs: Sequence[Facts], summary: Table,
                marks: Sequence[str]) -> str:
    facts = [f"- **{label}**: {_md_escape(text)}" for label, text in fact_lines(results, runs)]
    legend = [f"- {m} {LEGEND[m][1]}" for m in marks]
    return "\n".join(["## Summary", "", *facts, "", f"### {summary.title}", "",
                      _md_table(summary), "", *legend,
                      "- Bracketed ranges: clip-paired bootstrap 95 % intervals; every — has "
                      "its reason in the notes under its table."]).rstrip() + "\n"


def render_markdown(results: Sequence[EvalResult], runs: Sequence[Facts] = ()) -> str:
    """All tables as one Markdown document: the summary first (facts, headline table, the
    one legend), then Table 2 and the others with every number (intervals included)."""
    tables = report_tables(results)
    summary = summary_table(list(results))
    parts = [f"# {report_title(results, runs)}",
             _md_summary(results, runs, summary, _used_marks([summary, *tables]))]
    for t in tables:
        parts.append(_heading(t) + _md_table(t))
    return "\n\n".join(p.strip("\n") for p in parts) + "\n"


def main_table(results: Sequence[EvalResult]) -> str:
    """Table 2 (a) and (b) in Markdown."""
    return "\n\n".join(_heading(t) + _md_table(t) for t in paper_tables(list(results))[:2])


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, str):
        return str(x)
    return x.item() if isinstance(x, np.generic) else x


def _layout(t: Table) -> dict[str, Any]:
    return {"title": t.title, "headers": t.headers,
            "sections": [{"group": g, "rows": rows} for g, rows in t.sections],
            "notes": t.all_notes(), "marks": t.marks}


def render_json(results: Sequence[EvalResult], runs: Sequence[Facts] = (),
                rejections: Sequence[Mapping[str, Any]] | None = None) -> str:
    """Every record of every model, the run's facts and the laid-out tables, as strict
    JSON (NaN → null); ``rejections``: the run's rejected rows by stage and reason
    (:func:`~madbench_common.pipeline.status.rejection_table`)."""
    models = [{"slug": r.model.slug, "name": r.model.name, "group": r.model.group,
               "reference": r.model.reference, "stands_in_for": r.model.stands_in_for,
               "in_paper": r.model.in_paper, "tables": r.tables} for r in results]
    layout = {t.key: _layout(t) for t in [summary_table(list(results)),
                                          *report_tables(results)]}
    legend = {m: {"anchor": f"mark-{a}", "meaning": text} for m, (a, text) in LEGEND.items()}
    # one run's report carries its run id at the top: madbench compare labels it by that
    head = {"run_id": runs[0]["run_id"]} if len(runs) == 1 and runs[0].get("run_id") else {}
    doc: dict[str, Any] = {**head, "title": report_title(results, runs), "runs": list(runs),
                           "models": models, "layout": layout, "legend": legend}
    if rejections is not None:
        doc["rejections"] = [dict(r) for r in rejections]
    return json.dumps(_clean(doc), indent=1, ensure_ascii=False)


# ---------------------------------------------------------------------------- HTML

def _esc(text: str) -> str:
    """Escaped text with the report's marks linked to the legend."""
    out = html.escape(str(text), quote=True)
    for mark, (anchor, _) in LEGEND.items():
        out = out.replace(mark, f'<a class=mark href="#mark-{anchor}">{mark}</a>')
    return out


def _best_cells(t: Table) -> set[tuple[int, int, int]]:
    """(section, row, column) of the best value of every column with a direction."""
    columns: dict[int, list[tuple[float, tuple[int, int, int]]]] = {}
    for si, (_, rows) in enumerate(t.sections):
        for ri, row in enumerate(rows):
            for ci, c in enumerate(row):
                if isinstance(c, Cell) and c.better and c.value is not None \
                        and math.isfinite(c.value):
                    columns.setdefault(ci, []).append((round(c.better * c.value, 3),
                                                       (si, ri, ci)))
    best = set()
    for values in columns.values():
        top = max((v for v, _ in values), default=0.0)
        winners = {where for v, where in values if v == top}
        if len(values) > 1 and len(winners) <= 2:  # a tie of three or more marks nothing
            best |= winners
    return best


def _td(c: str, best: bool) -> str:
    if not isinstance(c, Cell):
        return f"<td>{_esc(c)}</td>"
    if c == DASH:
        title = c.reason or "no value"
        return f'<td class=na title="{html.escape(title, quote=True)}">{DASH}</td>'
    value = f' data-v="{c.value:.6g}"' if c.value is not None and math.isfinite(c.value) else ""
    cls = " class=best" if best else ""
    title = f' title="{html.escape(c.hint or str(c), quote=True)}"'
    return f"<td{cls}{value}{title}>{_esc(c.primary)}</td>"


def _table_html(t: Table) -> str:
    best = _best_cells(t)
    head = "".join(f"<th>{_esc(h)}</th>" for h in t.headers)
    body = []
    for si, (title, rows) in enumerate(t.sections):
        trs = []
        if title:
            trs.append(f'<tr class=group><th colspan="{len(t.headers)}">{_esc(title)}</th></tr>')
        for ri, row in enumerate(rows):
            cont = " class=cont" if ri and row and row[0] == "" else ""
            group = f' title="{html.escape(title, quote=True)}"' if title else ""
            trs.append(f"<tr{cont}{group}>" + "".join(_td(c, (si, ri, ci) in best)
                                               for ci, c in enumerate(row)) + "</tr>")
        body.append("<tbody>" + "".join(trs) + "</tbody>")
    if not t.sections:
        body.append(f'<tbody><tr><td colspan="{len(t.headers)}">(no results)</td></tr></tbody>')
    return (f'<table class="paper sortable" id="tbl-{t.key}"><thead><tr>{head}</tr></thead>'
            + "".join(body) + "</table>")


def _notes_html(t: Table) -> str:
    notes = "".join(f"<li>{_esc(n)}</li>" for n in t.all_notes())
    return f"<ul class=notes>{notes}</ul>" if notes else ""


def _legend_html(marks: Sequence[str]) -> str:
    items = "".join(f'<li id="mark-{LEGEND[m][0]}"><b>{m}</b> {html.escape(LEGEND[m][1])}</li>'
                    for m in marks)
    return (f'<div class=legend id=legend><b>Legend</b> (once for the whole report)<ul>'
            f"{items}<li>{html.escape(_READING)}</li></ul></div>")


def _dot_plot(t: Table) -> str:
    """The headline table as an inline SVG dot plot: AUC and macro-F1 on [0, 1] (chance
    AUC 0.5 dotted), the gaps Δ_E−S and Δ_pair on [−1, 1] (0 dotted), one row per model."""
    rows = [row for _, rs in t.sections for row in rs]
    h, top, label_w, panel, gap = 22, 40, 130, 150, 22
    width = label_w + 2 * panel + gap + 10
    height = top + h * len(rows) + 24
    x1 = lambda v: label_w + v * panel  # noqa: E731 - [0, 1]
    x2 = lambda v: label_w + panel + gap + (v + 1) / 2 * panel  # noqa: E731 - [−1, 1]
    out = [f'<svg class=dots xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
           'aria-label="Headline numbers per model">',
           '<style>text{font:12px sans-serif} .g{font-size:15px}</style>']
    for x, lab in ((x1(0), "0"), (x1(0.5), "0.5"), (x1(1), "1"), (x2(-1), "−1"), (x2(0), "0"),
                   (x2(1), "1")):
        out.append(f'<text x="{x:.1f}" y="{height - 6}" text-anchor="middle" '
                   f'fill="#555">{lab}</text>')
    out.append(f'<line x1="{x1(0.5):.1f}" x2="{x1(0.5):.1f}" y1="{top - 4}" '
               f'y2="{height - 20}" stroke="#999" stroke-dasharray="3,3"/>')
    out.append(f'<line x1="{x2(0):.1f}" x2="{x2(0):.1f}" y1="{top - 4}" y2="{height - 20}" '
               'stroke="#999" stroke-dasharray="3,3"/>')
    keys = (("●", "#1f77b4", "binary AUC"), ("◆", "#d62728", "4-way macro-F1"),
            ("●", "#2ca02c", "Δ_E−S"), ("▲", "#9467bd", "Δ_pair (D-R, S-R, D-S)"))
    x = 4.0
    for glyph, colour, name in keys:
        out.append(f'<text class=g x="{x:.0f}" y="13" fill="{colour}">{glyph}</text>'
                   f'<text x="{x + 14:.0f}" y="13">{html.escape(name)}</text>')
        x += 26 + 6.4 * len(name)
    out.append(f'<text x="{x1(0.5):.0f}" y="32" text-anchor="middle" fill="#555">AUC, F1'
               f'</text><text x="{x2(0):.0f}" y="32" text-anchor="middle" fill="#555">Δ (gaps)'
               "</text>")

    def dot(x: float, y: float, glyph: str, colour: str, tip: str) -> str:
        return (f'<text class=g x="{x:.1f}" y="{y + 5:.1f}" text-anchor="middle" '
                f'fill="{colour}">'
                f"{glyph}<title>{html.escape(tip)}</title></text>")

    for i, row in enumerate(rows):
        y = top + h * i + h / 2
        name = str(row[0])
        short = name if len(name) <= 20 else name[:19] + "…"
        out.append(f'<text x="{label_w - 6}" y="{y + 4:.1f}" text-anchor="end">'
                   f"{html.escape(short)}<title>{html.escape(name)}</title></text>")
        for ci, glyph, colour, scale in ((3, "●", "#1f77b4", x1), (4, "◆", "#d62728", x1),
                                         (5, "●", "#2ca02c", x2), (6, "▲", "#9467bd", x2),
                                         (7, "▲", "#9467bd", x2), (8, "▲", "#9467bd", x2)):
            c = row[ci] if ci < len(row) else ""
            v = c.value if isinstance(c, Cell) else None
            if isinstance(c, Cell) and v is not None and math.isfinite(v):
                lo, hi = (-1.0, 1.0) if scale is x2 else (0.0, 1.0)
                out.append(dot(scale(min(max(v, lo), hi)), y, glyph, colour,
                               f"{name}: {t.headers[ci]} {c.hint or c}"))
    out.append("</svg>")
    return "".join(out)


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:1em 2em;max-width:1400px;color:#222}"
    " h1{font-size:22px;margin:.2em 0 .4em} h2{font-size:18px;margin:1.6em 0 .4em;"
    "border-bottom:1px solid #ddd} h3{font-size:15px;margin:.8em 0 .3em}"
    " table.facts{font-size:13px;border-collapse:collapse;margin-bottom:.6em}"
    " table.facts th{text-align:left;padding:1px 10px 1px 0;vertical-align:top;white-space:nowrap}"
    " table.facts td{padding:1px 0}"
    " .headline{display:flex;gap:2em;align-items:flex-start;flex-wrap:wrap}"
    " table.paper{border-collapse:collapse;font-size:13px}"
    " table.paper td,table.paper th{border:1px solid #ccc;padding:2px 7px}"
    " table.paper td[data-v]{text-align:right;font-variant-numeric:tabular-nums}"
    " table.paper thead th{background:#f4f4f4;cursor:pointer;user-select:none}"
    " table.paper thead th[aria-sort=ascending]::after{content:' ▲'}"
    " table.paper thead th[aria-sort=descending]::after{content:' ▼'}"
    " tr.group th{text-align:left;background:#eef;font-weight:600}"
    " table.sorted tr.group{display:none}"
    " td.best{font-weight:700;background:#e6f4e6} td.na{color:#999;text-align:center}"
    " a.mark{text-decoration:none;color:#a33} .shown{font-size:12px;color:#555;margin:.2em 0}"
    " .notes{font-size:12px;color:#444;margin:.3em 0 0} .legend{font-size:12px;color:#333;"
    "margin:.6em 0;padding:.3em .8em;border-left:3px solid #a33;background:#fafafa}"
    " .legend ul{margin:.2em 0;padding-left:1.2em} .legend li:target{background:#ffd}"
    " nav#contents{font-size:13px;margin:.5em 0} nav#contents ol{display:inline;padding:0}"
    " nav#contents li{display:inline;margin-right:1em}"
    " .figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:0 1.5em}"
    " figure.plot{margin:1em 0} figure.plot svg{max-width:100%;height:auto}"
    " figcaption{font-size:13px;margin-bottom:.4em} .cms{display:flex;flex-wrap:wrap;gap:1.5em}"
    " .cmbox h4{font-size:12px;margin:.3em 0} table.cm td{padding:4px 8px;text-align:right}"
    " details{margin:.6em 0} summary{cursor:pointer;font-size:13px}")

_SCRIPT = """
(function () {
  function key(unit, i) {
    var c = unit[0].cells[i];
    if (!c) return null;
    if (c.hasAttribute('data-v')) return parseFloat(c.getAttribute('data-v'));
    var t = c.textContent.trim();
    return t === '\\u2014' || t === '' ? null : t;
  }
  function sort(table, i, th) {
    var asc = th.getAttribute('aria-sort') === 'descending';
    table.querySelectorAll('thead th').forEach(function (h) { h.removeAttribute('aria-sort'); });
    th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
    // one ranking over every model: the group rows hide, each row keeps its group as a title
    var units = [], cur = null, body = table.tBodies[0];
    table.querySelectorAll('tbody tr').forEach(function (tr) {
      if (tr.classList.contains('group')) return;
      if (tr.classList.contains('cont') && cur) { cur.push(tr); return; }
      cur = [tr];
      units.push(cur);
    });
    units.sort(function (a, b) {
      var x = key(a, i), y = key(b, i);
      if (x === null || y === null) return (x === null) - (y === null);
      var d = (typeof x === 'number' && typeof y === 'number') ? x - y
        : String(x).localeCompare(String(y));
      return asc ? d : -d;
    });
    table.classList.add('sorted');
    units.forEach(function (u) { u.forEach(function (tr) { body.appendChild(tr); }); });
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    table.querySelectorAll('thead th').forEach(function (th, i) {
      th.title = 'Sort by this column';
      th.addEventListener('click', function () { sort(table, i, th); });
    });
  });
})();
"""


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


_TOC = {"ap": "AP", "head_check": "§5.1 head check", "robustness_pivot": "Robustness by condition",
        "robustness": "Robustness details", "parse": "Zero-shot parse rates",
        "prompts": "Zero-shot prompts", "generators": "Per-generator",
        "logo": "Leave-one-generator-out", "cross": "Cross-dataset"}


def _section_html(t: Table, figure: str, after: str) -> tuple[str, str]:
    """(toc entry, HTML) of one table with its notes, then its figure and ``after``."""
    heading = _heading(t).strip().removeprefix("## ")
    sub = (f"<h3>{_esc(t.title)}</h3>" if t.key.removesuffix("_extra") in ("table2a", "table2b")
           else "")
    shown = f"<p class=shown>{_esc(t.shown)}</p>" if t.shown else ""
    figure = f"<div class=figs>{figure}</div>" if figure else ""
    body = (f"{sub}{shown}{_table_html(t)}{_notes_html(t)}{figure}{after}")
    if heading:
        short = _TOC.get(t.key) or heading.split(":")[0]
        return (f'<li><a href="#{t.key}">{html.escape(short)}</a></li>',
                f'<section id="{t.key}"><h2>{_esc(heading)}</h2>{body}</section>')
    return "", f'<section id="{t.key}">{body}</section>'


def render_html(results: Sequence[EvalResult], runs: Sequence[Facts] = ()) -> str:
    """A self-contained page (no external assets): the summary first (facts, headline table
    and dot plot, the one legend), a table of contents, then every table with its notes
    and, beneath it, its figure (ROC and DET under Table 2(a), robustness under the
    robustness table, per-generator bars under the generator table; the four-way
    confusion matrices under Table 2(b)).

    Each cell shows one number (its interval and secondary metrics in the hover text), the
    best value of each column is bold, columns sort on a click (a little inline
    JavaScript), and every ``—`` has its reason in the notes under its table."""
    from madbench_common.benchmarks.madbench.eval.figures import figure_groups

    tables = report_tables(results)
    summary = summary_table(list(results))
    figures = figure_groups(list(results))
    matrices = "".join(_matrices_html(r) for r in results)
    after = {"table2b": (f"<details><summary>Four-way confusion matrices (test split)"
                         f"</summary><div class=cms>{matrices}</div></details>")
             if matrices else ""}
    toc, sections = [], []
    for t in tables:
        entry, text = _section_html(t, figures.pop(t.key, ""), after.get(t.key, ""))
        toc.append(entry)
        sections.append(text)
    if figures:  # a figure whose table is absent from this report
        toc.append('<li><a href="#figures">Figures</a></li>')
        sections.append("<section id=figures><h2>Figures (test split)</h2>"
                        + "".join(figures.values()) + "</section>")
    title = html.escape(report_title(results, runs))
    facts = "".join(f"<tr><th>{html.escape(label)}</th><td>{_esc(text)}</td></tr>"
                    for label, text in fact_lines(results, runs))
    head = (f"<section id=summary><table class=facts>{facts}</table>"
            f"<h3>{_esc(summary.title)}</h3><div class=headline><div>{_table_html(summary)}"
            f"{_notes_html(summary)}</div>{_dot_plot(summary)}</div>"
            f"{_legend_html(_used_marks([summary, *tables]))}</section>")
    nav = ("<nav id=contents><b>Contents:</b> <ol>"
           '<li><a href="#summary">Summary</a></li>' + "".join(toc) + "</ol></nav>")
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{title}</title>"
            f"<meta name=viewport content=\"width=device-width\"><style>{_STYLE}</style>"
            f"</head><body><h1>{title}</h1>{head}{nav}{''.join(sections)}"
            f"<script>{_SCRIPT}</script></body></html>")


def write_report(results: Sequence[EvalResult], put: Callable[[str, bytes], Any],
                 runs: Sequence[Facts] = (),
                 rejections: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """Write ``report.md``, ``report.json`` and ``report.html`` through ``put(name, data)``;
    ``runs``: the facts of the run(s) the results come from (the summary's first lines);
    ``rejections``: the rejected rows by stage and reason, kept in ``report.json``."""
    files = {"report.md": render_markdown(results, runs),
             "report.json": render_json(results, runs, rejections),
             "report.html": render_html(results, runs)}
    for name, text in files.items():
        put(name, text.encode())
    return list(files)
