"""Compare runs side by side from their ``report.json`` files (``madbench compare``).

A user who evaluates one new model ranks it against a published run without rerunning
anything: every model record of every report is read back as an
:class:`~madbench_common.benchmarks.madbench.eval.suite.EvalResult` (records only) and the
same renderer writes the same tables and figures. Each model's name gets its run's label
in brackets, so the same model from two runs sits in adjacent rows. A run is named by its
``report.json`` (local path, ``file://`` or ``s3://``), a folder holding one, or a run's
root (``<store>/<run_id>``: its ``evaluate`` stage's report).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madbench_common.benchmarks.madbench.eval.suite import EvalResult, ModelInfo
from madbench_common.core.errors import ConfigError
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.stage import read_marker

__all__ = ["CompareRun", "compare_runs", "facts_of", "load_report", "load_runs", "results_of"]


@dataclass(frozen=True)
class CompareRun:
    """One compared report: its label and its parsed JSON."""

    label: str
    report: dict[str, Any]
    where: str


def _read(uri: str) -> bytes:
    if uri.startswith("s3://"):
        parent, _, name = uri.rpartition("/")
        return open_store(parent).get_bytes(name)
    path = Path(uri.removeprefix("file://"))
    if not path.is_file():
        raise ConfigError(f"{uri}: no such report.json")
    return path.read_bytes()


def _report_uri(spec: str) -> str:
    """The report.json a spec names (a file, a folder with one, or a run root)."""
    if spec.endswith(".json"):
        return spec
    local = Path(spec.removeprefix("file://"))
    if not spec.startswith("s3://") and (local / "report.json").is_file():
        return str(local / "report.json")
    root, _, run_id = spec.rstrip("/").rpartition("/")
    if not run_id:
        raise ConfigError(f"{spec}: not a report.json, a folder with one, or <store>/<run_id>")
    run = RunStore(open_store(root or "."), run_id)
    marker = read_marker(run, "evaluate")  # one read: a marker gone since is "not done"
    if marker is None:
        raise ConfigError(f"{spec}: no report.json there and no finished evaluate stage "
                          f"({run.uri('evaluate/_SUCCESS')})")
    return run.uri(f"{marker['prefix']}/report/report.json")


def load_report(spec: str, label: str = "") -> CompareRun:
    """Read one run's report; ``label`` defaults to the run id or the folder's name."""
    uri = _report_uri(spec)
    try:
        report = json.loads(_read(uri))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{uri}: not JSON ({exc})") from None
    if not isinstance(report, dict) or not isinstance(report.get("models"), list):
        raise ConfigError(f"{uri}: not a MADBench report.json (no models list)")
    return CompareRun(label or default_label(spec, report), report, uri)


def default_label(spec: str, report: dict[str, Any]) -> str:
    """The run id the report records (a run's evaluate stage writes it); for a report
    without one (``madbench eval``'s, or one written before it was recorded), the run id of
    a ``<store>/<run_id>`` spec, else the file's or its folder's name."""
    recorded = report.get("run_id")
    if isinstance(recorded, str) and recorded:
        return recorded
    name = Path(spec.rstrip("/")).name.removesuffix(".json")
    if name == "report":
        name = Path(spec).parent.name or "report"
    return name


def results_of(run: CompareRun) -> list[EvalResult]:
    """The report's models as records-only results, named ``<name> [<label>]`` (``<name>``
    where the label is empty: a run's own report read back)."""
    out = []
    for m in run.report["models"]:
        name = str(m.get("name") or m["slug"])
        info = ModelInfo(str(m["slug"]), f"{name} [{run.label}]" if run.label else name,
                         str(m.get("group") or ""), bool(m.get("reference")),
                         str(m.get("stands_in_for") or ""), bool(m.get("in_paper", True)))
        tables = {k: [_nan(r) for r in v] for k, v in (m.get("tables") or {}).items()}
        out.append(EvalResult(info, tables))
    return out


def _nan(rec: Any) -> Any:
    """JSON's ``null`` back to NaN where the tables expect a float."""
    if isinstance(rec, dict):
        return {k: (float("nan") if v is None and _numeric(k) else _nan(v))
                for k, v in rec.items()}
    return rec


def _numeric(key: str) -> bool:
    return key.endswith(("_lo", "_hi")) or key in {"auc", "eer", "ap", "value", "acc",
                                                   "macro_f1", "excluded_rate", "threshold"}


def facts_of(runs: list[CompareRun]) -> list[dict[str, Any]]:
    """Each run's summary facts (``runs`` of its report.json) under its label; a report
    written before reports had facts gives its label and where it was read from."""
    out = []
    for run in runs:
        facts = [f for f in run.report.get("runs") or [] if isinstance(f, dict)]
        for f in facts or [{"run_id": run.label, "store": run.where}]:
            out.append({**f, "label": run.label})
    return out


def _distinct(runs: list[CompareRun], specs: list[str]) -> list[CompareRun]:
    """Default labels made distinct: a label two runs share gets the spec that names each
    (two runs of one id in two stores, two report.json in folders of one name)."""
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    out = []
    for run, spec in zip(runs, specs):
        label = f"{run.label} ({spec})" if seen[run.label] > 1 else run.label
        out.append(dataclasses.replace(run, label=label))
    if len({r.label for r in out}) != len(out):
        raise ConfigError(f"two runs have the same label {[r.label for r in out]}; give "
                          "--labels")
    return out


def compare_runs(specs: list[str], labels: list[str] | None = None) -> list[EvalResult]:
    """Every model of every run, in the report's group order (same model adjacent)."""
    from madbench_common.benchmarks.madbench.stages.evaluate import order_results

    runs = load_runs(specs, labels)
    return order_results([res for run in runs for res in results_of(run)])


def load_runs(specs: list[str], labels: list[str] | None = None) -> list[CompareRun]:
    """Every run's report, with distinct labels."""
    if len(specs) < 1:
        raise ConfigError("madbench compare needs at least one run")
    labels = labels or []
    if labels and len(labels) != len(specs):
        raise ConfigError(f"--labels: {len(labels)} labels for {len(specs)} runs")
    runs = [load_report(s, labels[i] if labels else "") for i, s in enumerate(specs)]
    names = [r.label for r in runs]
    if len(set(names)) != len(names):
        if labels:
            raise ConfigError(f"--labels: two runs have the same label {names}")
        runs = _distinct(runs, specs)
    return runs
