"""Running pods: secrets reach the pod's environment and nothing else, the memory cgroup,
the deadline of a GPU pod on the CPU, the exit handler's image, and the memo that skips the
pods a resumed pass ran before."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cluster.argo_local import Executor, PodResult, Workflow
from madbench_common.cluster.lint import image_slug
from madbench_common.cluster.rehearsal.images import ImageProvider
from madbench_common.cluster.rehearsal.pods import PodRunner
from madbench_common.cluster.rehearsal.profile import load_profile
from madbench_common.cluster.rehearsal.run import workflow_params
from madbench_common.cluster.rehearsal.state import State
from madbench_common.cluster.sandbox import STUB_PORT
from madbench_common.core.errors import ConfigError
from tests.cluster.rehearsal.support import ROOT, WORKFLOWS, dry, omni_memo
from tests.cluster.test_argo_local import Recorder


def test_secrets_reach_the_pod_env_and_nothing_else(tmp_path: Path) -> None:
    secret = "s3cr3t-value-" + "x" * 20
    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path)
    runner = PodRunner(provider, {"madbench-s3": {"AWS_SECRET_ACCESS_KEY": secret,
                                                  "AWS_ACCESS_KEY_ID": "mbkey0001"}},
                       tmp_path, None)
    pod = dry("smoke")[0]
    assert secret not in json.dumps(pod.describe())
    env = runner._env(pod)
    assert env["AWS_SECRET_ACCESS_KEY"] == secret
    assert "AWS_ENDPOINT_URL" not in env  # optional and absent: left out, as Kubernetes does
    missing = PodRunner(provider, {"madbench-s3": {}}, tmp_path, None)
    with pytest.raises(ConfigError, match="no key 'AWS_ACCESS_KEY_ID'"):
        missing._env(pod)
    log = tmp_path / "pod.log"
    tail: list[str] = []
    runner._pump(io.StringIO(f"boto3 says {secret}\nfine\n"), log, tail)
    assert secret not in log.read_text() and "***" in log.read_text()
    assert secret not in "".join(tail)


def test_the_deaf_rehearsal_mounts_an_empty_data_volume_and_allows_stand_ins(
        tmp_path: Path) -> None:
    """deaf.yaml's pods mount the data volume (madbench-data, read-only at /data): here an
    empty folder, and the rehearsal profile opts the data stages into their stand-ins,
    which the workflow's full profile otherwise refuses."""
    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path)
    runner = PodRunner(provider, {}, tmp_path, None)
    profile = load_profile()
    (wp,) = [f for f in profile.workflows if f.name == "deaf"]
    wf = Workflow.load(WORKFLOWS / "deaf.yaml")
    params = workflow_params(wf, wp, profile, None, {"stub_port": STUB_PORT})
    pods = Executor(wf, params, name="w").dry_run()
    envlib = next(p for p in pods if "deaf_envlib" in p.argv and "run" in p.argv)
    assert [str(tmp_path / "data"), "/data", True] in runner._mounts(envlib)
    for stage in ("deaf_sentences", "deaf_envlib", "esc_tts_a", "esc_tts_b", "esc_tts_c"):
        assert params[f"{stage}_stand_ins"] == "allow"
        assert wf.parameters()[f"{stage}_stand_ins"] == "refuse"
    assert "stand_ins=allow" in envlib.argv and "demand=" in envlib.argv


def test_a_pod_missing_a_secret_key_fails_without_starting(tmp_path: Path) -> None:
    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path)
    runner = PodRunner(provider, {}, tmp_path, None)
    result = runner.run(dry("smoke")[0], 0, threading.Event())
    assert result.phase == "Error" and result.info["no_retry"]
    assert "CreateContainerConfigError" in result.message


def test_a_pod_over_its_memory_limit_is_killed_and_reported(tmp_path: Path) -> None:
    """The memory cgroup enforces ``limits.memory`` (where this machine lets us make one)."""
    import subprocess
    import sys

    from madbench_common.cluster.rehearsal.pods import _Cgroup, _memory_cgroup

    if _memory_cgroup() is None:
        pytest.skip("no writable memory cgroup here")
    cgroup = _Cgroup(64 * 2**20)
    assert cgroup.path is not None
    try:
        code = ("import os, sys\nopen(sys.argv[1] + '/cgroup.procs', 'w').write(str(os.getpid()))"
                "\nblocks = [bytearray(16 * 2**20) for _ in range(32)]")
        proc = subprocess.run([sys.executable, "-c", code, str(cgroup.path)])
        stats = cgroup.stats()
    finally:
        cgroup.remove()
    assert proc.returncode == -9  # SIGKILL by the OOM killer
    assert stats["memory_limit_enforced"] and stats["oom_killed"]
    assert stats["cgroup_peak_bytes"] <= 64 * 2**20
    assert not cgroup.path.exists()


