"""The DEAF report: the paper's Tables 3–5 and 7–9, the radar figure, and what the run used.

The tables (:func:`render_markdown`) and the radar (Figure 5: Acc per conflict type ×
level). Every model row names its slug and version; a model answering through the local
stub server, a tiny random checkpoint or a CPU reference is labelled so in the model table,
and a model whose answer stage failed is listed as absent (empty rows, not in the radar).
"""

from __future__ import annotations

import html
import json
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from madbench_common.benchmarks.deaf.design import CONFLICTS, EXTENSION_LEVEL, LEVELS
from madbench_common.benchmarks.deaf.radar import radar_png, radar_svg
from madbench_common.benchmarks.deaf.rows import EnvRow, MetricRow, StimulusRow, VerdictRow
from madbench_common.models.reference.deaf_voices import AGE_TRANSFORMS, BASE_VOICES

__all__ = ["ModelInfo", "ReportInputs", "absent_note", "render_html", "render_markdown",
           "report_files"]


@dataclass(frozen=True)
class ModelInfo:
    """One answer stage: its model slug and version, and how it should be labelled."""

    stage: str
    slug: str
    version: str
    paper_model: str = ""
    note: str = ""
    absent: bool = False
    """No answers: the stage failed or did not run (its slug is the stage's default)."""
    answers: int = 0
    empty: int = 0
    """Answers with no text (a refusal to answer, a blocked prompt, a cap used up)."""
    failed: int = 0
    """Answers quarantined (API error, inference failure)."""


@dataclass
class ReportInputs:
    metrics: list[MetricRow]
    models: list[ModelInfo]
    stimuli: list[StimulusRow]
    envlib: list[EnvRow]
    verdicts: list[VerdictRow] = field(default_factory=list)


def _pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else \
        f"{100 * x:.{digits}f}"


