"""The paper's Tables 2–5 built from the result records of several models (paper §5).

Rows are models, grouped as each paper table groups them (:data:`PAPER_GROUPS`), named by
the paper's model name; models of other groups get the same layouts in "beyond the paper"
tables (:func:`beyond_paper_tables`); CPU reference implementations are marked † and
named by their slug. Every cell carries its clip-paired 95% bootstrap interval. Tables
2–4 use a model's A-V input where it has one, else its audio input. A cell with no result
is ``—`` and a note says why; it is never filled from another task. Scores from a model's
own outputs print the share of excluded test rows beside the value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from madbench_common.benchmarks.madbench.eval.suite import EvalResult
from madbench_common.benchmarks.madbench.eval.tasks import (
    CORE_PROTOCOLS,
    SC_CONDITIONS,
    SC_PROTOCOL,
)
from madbench_common.models.registry import GROUPS

__all__ = ["GROUP_TITLES", "LEGEND", "PAPER_GROUPS", "Cell", "Table", "ap_table",
           "beyond_paper_tables", "col", "cross_table", "fmt", "head_check", "long_table",
           "paper_tables", "parse_table", "protocols", "summary_table"]

Record = dict[str, Any]
GROUP_TITLES = {
    "av_detector": "Pretrained A-V detectors",
    "av_encoder": "Frozen A-V encoders",
    "audio_encoder": "Frozen audio encoders",
    "audio_detector": "Pretrained audio detectors",
    "omni": "Omni models (zero-shot)",
    "": "Other models",
}
_PROTOCOL_TITLES = {"balanced": "Balanced", "scene_matched": "Matched",
                    "scene_mismatched": "Mismatched"}
_MODE = {"AV": "A-V", "A": "A", "V": "V"}
_HEAD = {"binary": "H_bin", "fourway": "H_4way", "speech": "H_S", "env": "H_E",
         "scene": "H_SC^FM"}
_PROMPT = {"binary": "P_bin", "fourway": "P_4way", "speech": "P_comp", "env": "P_comp",
           "scene": "P_SC"}
DASH = "—"
LEGEND = {
    "†": ("ref", "CPU reference implementation, not the paper's model: a stand-in that runs "
          "on a laptop (the summary's “Stands in for” column names the paper's model)."),
    "‡": ("extra", "Optional extra model, not evaluated in the paper."),
    "ⁿ": ("native", "The model's own scores (direct transfer, zero-shot answers)."),
    "ʰ": ("head", "A logistic-regression head on the model's frozen features (§4.2)."),
}
"""The report's marks: mark → (anchor, meaning). Explained once per report, where first
used; a table records the marks it uses (:meth:`Table.mark`), never their meaning."""
_HIGHER = {"auc", "ap", "acc", "macro_f1", "auc_P", "auc_Sh", "auc_seen", "auc_held_out",
           "ap_P", "ap_seen", "ap_held_out"}
_LOWER = {"eer"}


class Cell(str):
    """A table cell: its full text (every number: what Markdown and JSON show) and, for
    HTML, the one number shown (``primary``), the value sorting and the best mark read
    (``value``, higher or lower better by ``metric``), the hover text (``hint``: the
    interval and secondary metrics) and, for ``—``, why it is empty (``reason``)."""

    primary: str
    value: float | None
    metric: str
    hint: str
    reason: str

    def __new__(cls, text: str, primary: str | None = None, value: float | None = None,
                metric: str = "", hint: str = "", reason: str = "") -> Cell:
        obj = super().__new__(cls, text)
        obj.primary = text if primary is None else primary
        obj.value = value
        obj.metric = metric
        obj.hint = hint
        obj.reason = reason
        return obj

    @property
    def better(self) -> int:
        """+1 higher is better, −1 lower is better, 0 neither (a gap, a count)."""
        return 1 if self.metric in _HIGHER else -1 if self.metric in _LOWER else 0

    def suffixed(self, mark: str) -> Cell:
        """The same cell with ``mark`` after its text (e.g. ``ⁿ``)."""
        return Cell(f"{self} {mark}", f"{self.primary} {mark}", self.value, self.metric,
                    self.hint, self.reason)


@dataclass
class Table:
    """A rendered-agnostic table: header, rows in titled groups, notes, the marks used."""

    key: str
    title: str
    headers: list[str]
    sections: list[tuple[str, list[list[str]]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)
    """Marks of :data:`LEGEND` the table uses, in order of first use."""
    shown: str = ""
    """Which of several numbers per cell the HTML shows (the others are in the hover)."""
    dashes: dict[str, list[str]] = field(default_factory=dict)
    """Why cells are ``—``: reason → the models (or rows) it applies to."""

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def mark(self, mark: str) -> None:
        if mark not in self.marks:
            self.marks.append(mark)

    def dash(self, who: str, reason: str) -> Cell:
        """An empty cell, recording why for the table's notes (``who``: the model's name)."""
        names = self.dashes.setdefault(reason, [])
        if who not in names:
            names.append(who)
        return Cell(DASH, reason=reason)

    def all_notes(self) -> list[str]:
        """The notes a reader sees: one per reason for ``—`` (naming its models), then the
        table's own notes."""
        return [f"{DASH} {reason[:1].upper()}{reason[1:]}: {', '.join(who)}."
                for reason, who in self.dashes.items()] + self.notes


