"""Loud partial failure: rows rejected for faults that are not about the input data (a
device, dtype, memory or code error) have a budget per stage; over it the stage fails with
exit 3 and one line per reason with its count, in the local runner, the step executor
(the pod CLI, ``madbench stage run|merge``) and the Argo executor the rehearsal uses. Rows
rejected for data reasons never count. A batched stage out of GPU memory retries at half
the batch before a row counts."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from madbench_common.core.errors import ConfigError, InputRejected
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.models.speech_prep import GenerationFailed
from madbench_common.pipeline.failures import (
    FAULT_REASONS,
    is_fault,
    model_rejection,
    row_failure,
)
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.params import check_params
from madbench_common.pipeline.stage import (
    RejectionBudgetExceeded,
    check_budget,
    make_context,
    read_marker,
)
from tests.pipeline.toystages import ToyRow, calls, failing_graph

ROOT = Path(__file__).parents[2]


@contextlib.contextmanager
def console_text() -> Iterator[io.StringIO]:
    """What rich prints to stdout meanwhile, at a width that fits every column."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.MonkeyPatch.context() as mp:
        mp.setenv("COLUMNS", "250")
        yield out
# 10 items, 2 of them (20 %) failing: over the default budget (5 %) when it is a fault
DEVICE = {"c02": "device", "c03": "dtype"}  # both in the first of 2 shards
DATA = {"c02": "data", "c07": "data"}


def _opts(tmp: Path, stage: str, params: dict[str, Any]) -> RunOptions:
    graph = failing_graph()
    others = {s.name: {"n": 0} for s in graph if s.name != stage}
    return RunOptions(store=str(tmp / "store"), run_id="r", until=stage, progress=False,
                      workers=1, params={**others, stage: {"n": 10, **params}},
                      shards={"flaky": 2, "batch": 2, "whole": 1, "batched": 1})


def _rows(tmp: Path, stage: str) -> dict[str, ToyRow]:
    data = (tmp / "store" / "r" / stage / "manifest.parquet").read_bytes()
    return {r.clip_id: r for r in read_manifest_bytes(ToyRow, data)}


def _marker(tmp: Path, stage: str) -> dict[str, Any]:
    marker: dict[str, Any] = json.loads((tmp / "store" / "r" / stage / "_SUCCESS").read_text())
    return marker


# ------------------------------------------------------------------ classification


@pytest.mark.parametrize(("exc", "reason"), [
    (RuntimeError("CUDA error: an illegal memory access was encountered"), "device_error"),
    (RuntimeError("Expected all tensors to be on the same device, but found cuda:0 and cpu"),
     "device_error"),
    (RuntimeError("mat1 and mat2 must have the same dtype"), "device_error"),
    (RuntimeError("Input type (float) and weight type (c10::BFloat16) should be the same"),
     "device_error"),
    # torch's own wording, as raised on the CPU (2.13)
    (RuntimeError("expected m1 and m2 to have the same dtype, but got: float != "
                  "c10::BFloat16"), "device_error"),
    (RuntimeError("Input type (double) and bias type (float) should be the same"),
     "device_error"),
    (RuntimeError("Tensor on device cpu is not on the expected device meta!"), "device_error"),
    (RuntimeError("index 80 is out of bounds"), "generation_error"),
    (KeyError("speaker"), "generation_error"),
    (ConfigError("video-to-audio generation needs frames"), "generation_error"),
    (ValueError("reference audio shorter than 1 s"), "generation_failed"),
    (GenerationFailed("empty_text", "text normalises to no tokens"), "generation_failed"),
    (InputRejected("c1", "too_short", "0.2 s"), "generation_failed"),
])
def test_a_model_call_s_exception_is_a_data_or_a_fault_reason(exc: Exception,
                                                              reason: str) -> None:
    got = model_rejection(exc, "c1", "generation_failed")
    assert got.reason == reason
    assert is_fault(got.reason) == (reason != "generation_failed")


