"""The robustness tables: binary detection under each robustness condition.

Both read the ``robustness`` records
(:func:`~madbench_common.benchmarks.madbench.eval.analysis.robustness_records`) of the binary
task in a model's primary input mode (A-V where it has one, as Tables 2–4), from the source
the report uses for that task (native scores where the model has them, else the heads),
averaged over the core protocols: :func:`robustness_table` and :func:`robustness_pivot`.
"""

from __future__ import annotations

from typing import Any

from madbench_common.benchmarks.madbench.eval.suite import EvalResult
from madbench_common.benchmarks.madbench.eval.tables import (
    Cell,
    Table,
    _by_group,
    _ci,
    _label,
    _primary_mode,
    fmt,
)

__all__ = ["conditions_of", "robust_mean", "robustness_pivot", "robustness_table"]

Record = dict[str, Any]
_TITLE = "Robustness: binary detection under each condition (heads trained on clean data)"
_NOTE = ("Mean over the core protocols of the binary task's AUC, EER and AP on each "
         "condition's test rows (the same clips as clean), scored by the heads fitted on "
         "clean training data; ΔAUC = AUC_clean − AUC_condition (clip-paired 95% interval). "
         "Conditions: madbench_common/data/robustness.yaml (or the run's own list).")


def robust_mean(r: EvalResult, condition: str, task: str = "binary") -> Record | None:
    """The mean record of ``task`` under ``condition`` in the model's primary mode."""
    mode, src = _primary_mode(r), r.source_for(task)
    return next((x for x in r.tables.get("robustness", []) if x["protocol"] == "mean"
                 and (x["source"], x["mode"], x["task"], x["condition"])
                 == (src, mode, task, condition)), None)


def conditions_of(results: list[EvalResult]) -> list[str]:
    """Every condition with a record, ``clean`` first, then in the order first seen."""
    seen: dict[str, None] = {"clean": None}
    for r in results:
        for x in r.tables.get("robustness", []):
            seen.setdefault(str(x["condition"]), None)
    return list(seen) if len(seen) > 1 else []


def robustness_table(results: list[EvalResult]) -> Table:
    """Per model and condition: AUC, EER, AP and ΔAUC (mean over the core protocols).

    ``clean`` first; ΔAUC = AUC_clean − AUC_condition with its clip-paired 95% interval."""
    t = Table("robustness", _TITLE,
              ["Model", "Input", "Condition", "AUC ↑", "EER ↓", "AP ↑", "ΔAUC"])
    conds = conditions_of(results)
    for group_title, members in _by_group(results):
        rows = []
        for r in (r for r in members if r.tables.get("robustness")):
            for i, cond in enumerate(conds):
                rec = robust_mean(r, cond)
                if rec is None:
                    continue
                drop = "" if cond == "clean" else _ci(rec, "auc_drop")
                eer = rec.get("eer")
                rows.append([_label(r, t) if i == 0 else "", _mode(r) if i == 0 else "", cond,
                             _ci(rec, "auc"), Cell(fmt(eer), value=eer, metric="eer",
                                                   hint=f"EER {fmt(eer)}"),
                             _ci(rec, "ap"), drop])
        if rows:
            t.sections.append((group_title, rows))
    if not t.sections:
        t.note("No robustness records (the run has no perturb stage, or no test samples).")
    t.note(_NOTE)
    return t


def robustness_pivot(results: list[EvalResult]) -> Table:
    """Conditions down, models across: binary AUC (ΔAUC from clean), mean over protocols.

    The compact view ``make demo`` prints, each cell ``AUC (ΔAUC)``."""
    models = [r for _, members in _by_group(results) for r in members
              if r.tables.get("robustness")]
    t = Table("robustness_pivot", "Robustness: binary AUC by condition (ΔAUC from clean)",
              ["Condition", *[_label(r, Table("_", "", [])) for r in models]])
    rows = []
    for cond in conditions_of(results):
        cells = []
        for r in models:
            rec = robust_mean(r, cond)
            if rec is None:
                cells.append(t.dash(r.model.name, f"no scored test rows under {cond}"))
            elif cond == "clean":
                cells.append(Cell(fmt(rec.get("auc")), value=rec.get("auc"), metric="auc",
                                  hint=f"AUC {fmt(rec.get('auc'))} (clean)"))
            else:
                change = round(-float(rec["auc_drop"]), 3) + 0.0  # no "-0.000"
                text = f"{fmt(rec.get('auc'))} ({change:+.3f})"
                cells.append(Cell(text, value=rec.get("auc"), metric="auc",
                                  hint=f"AUC {fmt(rec.get('auc'))}; change from clean "
                                       f"{change:+.3f}"))
        rows.append([cond, *cells])
    if rows:
        t.sections.append(("", rows))
    for r in models:
        _label(r, t)
    t.note("Cell: AUC of the binary task, mean over the core protocols, in the model's "
           "primary input (A-V where it has one); in brackets the change from clean.")
    return t


def _mode(r: EvalResult) -> str:
    mode = _primary_mode(r)
    return {"AV": "A-V"}.get(mode, mode)