def fmt(x: Any, digits: int = 3) -> str:
    """A number with ``digits`` decimals; ``—`` for missing values."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return DASH
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


_METRIC_NAMES = {"auc": "AUC", "eer": "EER", "ap": "AP", "acc": "Acc.", "macro_f1": "Macro-F1",
                 "delta_E_S": "Δ_E−S", "delta_pair": "Δ_pair", "auc_P": "AUC_P",
                 "auc_Sh": "AUC_Sh", "auc_drop": "ΔAUC", "G_S": "G_S", "G_E": "G_E",
                 "ap_P": "AP_P"}


def _ci(r: Record | None, name: str) -> Cell:
    """``value [lo, hi]`` (and the excluded share of a model's own scores) as a cell whose
    primary is the value alone; ``—`` when the record or the value is absent."""
    if not r or r.get(name) is None or (isinstance(r[name], float) and math.isnan(r[name])):
        return Cell(DASH, metric=name)
    lo, hi = r.get(f"{name}_lo"), r.get(f"{name}_hi")
    text = fmt(r[name])
    primary = text
    if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)):
        text += f" [{fmt(lo)}, {fmt(hi)}]"
    rate = r.get("excluded_rate")
    if r.get("source") == "native" and rate and not math.isnan(rate):
        text += f" (excl. {100 * rate:.1f}%)"
    return Cell(text, primary, float(r[name]), name, f"{_METRIC_NAMES.get(name, name)} {text}")


def _or_dash(t: Table, r: EvalResult, cell: Cell, reason: str) -> Cell:
    """``cell``, or when it is ``—`` the same with ``reason`` (and the table's note)."""
    return t.dash(r.model.name, reason) if cell == DASH else cell


PAPER_GROUPS: dict[str, tuple[str, ...]] = {
    "table2": ("av_detector", "av_encoder", "omni", ""),
    "table3": ("av_detector", "av_encoder", "omni", ""),
    "table4": ("av_detector", "av_encoder", "omni", ""),
    "table5": ("audio_encoder", "audio_detector", "av_encoder", "omni", ""),
}
"""The model groups each paper table lists, in its order: Tables 2–4 (§5.1–5.3) list the
pretrained A-V detectors, the frozen A-V encoders and the omni models; Table 5 (§5.4) the
frozen audio encoders, the pretrained audio detectors, the frozen A-V encoders and the
omni models. A model of no group (your own, through ``madbench eval``) closes each table
as "Other models"; the project's other groups go into a "beyond the paper" table of the
same layout."""


def _by_group(results: list[EvalResult], groups: tuple[str, ...] = (*GROUPS, "")
              ) -> list[tuple[str, list[EvalResult]]]:
    out = []
    for group in groups:
        members = [r for r in results if (r.model.group if r.model.group in GROUPS else "")
                   == group]
        if members:
            out.append((GROUP_TITLES[group], members))
    return out


def _label(r: EvalResult, t: Table) -> str:
    m = r.model
    if m.reference:
        t.mark("†")
        return f"{m.name} †"
    if not m.in_paper:
        t.mark("‡")
        return f"{m.name} ‡"
    return m.name


def stands_in_for(r: EvalResult) -> str:
    """What a model is: the paper's model it stands in for (a CPU reference), or its kind."""
    m = r.model
    if m.reference:
        return m.stands_in_for or "(CPU reference)"
    return "(the paper's model)" if m.in_paper else "(extra model, not in the paper)"


def _via(r: EvalResult, task: str) -> str:
    if not r.has_task(task):
        return DASH
    if r.source_for(task) == "head":
        return _HEAD[task]
    zero_shot = r.model.group == "omni" or bool(r.tables.get("parse"))
    return f"{_PROMPT[task]} (zero-shot)" if zero_shot else "native (direct)"


def _primary_mode(r: EvalResult) -> str:
    modes = r.modes()
    return modes[0] if modes else "A"


def _task_rec(r: EvalResult, task: str, mode: str, protocol: str) -> Record | None:
    src = r.source_for(task)
    return next((x for x in r.tables.get("tasks", []) if x["source"] == src
                 and x["task"] == task and x["mode"] == mode and x["protocol"] == protocol
                 and x["pairing"] == "paired"), None)


def _mean_rec(r: EvalResult, task: str, metric: str, mode: str,
              source: str | None = None) -> Record | None:
    src = source or r.source_for(task)
    rec = next((x for x in r.tables.get("means", []) if x["source"] == src and x["task"] == task
                and x["metric"] == metric and x["mode"] == mode), None)
    if rec is None:
        return None
    return {"source": src, metric: rec["value"], f"{metric}_lo": rec["value_lo"],
            f"{metric}_hi": rec["value_hi"], "excluded_rate": rec["excluded_rate"],
            "protocols": rec["protocols"]}


def protocols(results: list[EvalResult]) -> list[str]:
    """Core protocols present in any result, in the paper's order (others after)."""
    found = {x["protocol"] for r in results for x in r.tables.get("tasks", [])
             if x.get("task") != "scene"}
    return [p for p in CORE_PROTOCOLS if p in found] + sorted(found - set(CORE_PROTOCOLS))


def _why(r: EvalResult, task: str, mode: str, protocol: str = "") -> str:
    """Why ``r`` has no ``task`` value in ``mode`` (on ``protocol``): the actual cause."""
    name = {"binary": "binary", "fourway": "four-way", "speech": "speech (H_S)",
            "env": "environment (H_E)", "scene": "scene-consistency"}.get(task, task)
    if not r.has_task(task):
        if r.model.group == "omni" or r.tables.get("parse"):
            return (f"no {name} answers from this model in the run (never filled from "
                    "another task)")
        return (f"no {name} scores for this model (no head or native scores of this task; "
                "never filled from another task)")
    if mode not in r.modes():
        takes = ", ".join(_MODE.get(m, m) for m in r.modes())
        return f"no {_MODE.get(mode, mode)} input (the model takes {takes} only)"
    if protocol:
        where = {**_PROTOCOL_TITLES, SC_PROTOCOL: "scene-consistency"}.get(protocol, protocol)
        return (f"no {where} test rows with both classes "
                f"for the {name} task")
    return f"the {name} metric is undefined on its test rows (one class, or all excluded)"


def _pair(*cells: Cell, primary: int = 0) -> Cell:
    """Several metrics of one cell: ``cells[primary]`` is shown, all are in the hover."""
    if all(c == DASH for c in cells):
        return cells[primary]
    first = cells[primary]
    return Cell(" / ".join(cells), first.primary, first.value, first.metric,
                " · ".join(c.hint or f"{_METRIC_NAMES.get(c.metric, c.metric)} {DASH}"
                           for c in cells))


def _table2_part(results: list[EvalResult], key: str, title: str, task: str,
                 metrics: tuple[str, ...], primary: int = 0,
                 groups: tuple[str, ...] = PAPER_GROUPS["table2"]) -> Table:
    protos = protocols(results)
    t = Table(key, title, ["Model", "Input", "via", *[_PROTOCOL_TITLES.get(p, p) for p in protos],
                           "Mean"])
    for group_title, members in _by_group(results, groups):
        rows = []
        for r in members:
            mode = _primary_mode(r)
            cells = [_or_dash(t, r, _pair(*(_ci(rec, m) for m in metrics), primary=primary),
                              _why(r, task, mode, p))
                     for rec, p in ((_task_rec(r, task, mode, p), p) for p in protos)]
            means = [_mean_rec(r, task, m, mode) for m in metrics]
            cells.append(_or_dash(t, r, _pair(*(_ci(rec, m) for rec, m in zip(means, metrics)),
                                              primary=primary), _why(r, task, mode)))
            m0 = means[0]
            if m0 and len(m0["protocols"]) < len(protos):
                t.note(f"Mean of {r.model.name} averages the protocols it has: "
                       + ", ".join(m0["protocols"]))
            rows.append([_label(r, t), _MODE.get(mode, mode), _via(r, task), *cells])
        t.sections.append((group_title, rows))
    return t


def table2(results: list[EvalResult], groups: tuple[str, ...] = PAPER_GROUPS["table2"]
           ) -> list[Table]:
    """Table 2 (a) binary AUC / EER and (b) four-way Acc / macro-F1, per protocol and Mean.

    §5.1; Mean is the average over protocols. (a) also gives average precision (AP),
    which the paper does not report."""
    a = _table2_part(results, "table2a",
                     "(a) Binary any-fake detection (AUC ↑ / EER ↓ / AP ↑)",
                     "binary", ("auc", "eer", "ap"), groups=groups)
    a.shown = "Cells show AUC ↑; hover (or report.md) for EER ↓, AP ↑ and 95 % intervals."
    a.note("AP: average precision with fake as the positive class (not reported in the "
           "paper; it depends on the fake share of the test split).")
    b = _table2_part(results, "table2b",
                     "(b) Four-way manipulation classification (Acc. ↑ / Macro-F1 ↑)",
                     "fourway", ("acc", "macro_f1"), primary=1, groups=groups)
    b.shown = "Cells show Macro-F1 ↑; hover (or report.md) for Acc. ↑ and 95 % intervals."
    return [a, b]


def _component(r: EvalResult, mode: str, protocol: str) -> Record | None:
    src = r.source_for("speech")
    return next((x for x in r.tables.get("components", []) if x["source"] == src
                 and x["mode"] == mode and x["protocol"] == protocol), None)


def table3(results: list[EvalResult], groups: tuple[str, ...] = PAPER_GROUPS["table3"]
           ) -> Table:
    """Table 3: component AUC per protocol and Mean; Δ_E−S; G_S (S row) and G_E (E row).

    §5.2: per model an S row (the speech task's AUC, H_S) and an E row (the environment
    task's AUC, H_E); Δ_E−S on the S row."""
    protos = protocols(results)
    short = {"balanced": "Bal.", "scene_matched": "Mat.", "scene_mismatched": "Mis."}
    t = Table("table3", "Component-level detection: speech (S) and environment (E) AUC",
              ["Model", "Comp.", "Input", "via", *[short.get(p, p) for p in protos], "Mean",
               "Δ_E−S", "G_S / G_E"])
    for group_title, members in _by_group(results, groups):
        rows = []
        for r in members:
            mode = _primary_mode(r)
            mean = _component(r, mode, "mean")
            for comp, task, gap in (("S", "speech", "G_S"), ("E", "env", "G_E")):
                cells = [_or_dash(t, r, _ci(_task_rec(r, task, mode, p), "auc"),
                                  _why(r, task, mode, p)) for p in protos]
                cells.append(_or_dash(t, r, _ci(_mean_rec(r, task, "auc", mode), "auc"),
                                      _why(r, task, mode)))
                delta = _or_dash(t, r, _ci(mean, "delta_E_S"), _why_gap(r, mode, "Δ_E−S")) \
                    if comp == "S" else ""
                rows.append([_label(r, t) if comp == "S" else "", comp, _MODE.get(mode, mode),
                             _via(r, task), *cells, delta,
                             _or_dash(t, r, _ci(mean, gap), _why_gap(r, mode, gap))])
        t.sections.append((group_title, rows))
    t.note("Δ_E−S = mean AUC_E − mean AUC_S over the protocols (§5.2); G_S = AUC(S vs R) − "
           "AUC(Q vs E) with the speech scores, G_E = AUC(E vs R) − AUC(Q vs S) with the "
           "environment scores, averaged over the protocols.")
    return t


def _why_gap(r: EvalResult, mode: str, what: str) -> str:
    """Why a Table 3 gap (Δ_E−S, G_S, G_E) is absent for ``r``."""
    if not (r.has_task("speech") and r.has_task("env")):
        return f"no {what}: it needs both the speech (H_S) and the environment (H_E) scores"
    return (f"no {what}: no protocol has test rows of every variant it compares (R, S, E, Q) "
            f"in the {_MODE.get(mode, mode)} input")


def _pair_rec(r: EvalResult, mode: str, cond: str) -> Record | None:
    src = r.source_for("scene")
    return next((x for x in r.tables.get("pairing", []) if x["source"] == src
                 and x["mode"] == mode and x["condition"] == cond), None)


def table4(results: list[EvalResult], groups: tuple[str, ...] = PAPER_GROUPS["table4"]
           ) -> Table:
    """Table 4: scene consistency AUC with paired (P) and shuffled (Sh) video, Δ_pair.

    §5.3: D-R, S-R and D-S, models with an A-V input. The notes also give the share of
    inconsistent D-R / S-R test samples whose donor ê was shorter than the clip and looped
    (:func:`_loop_share`): a repeat is an audio-only cue the shuffled-video control cannot
    remove."""
    heads = [f"{c} {m}" for c in SC_CONDITIONS for m in ("P", "Sh", "Δ_pair")]
    t = Table("table4", "Audio-visual scene consistency (AUC) with paired (P) and shuffled (Sh) "
              "video; Δ_pair = AUC_P − AUC_Sh", ["Model", "Input", "via", *heads])
    for group_title, members in _by_group(results, groups):
        rows = []
        for r in (r for r in members if "AV" in r.modes()):
            cells = []
            for cond in SC_CONDITIONS:
                rec = _pair_rec(r, "AV", cond)
                if rec is None:
                    cells += [t.dash(r.model.name, _why_scene(r, cond))] * 3
                    continue
                why_sh = _why_shuffled(r, rec)
                cells += [_ci(rec, "auc_P"), _or_dash(t, r, _ci(rec, "auc_Sh"), why_sh),
                          _or_dash(t, r, _ci(rec, "delta_pair"), why_sh)]
            rows.append([_label(r, t), "A-V", _via(r, "scene"), *cells])
        if rows:
            t.sections.append((group_title, rows))
    if not t.sections:
        t.note("No model has scene-consistency results with an A-V input (no "
               "scene_consistency samples in the run, or no A-V features or P_SC answers).")
    t.note("One pooled head H_SC^FM per model, trained on paired D-R ∪ S-R ∪ D-S training "
           "samples; Sh scores the same head on the test rows with another test clip's video.")
    looped = _loop_share(results)
    if looped:
        t.note("Donor ê shorter than the clip and looped (inconsistent test samples): "
               + "; ".join(f"{c} {k} / {n}" for c, (k, n) in looped.items())
               + " (a repeat is an audio-only cue; long-enough donors are preferred).")
    return t


def _why_scene(r: EvalResult, cond: str) -> str:
    """Why ``r`` has no scene-consistency record of condition ``cond``."""
    if not r.has_task("scene"):
        return _why(r, "scene", "AV")
    return (f"no {cond} test rows with both classes (consistent and inconsistent) in the "
            "scene-consistency test split")


def _why_shuffled(r: EvalResult, rec: Record) -> str:
    """Why a Table 4 record has AUC_P but no AUC_Sh (and so no Δ_pair)."""
    shuffled = any(x["pairing"] == "shuffled" and x["task"] == "scene"
                   for x in r.tables.get("tasks", []) if x["source"] == rec["source"])
    if not shuffled:
        clips = rec.get("n_clips")
        if isinstance(clips, int) and clips < 2:
            return ("no AUC_Sh or Δ_pair: Sh shows each scene-consistency test clip the video "
                    f"of another test clip, and this run's test split has {clips} such clip")
        return ("no AUC_Sh or Δ_pair: the run scored no shuffled-video (Sh) samples for this "
                "model (its features or answers have no shuffled pairing)")
    return (f"no AUC_Sh or Δ_pair for {rec['condition']}: no test row has a usable score with "
            "both paired and shuffled video")


def _loop_share(results: list[EvalResult]) -> dict[str, tuple[int, int]]:
    """Condition → (looped, all) inconsistent D-R / S-R test samples (``env_fit``)."""
    for r in results:
        for g in r.groups:
            df = g.test
            if g.protocol != SC_PROTOCOL or g.pairing != "paired" or "env_fit" not in df:
                continue
            out = {}
            for cond in ("D-R", "S-R"):
                rows = df[(df["sc_condition"] == cond) & ~df["scene_consistent"].astype(bool)]
                if len(rows):
                    out[cond] = (int((rows["env_fit"] == "loop").sum()), len(rows))
            return out
    return {}


_T5 = (("binary", "auc"), ("fourway", "macro_f1"), ("speech", "auc"), ("env", "auc"))


def table5(results: list[EvalResult], groups: tuple[str, ...] = PAPER_GROUPS["table5"]
           ) -> Table:
    """Table 5: A vs A-V, each metric averaged over the core protocols.

    §5.4: binary AUC, four-way macro-F1, speech AUC, environment AUC; a row pair for every
    model with an A-V input. A model with native scores (a detector's binary P(fake), an
    omni model's answers) has cells from them and cells from heads in one row, so every
    cell is marked: ``ⁿ`` the model's own scores, ``ʰ`` a logistic-regression head on its
    frozen features."""
    t = Table("table5", "Input-modality ablation (mean over protocols)",
              ["Model", "Input", "Binary AUC ↑", "4-way Macro-F1 ↑", "Speech AUC ↑",
               "Env. AUC ↑"])
    for group_title, members in _by_group(results, groups):
        rows = []
        for r in members:
            modes = ["A", "AV"] if "AV" in r.modes() else [_primary_mode(r)]
            for i, mode in enumerate(modes):
                cells = [_marked(t, r, task, _or_dash(
                    t, r, _ci(_mean_rec(r, task, metric, mode), metric), _why(r, task, mode)))
                         for task, metric in _T5]
                rows.append([_label(r, t) if i == 0 else "", _MODE.get(mode, mode), *cells])
        t.sections.append((group_title, rows))
    return t


def ap_table(results: list[EvalResult]) -> Table:
    """Average precision of every binary task: the protocol means and scene consistency (P).

    Not in the paper: binary, speech, environment (means over the protocols) and scene
    consistency with paired video."""
    t = Table("ap", "Average precision (AP ↑) of every binary task",
              ["Model", "Input", "Binary", "Speech", "Env.", *[f"{c} P" for c in SC_CONDITIONS]])
    for group_title, members in _by_group(results):
        rows = []
        for r in members:
            mode = _primary_mode(r)
            cells = [_or_dash(t, r, _ci(_mean_rec(r, task, "ap", mode), "ap"),
                              _why(r, task, mode)) for task in ("binary", "speech", "env")]
            cells += [_or_dash(t, r, _ci(_pair_rec(r, mode, cond), "ap_P"),
                               _why_scene(r, cond) if mode == "AV" else
                               "scene consistency needs an A-V input (the model is audio-only)")
                      for cond in SC_CONDITIONS]
            rows.append([_label(r, t), _MODE.get(mode, mode), *cells])
        t.sections.append((group_title, rows))
    t.note("Binary, Speech and Env.: mean over the core protocols of the AP of H_bin, H_S and "
           "H_E (or the model's own scores); scene consistency: H_SC^FM with paired video, "
           "scene-inconsistent as the positive class.")
    return t


def cross_table(results: list[EvalResult]) -> Table:
    """Cross-dataset directions: which tasks each direction supports, and sizes."""
    t = Table("cross", "Cross-dataset protocol: tasks each direction supports",
              ["Model", "Train on", "Test on", "Input", "Tasks evaluated", "Not evaluated",
               "N train / val / test"])
    for group_title, members in _by_group(results):
        rows = []
        for r in members:
            for x in r.tables.get("cross", []):
                missing = "; ".join(f"{k}: {v}" for k, v in x["unsupported"].items()) or DASH
                rows.append([_label(r, t), x["train"], x["test"], _MODE.get(x["mode"], x["mode"]),
                             ", ".join(x["tasks"]) or DASH, missing,
                             f"{x['n_train']} / {x['n_val']} / {x['n_test']}"])
                for n in x.get("notes", []):
                    t.note(n)
        if rows:
            t.sections.append((group_title, rows))
    t.note("Heads are fitted on the training corpus's train split, thresholds on its val "
           "split, and scored on the other corpus's test split; a task is evaluated only "
           "where both corpora define its labels. The column 'cross' of Tables 2–5 is this "
           "direction.")
    return t


def _marked(t: Table, r: EvalResult, task: str, cell: Cell) -> Cell:
    """``cell`` with its source mark (ⁿ native, ʰ head), ``—`` unmarked."""
    if cell == DASH:
        return cell
    mark = "ⁿ" if r.source_for(task) == "native" else "ʰ"
    t.mark(mark)
    return cell.suffixed(mark)


def head_check(results: list[EvalResult]) -> Table:
    """§5.1: native binary scores vs a binary head on the same model's frozen features.

    "We train a benchmark-specific binary classification head on their frozen features.
    Performance remains essentially unchanged, with only a 0.012 AUC gain for BA-TFD+".

    Mean binary AUC over the core protocols of each source (the same bootstrap means as
    Table 2) and the head's gain, for every model that has both.
    """
    t = Table("head_check", "§5.1 check: native binary scores vs a binary head H_bin on the "
              "frozen features (AUC, mean over protocols)",
              ["Model", "Input", "Native AUC", "H_bin AUC", "Gain (H_bin − native)"])
    for group_title, members in _by_group(results):
        rows = []
        for r in members:
            native = _source_mean(r, "native")
            head = _source_mean(r, "head")
            if native is None or head is None:
                continue
            gain = head[1]["auc"] - native[1]["auc"]
            rows.append([_label(r, t), _MODE.get(head[0], head[0]), _ci(native[1], "auc"),
                         _ci(head[1], "auc"), f"{gain:+.3f}"])
        if rows:
            t.sections.append((group_title, rows))
    if not t.sections:
        t.note("No model has both native binary scores and a binary head in this run.")
    t.note("The paper: the pretrained A-V detectors stay near chance either way (a 0.012 "
           "AUC gain for BA-TFD+ at most), so the frozen features, not the decision "
           "heads, lack the cues.")
    return t


def _source_mean(r: EvalResult, source: str) -> tuple[str, Record] | None:
    """(mode, mean binary AUC record) of ``source`` in the model's primary mode where it
    has one, else in any mode it has."""
    modes = [_primary_mode(r), *[m for m in ("AV", "A") if m != _primary_mode(r)]]
    for mode in modes:
        rec = _mean_rec(r, "binary", "auc", mode, source)
        if rec is not None and rec.get("auc") is not None:
            return mode, rec
    return None


def summary_table(results: list[EvalResult]) -> Table:
    """The report's headline table: one row per model, one number per cell.

    Binary AUC and four-way macro-F1 are Table 2's Means (over the core protocols),
    Δ_E−S = mean AUC_E − mean AUC_S (§5.2, Table 3) and Δ_pair = AUC_P − AUC_Sh per
    scene-consistency condition (§5.3, Table 4): the paper's own quantities, with their
    intervals in the hover text.
    """
    t = Table("summary", "Headline numbers (test split; binary AUC and macro-F1: mean over "
              "the protocols)",
              ["Model", "Stands in for", "Input", "Binary AUC ↑", "4-way Macro-F1 ↑", "Δ_E−S",
               *[f"Δ_pair {c}" for c in SC_CONDITIONS]])
    for group_title, members in _by_group(results):
        rows = []
        for r in members:
            mode = _primary_mode(r)
            cells = [_marked(t, r, task, _or_dash(
                t, r, _ci(_mean_rec(r, task, metric, mode), metric), _why(r, task, mode)))
                for task, metric in (("binary", "auc"), ("fourway", "macro_f1"))]
            cells.append(_or_dash(t, r, _ci(_component(r, mode, "mean"), "delta_E_S"),
                                  _why_gap(r, mode, "Δ_E−S")))
            for cond in SC_CONDITIONS:
                rec = _pair_rec(r, "AV", cond)
                if "AV" not in r.modes():
                    why = "no Δ_pair: it needs an A-V input (the model is audio-only)"
                elif rec is None:
                    why = _why_scene(r, cond)
                else:
                    why = _why_shuffled(r, rec)
                cells.append(_or_dash(t, r, _ci(rec, "delta_pair"), why))
            rows.append([_label(r, t), stands_in_for(r), _MODE.get(mode, mode), *cells])
        t.sections.append((group_title, rows))
    return t


def paper_tables(results: list[EvalResult]) -> list[Table]:
    """Tables 2(a), 2(b), 3, 4 and 5 with the paper's groups in its order, then the same
    layouts for the models those tables do not list, then the §5.1 head check."""
    return [*table2(results), table3(results), table4(results), table5(results),
            *beyond_paper_tables(results), head_check(results)]


def _beyond(table: str) -> tuple[str, ...]:
    return tuple(g for g in GROUPS if g not in PAPER_GROUPS[table])


def beyond_paper_tables(results: list[EvalResult]) -> list[Table]:
    """The paper tables' layouts for the groups each does not list (audio-only encoders and
    detectors in Tables 2–4, the A-V detectors in Table 5), keyed
    ``<key>_extra`` and titled as such; a layout with no such model is left out."""
    built = [*table2(results, _beyond("table2")), table3(results, _beyond("table3")),
             table4(results, _beyond("table4")), table5(results, _beyond("table5"))]
    out = []
    for t in built:
        if not t.sections:
            continue
        t.key = f"{t.key}_extra"
        t.title = f"{t.title} — models the paper's table does not list"
        out.append(t)
    return out


def _parse_cells(p: Record) -> list[str]:
    shares = " · ".join(f"{k} {100 * v:.1f}%" for k, v in p["shares"].items())
    prompts = ", ".join(h[:12] for h in p.get("prompt_hashes", [])) or DASH
    return [p["task"], _MODE.get(p["mode"], p["mode"]), p["pairing"], prompts, str(p["n"]),
            shares, f"{100 * p['excluded_rate']:.1f}%"]


def parse_table(results: list[EvalResult]) -> Table:
    """Answer parse rates of models with parsed answers (omni models), per task and input."""
    t = Table("parse", "Zero-shot answers: parse rates on the test split",
              ["Model", "Task", "Input", "Pairing", "Prompt", "N", "Parsed answers", "Excluded"])
    for group_title, members in _by_group(results):
        rows = [[_label(r, t), *_parse_cells(p)] for r in members
                for p in r.tables.get("parse", [])]
        if rows:
            t.sections.append((group_title, rows))
    t.note("Refusals and unparsed answers are scored from the model's score or "
           "probabilities where present, else excluded (never guessed).")
    return t


def long_table(results: list[EvalResult], key: str, title: str,
               cols: list[tuple[str, str, Callable[[Record], str]]]) -> Table:
    """One row per record of ``key`` in every result (per-generator, LOGO, …)."""
    t = Table(key, title, ["Model", *[c[1] for c in cols]])
    for group_title, members in _by_group(results):
        rows = [[_label(r, t), *[fn(x) for _, _, fn in cols]]
                for r in members for x in r.tables.get(key, [])]
        if rows:
            t.sections.append((group_title, rows))
    return t


def col(name: str, title: str = "", ci: bool = False) -> tuple[str, str, Callable[[Record], str]]:
    """A column of :func:`long_table`: a record field, with its interval if ``ci``."""
    return (name, title or name, (lambda r: _ci(r, name)) if ci else (lambda r: fmt(r.get(name))))