def test_a_gpu_out_of_memory_is_raised_again_and_counted_by_the_shard_loop() -> None:
    torch = pytest.importorskip("torch")
    oom = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    with pytest.raises(torch.cuda.OutOfMemoryError):
        model_rejection(oom, "c1", "generation_failed")
    with pytest.raises(GenerationFailed):  # an adapter's guard_oom wrapper: the same
        model_rejection(GenerationFailed("out_of_memory", "CUDA out of memory"), "c1", "x")
    assert row_failure(oom, "c1").reason == "gpu_out_of_memory"
    assert row_failure(GenerationFailed("out_of_memory"), "c1").reason == "gpu_out_of_memory"
    assert row_failure(RuntimeError("cuDNN error: CUDNN_STATUS_EXECUTION_FAILED"),
                       "c1").reason == "device_error"
    assert row_failure(GenerationFailed("empty_output"), "c1").reason == "generation_failed"


def test_data_reasons_never_count() -> None:
    for reason in ("too_long", "speaker_changed", "length_correction_exceeded", "too_short",
                   "decode_crashed", "decode_timeout", "unreadable", "no_audio", "io_error",
                   "bad_name", "bad_encoding", "generation_failed", "encode_failed",
                   "omni_failed", "inference_failed", "no_shuffle_partner"):
        assert not is_fault(reason), reason
    assert {"item_failed", "device_error", "gpu_out_of_memory"} <= set(FAULT_REASONS)


def test_the_budget_message_has_one_line_per_reason() -> None:
    assert check_budget("gen", 100, {"device_error": 5, "too_long": 40}, 0.05) == 5
    with pytest.raises(RejectionBudgetExceeded) as err:
        check_budget("gen", 100, {"device_error": 4, "item_failed": 2, "too_long": 40}, 0.05,
                     {"device_error": "c7: RuntimeError: CUDA error"})
    assert err.value.exit_code == 3
    lines = str(err.value).splitlines()
    assert lines[0].startswith("stage gen: 6 of 100 rows (6.0 %) rejected for faults")
    assert "max_failed_fraction=0.05" in lines[0]
    assert lines[1:] == ["  device_error: 4 (e.g. c7: RuntimeError: CUDA error)",
                         "  item_failed: 2", "  too_long: 40 (data, not counted)"]


# ------------------------------------------------------------------ local runner


@pytest.mark.parametrize("stage", ["flaky", "batch"])
def test_local_runner_fails_a_stage_with_20_percent_device_errors(tmp_path: Path,
                                                                  stage: str) -> None:
    with pytest.raises(RejectionBudgetExceeded) as err:
        LocalRunner(failing_graph, _opts(tmp_path, stage, {"fail": DEVICE})).execute()
    text = str(err.value)
    assert err.value.exit_code == 3
    assert f"stage {stage}: 2 of 10 rows (20.0 %)" in text
    assert "\n  device_error: 2 (e.g. c02" in text
    assert not (tmp_path / "store" / "r" / stage / "_SUCCESS").exists()
    # the shard holding the faults is recomputed on rerun; the clean one is kept
    shards = sorted(p.name for p in (tmp_path / "store" / "r" / stage).glob("*/shards/*"))
    assert shards == ["00000-of-00002.parquet", "00001-of-00002._SUCCESS",
                      "00001-of-00002.parquet"]


@pytest.mark.parametrize("stage", ["flaky", "batch"])
def test_local_runner_passes_a_stage_with_20_percent_data_rejections(tmp_path: Path,
                                                                     stage: str) -> None:
    LocalRunner(failing_graph, _opts(tmp_path, stage, {"fail": DATA})).execute()
    rows = _rows(tmp_path, stage)
    assert sum(not r.ok for r in rows.values()) == 2
    marker = _marker(tmp_path, stage)
    assert marker["reasons"] == {"too_long": 2}
    assert marker["budget"] == {"max_failed_fraction": 0.05, "failed": 0}