def test_a_gpu_pod_on_the_cpu_gets_the_profile_s_deadline_scale(tmp_path: Path) -> None:
    """AV Anomaly's shard was killed at its template's hour (a GPU's budget) on 2 CPU
    cores: GPU pods get ``cpu_deadline_scale`` times their deadline, CPU pods their own."""
    from dataclasses import replace

    profile = load_profile()
    assert profile.cpu_deadline_scale > 1
    wf = Workflow.load(ROOT / "workflows" / "full.yaml")
    (flow,) = [f for f in profile.workflows if f.name == "full"]
    pods = {p.node: p for p in Executor(wf, workflow_params(
        wf, flow, profile, None, {"stub_port": STUB_PORT}), name="w").dry_run()}
    gpu = pods["w.features-det-av-anomaly.shard(0)"]
    cpu = pods["w.ingest.shard(0)"]
    assert gpu.gpu and not cpu.gpu and gpu.deadline and cpu.deadline
    runner = PodRunner(ImageProvider(State(tmp_path / "s.json"), tmp_path), {}, tmp_path, None,
                       cpu_deadline_scale=profile.cpu_deadline_scale)
    assert runner.deadline(gpu) == gpu.deadline * profile.cpu_deadline_scale
    assert runner.deadline(cpu) == cpu.deadline
    assert runner.deadline(replace(cpu, deadline=None)) is None
    # the heavy AV stages run in more shards (a killed shard keeps nothing)
    assert len([n for n in pods if n.startswith("w.features-det-av-anomaly.shard(")]) == 8


@pytest.mark.parametrize("group", [[], ["deaf"]], ids=["madbench", "deaf"])
def test_the_exit_handler_runs_without_hera(tmp_path: Path, group: list[str]) -> None:
    """reference-cpu has no Hera: ``madbench exit-summary`` and ``madbench deaf
    exit-summary`` must not import the compiler (the smoke rehearsal found the first onExit
    pod failing on ``import hera``, the deaf rehearsal the second)."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['hera'] = None\n"
            "from madbench_common.cli import main\n"
            f"sys.exit(main([*{group!r}, 'exit-summary', '--store', {str(tmp_path)!r}, "
            "'--run-id', 'r1', "
            "'--workflow', 'w', '--status', 'Failed', '--failures', '\"null\"']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "r1" / "_RUN_SUMMARY.json").read_text())["status"] == "Failed"


def test_a_quick_rerun_does_not_overwrite_the_run_that_did_the_work(tmp_path: Path) -> None:
    """A shard that finished before its stage did is run again on resume (the memo skips a
    pod only once its stage is done); it finds its output and ends in seconds. The memo
    keeps the larger measures, those of the run that did the work."""
    from madbench_common.cluster.rehearsal.pods import StateMemo

    memo, pod = omni_memo(tmp_path)
    memo.record("k", pod, PodResult("Succeeded", 0, seconds=235.0,
                                    info={"peak_rss_bytes": 3074 * 2**20}))
    memo.record("k", pod, PodResult("Succeeded", 0, seconds=4.0,
                                    info={"peak_rss_bytes": 238 * 2**20}))
    entry = memo.entry("k", pod)
    assert entry["seconds"] == 235.0 and entry["peak_rss_bytes"] == 3074 * 2**20
    assert memo.done("k", pod)
    again = State(tmp_path / "state.json")  # and it is what a later session reads
    assert StateMemo(again, "full", memo.provider, lambda: set()).entry("k", pod) == entry


def _pass(tmp_path: Path, ids: dict[str, str], recipes: dict[str, str] | None = None
          ) -> tuple[Recorder, int]:
    """One execution of the smoke workflow as the rehearsal makes it: parameters pinned to
    ``ids`` (the local builds), the state memo, the provider's pod identity."""
    from madbench_common.cluster.rehearsal.pods import StateMemo

    state = State(tmp_path / "state.json")
    provider = ImageProvider(state, tmp_path)
    provider._digest = "code"
    for slug, image_id in ids.items():
        provider._seen[slug] = image_id
        state.update_image(slug, image_id=image_id, code_digest="code")
    provider._recipes.update(recipes or {})
    profile = load_profile()
    flow = next(f for f in profile.workflows if f.name == "full")
    wf = Workflow.load(WORKFLOWS / "smoke.yaml")
    params = {k: v for k, v in workflow_params(wf, flow, profile, provider,
                                               {"stub_port": STUB_PORT}).items()
              if k in wf.parameters()}
    memo = StateMemo(state, "smoke", provider, lambda: set(build_graph().stages))
    runner = Recorder(lambda pod, attempt: PodResult("Succeeded", 0, seconds=1.0))
    ex = Executor(wf, params, runner=runner, workers=4, name="w", memo=memo,
                  backoff_scale=0.0, pod_identity=provider.pod_identity)
    result = ex.run()
    assert result.phase == "Succeeded"
    return runner, sum(1 for n in result.nodes.values() if n.get("memo"))


def test_a_rebuilt_image_of_the_same_inputs_keeps_its_pods_done(tmp_path: Path) -> None:
    """Fault 5 of the rehearsal: a pass resumed after a complete one reran the whole full
    graph, because the memo keyed pods by image id, and the exit handler had rebuilt
    reference-cpu (removed after its pods) under a new id. The key holds the image's
    build inputs (its recipe) instead: a new id of the same recipe skips every pod; a
    changed recipe reruns that image's pods and every pod after them."""
    slugs = {image_slug(p.image)[0] for p in dry("smoke")}
    assert slugs == {"reference-cpu"}  # one image: every pod is downstream of a change
    first, skipped = _pass(tmp_path, {"reference-cpu": "a" * 64})
    assert first.pods and skipped == 0
    again, skipped = _pass(tmp_path, {"reference-cpu": "b" * 64})  # rebuilt: a new id
    exit_pods = len(again.pods)
    assert skipped == len(first.pods) - exit_pods and exit_pods <= 1  # only onExit reruns
    changed, skipped = _pass(tmp_path, {"reference-cpu": "b" * 64},
                             {"reference-cpu": "another recipe"})
    assert skipped == 0 and len(changed.pods) == len(first.pods)