def _md(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _index(metrics: list[MetricRow]) -> dict[tuple[str, str, str, str, str], MetricRow]:
    return {(m.model, m.conflict, m.level, m.group, m.metric): m for m in metrics}


def _level_table(inp: ReportInputs, metric: str) -> tuple[list[str], list[list[str]]]:
    idx = _index(inp.metrics)
    headers = ["model", *(f"{c.upper()} {lv}" for c in CONFLICTS for lv in LEVELS)]
    rows = []
    for m in inp.models:
        rows.append([m.stage, *(_pct(getattr(idx.get((m.stage, c, lv, "all", metric)),
                                              "value", None)) for c in CONFLICTS for lv in LEVELS)])
    return headers, rows


def _edi_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    idx = _index(inp.metrics)
    rows = [[m.stage, *(_pct(getattr(idx.get((m.stage, "bsc", lv, "all", "edi")), "value", None))
                        for lv in LEVELS)] for m in inp.models]
    return ["model", "L1", "L2", "L3"], rows


def _extension_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    idx = _index(inp.metrics)
    lv, rows = EXTENSION_LEVEL, []
    for m in inp.models:
        cells = [_pct(getattr(idx.get((m.stage, "bsc", lv, g, metric)), "value", None))
                 for metric in ("ars", "acc", "ass") for g in ("all", "within", "cross")]
        edi = _pct(getattr(idx.get((m.stage, "bsc", lv, "all", "edi")), "value", None))
        rows.append([m.stage, *cells, edi])
    return ["model", *(f"{metric} {g}" for metric in ("ARS", "Acc", "ASS")
                       for g in ("all", "Within", "Cross")), "EDI"], rows


def _not_built_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    seen: dict[tuple[str, str, str], int] = {}
    for r in inp.metrics:
        if r.metric == "not_built" and r.value is not None:
            seen[(r.conflict.upper(), r.level, r.group)] = int(r.value)
    return ["type", "level", "reason", "trials"], [[*k, str(n)] for k, n in sorted(seen.items())]


def _stars(p: float | None) -> str:
    if p is None or math.isnan(p):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else ""


def _delta_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    idx = _index(inp.metrics)
    rows = []
    for m in inp.models:
        cells = []
        for c in CONFLICTS:
            r = idx.get((m.stage, c, "L1+L3", "explicit-implicit", "delta_ars"))
            if r is None or r.value is None or math.isnan(r.value):
                cells.append("–")
                continue
            cells.append(f"{_pct(r.value)}{_stars(r.p_value)} [{_pct(r.lo)}, {_pct(r.hi)}] "
                         f"p={r.p_value:.3g}")
        rows.append([m.stage, *cells])
    return ["model", "ESC", "BSC", "SIC"], rows


_GROUPS = {"esc": ("explicit", "implicit", "neutral"), "bsc": ("within", "cross", "explicit",
                                                             "implicit", "neutral"),
           "sic": ("gender", "age", "combined", "explicit", "implicit", "neutral")}


def _breakdown_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    idx = _index(inp.metrics)
    rows = []
    for m in inp.models:
        for c in CONFLICTS:
            for g in ("all", *_GROUPS[c]):
                cells = [_pct(getattr(idx.get((m.stage, c, lv, g, "acc")), "value", None))
                         for lv in LEVELS]
                if set(cells) == {"–"}:
                    continue
                q2 = idx.get((m.stage, c, "L1", "all", "q2_acc")) if g == "all" else None
                rows.append([m.stage, c.upper(), g, *cells, _pct(getattr(q2, "value", None))
                             if q2 else ""])
    return ["model", "type", "group", "L1", "L2", "L3", "Q2 (semantic)"], rows


def _snr_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    idx = _index(inp.metrics)
    snrs = sorted({m.group for m in inp.metrics if m.group.startswith("snr")},
                  key=lambda g: int(g[3:]))
    rows = [[m.stage, lv, *(_pct(getattr(idx.get((m.stage, "bsc", lv, g, "acc")), "value",
                                         None)) for g in snrs)]
            for m in inp.models for lv in LEVELS]
    return ["model", "level", *(f"{g[3:]} dB" for g in snrs)], rows


def _counts_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    counts: Counter[tuple[str, str, str, str]] = Counter()
    for s in inp.stimuli:
        kind = s.pairing or ("matched" if s.matched else "mismatched")
        if s.conflict != "bsc" and s.semantic == "neutral" and not s.matched:
            kind = "neutral text"
        counts[(s.conflict, s.condition or "–", kind, "ok" if s.ok else s.reason)] += 1
    rows = [[c.upper(), cond, kind, status, str(n)]
            for (c, cond, kind, status), n in sorted(counts.items())]
    return ["type", "condition", "clips", "status", "n"], rows


def _env_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    rows = [[e.code, e.category, e.name,
             e.source if e.source == "demand" else f"{e.source} (stand-in)",
             e.quality if e.ok else "missing",
             e.licence, e.attribution[:80]] for e in sorted(inp.envlib, key=lambda e: e.code)]
    return ["code", "category", "environment", "library", "quality", "licence", "credit"], rows


def _voice_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    models = sorted({(s.model_slug, s.model_version) for s in inp.stimuli
                     if s.conflict == "sic" and s.ok})
    rows = []
    for slug, version in models or [("", "")]:
        for profile, t in AGE_TRANSFORMS.items():
            if profile == "narrator":
                continue
            how = (f"flite {BASE_VOICES[profile]}; F0 ×{t.f0_scale}, formants ×{t.formant_alpha}"
                   f", rate ×{t.rate}, tremor {t.tremor}, jitter {t.jitter}, breath {t.breath}"
                   if slug.startswith("ref-") else "voice id from sic_tts model_args.voices")
            rows.append([profile, slug or "–", version or "–", how])
    return ["profile", "model", "version", "voice"], rows


def _judge_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    by: dict[str, Counter[str]] = {}
    names: dict[str, set[str]] = {}
    for v in inp.verdicts:
        by.setdefault(v.model, Counter())[v.judge.split(":")[0]] += 1
        if v.judge.startswith("llm:"):
            names.setdefault(v.model, set()).add(v.judge[4:])
    rows = []
    for m in inp.models:
        c = by.get(m.stage, Counter())
        total = max(sum(c.values()), 1)
        rows.append([m.stage, ", ".join(sorted(names.get(m.stage, ()))) or "–",
                     *(f"{100 * c[k] / total:.1f}" for k in ("llm", "rule", "none", "missing")),
                     str(sum(c.values()))])
    return ["model", "LLM judge", "LLM %", "offline keyword rules %",
            "offline: undecided→O %", "missing %", "verdicts"], rows


def _answers_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    rows = [[m.stage, str(m.answers), str(m.empty),
             f"{100 * m.empty / m.answers:.1f}" if m.answers else "–", str(m.failed)]
            for m in inp.models]
    return ["model", "answers", "empty replies", "empty %", "failed"], rows


def _model_table(inp: ReportInputs) -> tuple[list[str], list[list[str]]]:
    return (["stage", "model slug", "version", "paper model", "note"],
            [[m.stage, m.slug, m.version, m.paper_model, m.note] for m in inp.models])


SECTIONS: list[tuple[str, Callable[[ReportInputs], tuple[list[str], list[list[str]]]]]] = [
    ("Table 3: Acoustic Robustness Score (ARS, %)", lambda i: _level_table(i, "ars")),
    ("Table 4: Environment Discrimination Index (EDI, %) for BSC. L2: Appendix A.3's "
     "claims are all cross-category (traffic → beach, nature → city, office → forest), so "
     "there is no Within trial and no L2 EDI; this project's L2x table gives one", _edi_table),
    ("Table 5: Δ ARS (%, Explicit − Implicit), L1 and L3 pooled, 95% bootstrap CI",
     _delta_table),
    ("Table 7: Acoustic Sensitivity Score (ASS, %)", lambda i: _level_table(i, "ass")),
    ("Table 9: Acoustic perception accuracy (Acc, %) per level, by condition",
     _breakdown_table),
    ("Trap rate (% of test answers following the text)", lambda i: _level_table(i, "trap")),
    ("BSC accuracy (%) per SNR", _snr_table),
    ("Extension, not in the paper: L2x, Level 2 BSC with this project's Within claims (and "
     "Cross claims over the categories A.3 names none for), each with its same-sentence "
     "control", _extension_table),
    ("Trials not built: no same-sentence control clip (eq. 2), so neither Acc nor ASS "
     "counts them", _not_built_table),
    ("Models", _model_table),
    ("Answers (empty replies are judged Other)", _answers_table),
    ("Judges (share of verdicts decided by each; the paper's is the LLM judge)",
     _judge_table),
    ("Table 1: clips per condition in this run", _counts_table),
    ("Table 6: BSC backgrounds", _env_table),
    ("Table 8: SIC voice profiles", _voice_table),
]


def _stimulus_note(inp: ReportInputs) -> str:
    refs = Counter((s.conflict, s.reference) for s in inp.stimuli if s.ok)
    parts = []
    for c in CONFLICTS:
        ref, real = refs[(c, True)], refs[(c, False)]
        parts.append(f"{c.upper()}: {real} paper-material clips, {ref} offline-reference "
                     "(stand-in) clips")
    return ("Stimuli — " + "; ".join(parts) + ". Offline references (committed sentences "
            "written for this project, WORLD prosody, flite voices with an age transform, the "
            "Debian background library) are stand-ins, not the paper's stimuli: the cluster "
            "profile reads DEMAND and EMIS from the data volume (workflows/data.yaml).")


def radar_series(inp: ReportInputs) -> tuple[list[str], dict[str, list[float]]]:
    idx = _index(inp.metrics)
    axes = [f"{c.upper()}-{lv}" for c in CONFLICTS for lv in LEVELS]
    series = {m.stage: [float(getattr(idx.get((m.stage, c, lv, "all", "acc")), "value", 0.0)
                              or 0.0) for c in CONFLICTS for lv in LEVELS]
              for m in inp.models if not m.absent}
    return axes, series


def absent_note(inp: ReportInputs) -> str:
    """The models without answers, named (``""`` when every model answered)."""
    gone = [f"{m.stage} ({m.paper_model or m.slug})" for m in inp.models if m.absent]
    return ("Absent models — no answers, so no verdicts or metrics (the answer stage failed "
            "or did not run; see the run summary): " + ", ".join(gone) + ".") if gone else ""


def render_markdown(inp: ReportInputs) -> str:
    """Tables (numbers in %, means over repeats): 1, clips per condition (what this run
    made); 3, ARS per model, conflict type and level; 4, EDI (BSC); 5, Δ ARS explicit −
    implicit with 95 % bootstrap intervals and p-values (``**`` p < 0.01, ``***`` p <
    0.001); 6, the BSC backgrounds and where they came from; 7, ASS; 8, the SIC voice
    profiles; 9, acoustic perception accuracy per level with per-condition rows and the Q2
    semantic check. Then the answers per model (empty replies counted: an empty reply is
    judged Other, so a model whose thinking used up its token cap would look like a
    refuser), and the judges' shares (the LLM judge is the paper's, §2.4; the keyword
    rules are an offline option and labelled so)."""
    out = ["# DEAF report", "", _stimulus_note(inp), ""]
    if absent_note(inp):
        out += [absent_note(inp), ""]
    for title, fn in SECTIONS:
        headers, rows = fn(inp)
        out += [f"## {title}", "", _md(headers, rows), ""]
    out += ["## Figure 5: radar of Acc per conflict type × level", "", "![radar](radar.png)", ""]
    return "\n".join(out)


def render_html(inp: ReportInputs) -> str:
    body = [f"<h1>DEAF report</h1><p>{html.escape(_stimulus_note(inp))}</p>"]
    if absent_note(inp):
        body.append(f"<p><strong>{html.escape(absent_note(inp))}</strong></p>")
    axes, series = radar_series(inp)
    for title, fn in SECTIONS:
        headers, rows = fn(inp)
        head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
        trs = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>"
                      for r in rows)
        body.append(f"<h2>{html.escape(title)}</h2><table><tr>{head}</tr>{trs}</table>")
    body.append("<h2>Figure 5: radar of Acc per conflict type × level</h2>"
                + radar_svg(axes, series, "Acoustic perception accuracy (Acc)"))
    style = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>DEAF report</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>")


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def report_files(inp: ReportInputs) -> dict[str, bytes]:
    """``report.md``, ``report.json``, ``report.html``, ``radar.png`` and ``radar.svg``."""
    axes, series = radar_series(inp)
    keep = ("model", "conflict", "level", "group", "metric", "value", "lo", "hi", "p_value",
            "n", "repeats")
    data = {"models": [asdict(m) for m in inp.models],
            "metrics": [{k: _finite(v) for k, v in asdict(m).items() if k in keep}
                        for m in inp.metrics]}
    return {
        "report.md": render_markdown(inp).encode(),
        "report.json": json.dumps(data, indent=1, default=str).encode(),
        "report.html": render_html(inp).encode(),
        "radar.png": radar_png(axes, series, "Acoustic perception accuracy (Acc)"),
        "radar.svg": radar_svg(axes, series, "Acoustic perception accuracy (Acc)").encode(),
    }