def test_a_raised_budget_lets_the_faulty_stage_pass_and_keeps_its_fingerprint(
        tmp_path: Path) -> None:
    LocalRunner(failing_graph, _opts(tmp_path, "flaky", {
        "fail": DEVICE, "max_failed_fraction": 0.25})).execute()
    marker = _marker(tmp_path, "flaky")
    assert marker["reasons"] == {"device_error": 2}
    assert marker["budget"] == {"max_failed_fraction": 0.25, "failed": 2}
    # the budget decides pass or fail, not what a row holds: not in the fingerprint
    opts = _opts(tmp_path, "flaky", {"fail": DEVICE})
    from madbench_common.core.store import RunStore, open_store

    run = RunStore(open_store(opts.store), "r")
    ctx = make_context(run, failing_graph(), "flaky", opts.params["flaky"], "embedded", 0)
    assert ctx.fingerprint == marker["fingerprint"]
    assert read_marker(run, "flaky") is not None
    # madbench status: the reasons, the faults against the budget, each reason's kind
    from madbench_common.cli.pipeline import print_status
    from madbench_common.pipeline.status import collect_status

    status = collect_status(run, failing_graph())
    [flaky] = [st for st in status.stages if st.stage == "flaky"]
    assert (flaky.reasons, flaky.failed, flaky.budget) == ({"device_error": 2}, 2, 0.25)
    with console_text() as out:
        print_status(status, table1=False)
    text = out.getvalue()
    assert "faults / budget" in text and " 2 / 2 " in text
    assert any("device_error" in line and "fault" in line and " 2 " in line
               for line in text.splitlines())
    # the report's table of rejections (report.json)
    from madbench_common.benchmarks.madbench.eval.report import render_json
    from madbench_common.pipeline.status import rejection_table

    table = rejection_table(run, failing_graph())
    assert table == [{"stage": "flaky", "reason": "device_error", "kind": "fault", "count": 2,
                      "rows": 10, "max_failed_fraction": 0.25}]
    assert json.loads(render_json([], rejections=table))["rejections"] == table


def test_the_budget_is_a_parameter_of_every_stage_and_must_be_a_fraction(
        tmp_path: Path) -> None:
    graph = failing_graph()
    check_params(graph, {s.name: {"max_failed_fraction": 0.2} for s in graph})
    with pytest.raises(ConfigError, match="must be a number"):
        check_params(graph, {"flaky": {"max_failed_fraction": "lots"}})
    with pytest.raises(ConfigError, match=r"flaky: max_failed_fraction must be a fraction"):
        LocalRunner(failing_graph, _opts(tmp_path, "flaky", {
            "max_failed_fraction": 1.5})).execute()


# ------------------------------------------------------------------ GPU out of memory


def test_a_batched_stage_out_of_gpu_memory_retries_at_half_the_batch(tmp_path: Path) -> None:
    """8 items, 2 fit at once, c05 never fits: 8 → 4 + 4 → 2 + 2 + 2 + 2 → c05 alone; only
    c05 is rejected (gpu_out_of_memory), and 1 of 8 is over the default budget."""
    pytest.importorskip("torch")
    counter = tmp_path / "batches.log"
    params = {"n": 8, "fits": 2, "oom": ["c05"], "counter": str(counter)}
    with pytest.raises(RejectionBudgetExceeded, match=r"\n  gpu_out_of_memory: 1 \(e\.g\. c05"):
        LocalRunner(failing_graph, _opts(tmp_path, "batched", params)).execute()
    batches = calls(counter)
    assert batches[:3] == ["c00,c01,c02,c03,c04,c05,c06,c07", "c00,c01,c02,c03", "c00,c01"]
    assert "c04,c05" in batches and "c05" in batches and "c04" in batches
    LocalRunner(failing_graph, _opts(tmp_path, "batched", {
        **params, "max_failed_fraction": 0.2})).execute()
    rows = _rows(tmp_path, "batched")
    assert [k for k, r in rows.items() if not r.ok] == ["c05"]
    assert rows["c05"].reason == "gpu_out_of_memory"
    assert "CUDA out of memory" in rows["c05"].detail


# ------------------------------------------------------------------ step executor (pods)

_POD = ("import sys; from madbench_common import cli; "
        "from tests.pipeline.toystages import failing_graph; "
        "import madbench_common.cli.pipeline as cp; cp.build_graph = failing_graph; "
        "sys.exit(cli.main(sys.argv[1:]))")


def _pod_argv(store: Path, verb: str, fail: dict[str, str], shard: int | None = None
              ) -> list[str]:
    argv = ["stage", verb, "--stage", "flaky", "--num-shards", "2", "--store", str(store),
            "--run-id", "r", "--params-json", json.dumps({"n": 10, "fail": fail})]
    return argv + (["--shard", str(shard)] if shard is not None else [])


