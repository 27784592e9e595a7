"""The bugs found by executing workflows/smoke.yaml step by step, and the
CLI's error line: each with the real forms Argo produces."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cli.pipeline import parse_params
from madbench_common.core.manifest import params_json
from madbench_common.pipeline.argo import MAX_BACKOFF_SECONDS, parse_failures, write_exit_summary
from madbench_common.pipeline.stage import stage_params
from tests.yaml_docs import load_yaml

ROOT = Path(__file__).resolve().parents[1]
_PARAM = re.compile(r"\{\{workflow\.parameters\.([A-Za-z0-9_-]+)\}\}")
_RUN_ID = "{{=workflow.parameters.run_id == '' ? workflow.name : workflow.parameters.run_id}}"


def _workflow(name: str) -> dict[str, Any]:
    data: dict[str, Any] = load_yaml(ROOT / "workflows" / f"{name}.yaml")
    return data


def _argv(template: dict[str, Any], values: dict[str, str]) -> list[str]:
    """The container's argv after Argo's substitution (each arg one element, verbatim)."""
    subst = {**values, "__run_id": "r1"}
    args = [a.replace(_RUN_ID, subst["__run_id"]) for a in template["container"]["args"]]
    args = [a.replace("{{inputs.parameters.shard}}", "0") for a in args]
    return [_PARAM.sub(lambda m: subst[m.group(1)], a) for a in args]


def _cli_params(argv: list[str]) -> dict[str, Any]:
    pairs = [argv[i + 1] for i, a in enumerate(argv) if a == "--param"]
    raw = argv[argv.index("--params-json") + 1] if "--params-json" in argv else "{}"
    return parse_params(raw, pairs)


def _defaults(doc: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p.get("value", "") for p in doc["spec"]["arguments"]["parameters"]}


@pytest.mark.parametrize("variant", ["smoke", "full"])
def test_params_hash_is_the_same_on_both_backends(variant: str) -> None:
    """Argo passes ``--param model=…`` (and, in the full workflow, the profile's params); the
    pod's embedded graph then hashes what a local runner of that profile's graph hashes."""
    doc = _workflow(variant)
    templates = {t["name"]: t for t in doc["spec"]["templates"]}
    values = _defaults(doc) | {"sources": "/data/sources.csv"}
    profiled = build_graph().profiled("full" if variant == "full" else "embedded")
    checked = 0
    for stage in build_graph():
        argo = _cli_params(_argv(templates[f"{stage.name.replace('_', '-')}-shard"], values))
        local = {"sources": "/data/sources.csv"} if not stage.inputs else {}
        mine = profiled[stage.name]
        if variant == "full" or argo.get("model", stage.model) == stage.model:
            assert params_json(stage_params(stage, argo)) == params_json(
                stage_params(mine, local)), stage.name
            checked += 1
        if stage.swappable:
            assert "model" in stage_params(stage, local)
    assert checked == len(build_graph().order)


@pytest.mark.parametrize("value", ['s3://b/a "quoted" dir/x.csv', "s3://b/back\\slash\\x.csv",
                                   'C:\\data\\"odd"=1.csv', "plain", ""])
def test_any_parameter_value_survives_argo_substitution(value: str) -> None:
    doc = _workflow("full")
    ingest = {t["name"]: t for t in doc["spec"]["templates"]}["ingest-shard"]
    argv = _argv(ingest, _defaults(doc) | {"sources": value})
    assert _cli_params(argv)["sources"] == value


@pytest.mark.parametrize(("raw", "expected"), [
    ('"null"', []),  # Argo: strconv.Quote(json.Marshal(nil))
    ('"[{\\"displayName\\":\\"madbench.ingest(0:0)\\",\\"message\\":\\"Error (exit code 3)\\",'
     '\\"templateName\\":\\"ingest-shard\\",\\"phase\\":\\"Failed\\",\\"podName\\":\\"p-1\\"}]"',
     [{"displayName": "madbench.ingest(0:0)", "message": "Error (exit code 3)",
       "templateName": "ingest-shard", "phase": "Failed", "podName": "p-1"}]),
    ('[{"displayName": "x", "message": "raw JSON"}]', [{"displayName": "x",
                                                        "message": "raw JSON"}]),
    ("null", []),
    ("", []),
    ("{{workflow.failures}}", []),
    ("not json", [{"message": "not json"}]),
])
def test_workflow_failures_decoded_from_argo_forms(raw: str, expected: list[Any]) -> None:
    assert parse_failures(raw) == expected


def test_exit_summary_stores_a_list_not_a_quoted_string(tmp_path: Path) -> None:
    write_exit_summary(build_graph(), str(tmp_path), "r1", "wf", "Succeeded", "12", '"null"')
    summary = json.loads((tmp_path / "r1" / "_RUN_SUMMARY.json").read_text())
    assert summary["failures"] == []


def test_retry_backoff_fits_argo_3_5() -> None:
    """``backoff.cap`` exists only from Argo v3.7; the README supports v3.5+."""
    readme = (ROOT / "README.md").read_text()
    assert "Argo Workflows (v3.5 or later" in readme
    for variant in ("full", "smoke"):
        for tpl in _workflow(variant)["spec"]["templates"]:
            retry = tpl.get("retryStrategy")
            if not retry or "backoff" not in retry:
                continue
            backoff = retry["backoff"]
            assert set(backoff) <= {"duration", "factor", "maxDuration"}, tpl["name"]
            first = int(str(backoff["duration"]).rstrip("s"))
            longest = first * int(backoff["factor"]) ** (int(retry["limit"]) - 1)
            assert longest <= MAX_BACKOFF_SECONDS, tpl["name"]


def test_error_line_holds_the_message(tmp_path: Path) -> None:
    """A long path is never wrapped off an empty ``error:`` line."""
    long = tmp_path / ("d" * 120) / "sources.csv"
    done = subprocess.run(
        [sys.executable, "-m", "madbench_common.cli", "run", "--sources", str(long),
         "--store", str(tmp_path / "s"), "--run-id", "r", "--no-progress"],
        capture_output=True, text=True, env={"COLUMNS": "60", "PATH": "/usr/bin:/bin",
                                             "PYTHONPATH": str(ROOT)})
    assert done.returncode == 3
    first = done.stderr.strip().splitlines()[0]
    assert first.startswith("error: ") and first.endswith("sources.csv: no such file")