def _pod(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", _POD, *argv], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.mark.parametrize(("fail", "code"), [(DEVICE, 3), (DATA, 0)])
def test_the_pod_cli_merge_exits_3_over_the_budget(tmp_path: Path, fail: dict[str, str],
                                                   code: int) -> None:
    store = tmp_path / "s"
    for shard in (0, 1):
        done = _pod(_pod_argv(store, "run", fail, shard))
        assert done.returncode == 0, done.stderr[-2000:]
    done = _pod(_pod_argv(store, "merge", fail))
    assert done.returncode == code, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    if code:
        assert "stage flaky: 2 of 10 rows (20.0 %) rejected" in done.stderr
        assert "  device_error: 2 (e.g. c02" in done.stderr
    else:
        assert json.loads(done.stdout)["reasons"] == {"too_long": 2}


# ------------------------------------------------------------------ the rehearsal's executor


class PodProcesses:
    """A runner of the Argo executor that runs each pod's argv as a process here (what the
    rehearsal's PodRunner does inside a container), exit code and log tail as the pod's."""

    def prepare(self, pod: Any) -> None:
        pass

    def run(self, pod: Any, attempt: int, cancel: threading.Event) -> Any:
        from madbench_common.cluster.argo_local import PodResult

        done = _pod(list(pod.argv[1:]))
        if done.returncode == 0:
            return PodResult("Succeeded", 0)
        return PodResult("Failed", done.returncode, done.stderr[-2000:])


def _flaky_workflow(store: Path, fail: dict[str, str]) -> Any:
    from madbench_common.cluster.argo_local import Workflow

    sc = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
          "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}

    def container(name: str, args: list[str], **extra: Any) -> dict[str, Any]:
        return {"name": name, **extra, "container": {
            "image": "ghcr.io/madbench/reference-cpu:0.1.0", "command": ["madbench"],
            "args": args, "securityContext": sc,
            "resources": {"limits": {"memory": "1Gi"},
                          "requests": {"cpu": "500m", "memory": "1Gi"}}},
            "retryStrategy": {"limit": "2", "retryPolicy": "Always",
                              "expression": 'lastRetry.exitCode != "3"'}}

    shard = _pod_argv(store, "run", fail)
    shard[shard.index("--num-shards") + 1] = "2"
    doc = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
           "metadata": {"generateName": "t-"},
           "spec": {"entrypoint": "main",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 10001,
                                        "runAsGroup": 10001},
                    "templates": [
                        {"name": "main", "dag": {"tasks": [
                            {"name": "flaky", "template": "flaky-shard",
                             "arguments": {"parameters": [{"name": "shard",
                                                           "value": "{{item}}"}]},
                             "withSequence": {"count": "2"}},
                            {"name": "flaky-merge", "template": "flaky-merge",
                             "dependencies": ["flaky"]}]}},
                        container("flaky-shard", [*shard, "--shard", "{{inputs.parameters.shard}}"],
                                  inputs={"parameters": [{"name": "shard"}]}),
                        container("flaky-merge", _pod_argv(store, "merge", fail))]}}
    return Workflow.from_doc(doc)


@pytest.mark.parametrize(("fail", "phase"), [(DEVICE, "Failed"), (DATA, "Succeeded")])
def test_the_rehearsal_executor_fails_the_workflow_over_the_budget(
        tmp_path: Path, fail: dict[str, str], phase: str) -> None:
    from madbench_common.cluster.argo_local import Executor

    store = tmp_path / "s"
    result = Executor(_flaky_workflow(store, fail), runner=PodProcesses(), name="w",
                      backoff_scale=0.0).run()
    assert result.phase == phase
    if phase == "Failed":
        merge = result.nodes["w.flaky-merge"]
        assert len(merge["attempts"]) == 1  # exit 3 is never retried
        assert merge["attempts"][0]["exit_code"] == 3
        [failure] = result.failures
        assert "stage flaky: 2 of 10 rows (20.0 %)" in failure["message"]
        assert "device_error: 2" in failure["message"]
    else:
        marker = json.loads((store / "r" / "flaky" / "_SUCCESS").read_text())
        assert marker["reasons"] == {"too_long": 2}
