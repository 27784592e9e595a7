"""The rehearsal without images: the real rendered workflows resolved pod by pod (dry run) and
checked, the rehearsal profile's parameters, the stage_params check every pod makes,
secret handling, records; and the opt-in smoke rehearsal in real containers."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from madbench_common.benchmarks.madbench.graph import ENV_BRANCHES, GENERATOR_SLOTS, build_graph
from madbench_common.cli.pipeline import stage_overrides
from madbench_common.cluster.argo_local import Executor, Pod, PodResult, SecretRef, Workflow
from madbench_common.cluster.lint import check_pods, check_target, image_slug
from madbench_common.cluster.rehearse import (
    _API_SECRET,
    _S3_KEYS,
    _S3_SECRET,
    BANNER,
    ImageProvider,
    Options,
    PodRunner,
    State,
    build_records,
    load_profile,
    records_markdown,
    secret_problems,
    upstream_problems,
    workflow_params,
)
from madbench_common.cluster.sandbox import STUB_PORT
from madbench_common.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "workflows"


def dry(name: str, **params: Any) -> list[Pod]:
    return Executor(Workflow.load(WORKFLOWS / f"{name}.yaml"), params, name="w").dry_run()


@pytest.mark.parametrize("name", ["full", "smoke", "deaf"])
def test_every_pod_of_the_rendered_workflows_resolves(name: str) -> None:
    pods = dry(name, run_id="r1")
    assert pods[-1].node == "w.onExit"
    for pod in pods:
        text = json.dumps(pod.describe())
        assert "{{" not in text, pod.node
        assert pod.user == pod.group == 10001
        assert pod.argv[0] == "madbench"
        assert "--run-id" not in pod.argv or pod.argv[pod.argv.index("--run-id") + 1] == "r1"


@pytest.mark.parametrize("name", ["full", "smoke"])
def test_pod_count_follows_the_graph(name: str) -> None:
    wf = Workflow.load(WORKFLOWS / f"{name}.yaml")
    shards = {k[: -len("_shards")]: int(v) for k, v in wf.parameters().items()
              if k.endswith("_shards")}
    graph = build_graph()
    expected = sum(shards.get(s.name, 1) + 1 for s in graph) + 1  # shards, merge; exit handler
    assert len(dry(name)) == expected


def test_the_run_id_defaults_to_the_workflow_name() -> None:
    pod = dry("smoke")[0]
    assert pod.argv[pod.argv.index("--run-id") + 1] == "w"


def test_parameters_as_argo_submit_p_reach_the_pods() -> None:
    pods = dry("full", separate_image="ghcr.io/madbench/separator-mossformer2:0.1.0@sha256:"
               + "a" * 64, separate_shards="2", separate_model="ref-deepfilternet3",
               stage_params='{"source_qc": {"min_speech_coverage": 0.1}}')
    sep = [p for p in pods if "--stage" in p.argv and
           p.argv[p.argv.index("--stage") + 1] == "separate"]
    assert len(sep) == 3  # 2 shards and the merge
    assert all(p.image.endswith("a" * 64) for p in sep)
    assert all("model=ref-deepfilternet3" in p.argv for p in sep)
    assert all(p.argv[p.argv.index("--stage-params") + 1] ==
               '{"source_qc": {"min_speech_coverage": 0.1}}' for p in pods
               if "--stage-params" in p.argv)


def test_an_enum_parameter_takes_only_its_values() -> None:
    """allow_unpinned declares enum [false, true]: argo submit refuses another value."""
    wf = Workflow.load(ROOT / "workflows" / "full.yaml")
    assert wf.enums()["allow_unpinned"] == ["false", "true"]
    pods = dry("full", allow_unpinned="true")
    assert any("--allow-unpinned=true" in p.argv for p in pods)
    with pytest.raises(ConfigError, match="allow_unpinned='yes' is not one of"):
        dry("full", allow_unpinned="yes")


def test_the_full_workflow_runs_the_papers_images_with_weights_read_only() -> None:
    pods = dry("full")
    images = {image_slug(p.image)[0] for p in pods}
    assert {"separator-mossformer2", "qc", "tts-f5", "tts-indextts2", "vc-seedvc", "vc-vevo",
            "v2a-mmaudio", "a2a-audiox", "enc-tf5", "omni-minicpmo45"} <= images
    for pod in pods:
        if pod.node.endswith("onExit"):
            continue
        weights = [m for m in pod.mounts if m.path == "/weights"]
        assert weights and weights[0].read_only and weights[0].claim == "madbench-weights"
        assert dict(pod.env)["HF_HUB_OFFLINE"] == "1"


@pytest.mark.parametrize("name", ["full", "smoke"])
def test_the_dry_run_finds_nothing_wrong_in_the_build_graphs(name: str) -> None:
    problems = [p for p in check_pods(dry(name)) if not p.startswith("warning:")]
    assert problems == []


def test_the_dry_run_names_what_does_not_exist() -> None:
    pods = dry("deaf")
    problems = check_pods(pods)
    # deaf.yaml names SALMONN's image and module (a known gap of that image); any other
    # problem is new
    assert all("salmonn" in p for p in problems), problems
    bad = Pod(node="w.x", template="x-shard", image="ghcr.io/madbench/no-such-image:0.1.0",
              argv=("madbench", "stage", "run", "--stage", "separate", "--param",
                    "model=qc-whisper", "--store", "s3://b/r", "--run-id", "r"),
              env=(), mounts=(), user=10001, group=10001)
    found = check_pods([bad])
    assert any("images/no-such-image/Dockerfile does not exist" in p for p in found)
    assert any("qc-whisper lives in image qc" in p for p in found)
    typo = Pod(node="w.y", template="y", image="ghcr.io/madbench/reference-cpu:0.1.0",
               argv=("madbench", "stage", "run", "--stage", "sepparate", "--store", "s3://b/r",
                     "--run-id", "r"), env=(), mounts=(), user=10001, group=10001)
    assert any("unknown stage 'sepparate'" in p for p in check_pods([typo]))
    flag = Pod(node="w.z", template="z", image="ghcr.io/madbench/reference-cpu:0.1.0",
               argv=("madbench", "stage", "run", "--no-such-flag"), env=(), mounts=(),
               user=10001, group=10001)
    assert any("unrecognized arguments" in p or "required" in p for p in check_pods([flag]))


def test_check_target_reads_modules_without_importing_them() -> None:
    assert check_target("madbench_common.benchmarks.madbench.stages.ingest:IngestStage") is None
    assert "does not exist" in str(check_target("madbench_common.models.no_such:X"))
    assert "defines no Nope" in str(
        check_target("madbench_common.benchmarks.madbench.stages.ingest:Nope"))
    # a package shadows a module of the same name (models/tiny/ over models/tiny.py)
    tiny = ROOT / "madbench_common" / "models" / "tiny"
    if (tiny / "__init__.py").is_file() and tiny.with_suffix(".py").is_file():
        names_in_module = tiny.with_suffix(".py").read_text()
        if "def install_tiny_qc" in names_in_module and \
                "install_tiny_qc" not in (tiny / "__init__.py").read_text():
            assert check_target("madbench_common.models.tiny:install_tiny_qc") is not None


@pytest.mark.parametrize("flow", ["smoke", "full", "deaf"])
def test_the_rehearsal_profile_resolves_and_passes_every_pods_check(flow: str) -> None:
    profile = load_profile()
    (wp,) = [f for f in profile.workflows if f.name == flow]
    wf = Workflow.load(ROOT / wp.file)
    params = workflow_params(wf, wp, profile, None, {"stub_port": STUB_PORT})
    assert json.loads(params["stage_params"])  # the relaxations travel in one parameter
    pods = Executor(wf, params, name="w").dry_run()
    sharded = [k for k in wf.parameters() if k.endswith("_shards")]
    assert all(params[k] == wp.params.get(k, str(profile.shards)) for k in sharded)
    problems = [p for p in check_pods(pods) if not p.startswith("warning:")]
    assert all("salmonn" in p for p in problems), problems
    # every secretKeyRef a pod needs is in the local secret set (the deaf rehearsal's
    # bsc_speech could not start for want of AZURE_SPEECH_KEY)
    available = {_S3_SECRET: _S3_KEYS, _API_SECRET: profile.api_keys}
    assert secret_problems(pods, available) == []
    if flow != "smoke":
        # the rehearsal's weights are its own tiny ones: no hub pin to check
        stages = [p for p in pods if "stage" in p.argv and "run" in p.argv]
        assert stages and all("--allow-unpinned=true" in p.argv for p in stages)
    if flow == "deaf":
        needy = [p for p in pods if any(isinstance(v, SecretRef) and v.key == "AZURE_SPEECH_KEY"
                                        for _, v in p.env)]
        assert needy
        less = {**available, _API_SECRET: [k for k in profile.api_keys
                                           if k != "AZURE_SPEECH_KEY"]}
        assert any("AZURE_SPEECH_KEY" in line and "bsc" in line
                   for line in secret_problems(pods, less))
        bsc = next(p for p in needy if "run" in p.argv)
        model_args = next(a for a in bsc.argv if a.startswith("model_args="))
        assert json.loads(model_args.split("=", 1)[1])["base_url"] == \
            f"http://127.0.0.1:{STUB_PORT}"
        judge = next(p for p in pods if "deaf_judge" in p.argv)
        # the judge's endpoint is a workflow parameter of its own (deaf_judge_judge_base_url)
        assert f"judge_base_url=http://127.0.0.1:{STUB_PORT}/v1" in judge.argv
        assert "judge_model_id=stub-judge" in judge.argv
        doc = json.loads(judge.argv[judge.argv.index("--stage-params") + 1])
        assert "judge_base_url" not in doc["deaf_judge"]


# ------------------------------------------------------------------ stage_params check


def test_stage_params_pick_this_stages_entry() -> None:
    graph = build_graph()
    text = json.dumps({"source_qc": {"min_speech_coverage": 0.1}, "split": {"ratios": [1, 0, 0]}})
    assert stage_overrides(graph, "source_qc", text) == {"min_speech_coverage": 0.1}
    assert stage_overrides(graph, "ingest", text) == {}
    assert stage_overrides(graph, "ingest", "") == {}


@pytest.mark.parametrize("text,match", [
    ('{"sepparate": {}}', "unknown stage 'sepparate'"),
    ('{"separate": {"model": "x"}}', "separate_model"),
    ('{"ingest": {"sources": "s3://x"}}', "-p sources"),
    ('[1]', "JSON object"),
    ('{"ingest": 3}', "JSON object"),
    ('{not json', "not JSON"),
])
def test_stage_params_refuse_what_a_pod_must_not_run_with(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        stage_overrides(build_graph(), "ingest", text)


def test_an_undeclared_key_is_passed_on_with_a_warning(capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    assert stage_overrides(build_graph(), "ingest", '{"ingest": {"min_duraton": 1}}') == {
        "min_duraton": 1}
    assert "min_duraton not among the stage's declared parameters" in capsys.readouterr().err


def test_stage_params_change_the_stage_fingerprint(tmp_path: Path) -> None:
    from madbench_common.cli import build_parser
    from madbench_common.cli.pipeline import _context

    sources = tmp_path / "sources.csv"  # ingest's fingerprint reads the listing's content
    sources.write_text("source_id,path\n")

    def fp(extra: list[str]) -> tuple[str, dict[str, Any]]:
        args = build_parser().parse_args(
            ["stage", "run", "--stage", "ingest", "--store", str(tmp_path / "store"),
             "--run-id", "r", "--param", f"sources={sources}", *extra])
        ctx = _context(args)
        return ctx.fingerprint, ctx.params

    base, params = fp([])
    relaxed, relaxed_params = fp(["--stage-params", '{"ingest": {"min_duration": 1.0}}'])
    assert relaxed != base and relaxed_params["min_duration"] == 1.0
    assert params["min_duration"] == 4.0
    assert fp(["--stage-params", '{"separate": {"x": 1}}'])[0] == base


# ------------------------------------------------------------------ secrets


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


def test_a_pod_missing_a_secret_key_fails_without_starting(tmp_path: Path) -> None:
    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path)
    runner = PodRunner(provider, {}, tmp_path, None)
    result = runner.run(dry("smoke")[0], 0, threading.Event())
    assert result.phase == "Error" and result.info["no_retry"]
    assert "CreateContainerConfigError" in result.message


# ------------------------------------------------------------------ provider, records


@pytest.fixture
def nothing_built_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """No local build of any image: the provider's lookup (``buildah inspect``) answers
    "none", so these tests of how parameters are bound need no container engine and do not
    depend on the images this machine holds."""
    from madbench_common.cluster import rehearse

    monkeypatch.setattr(rehearse, "_image_id", lambda _ref: None)


def test_image_parameters_pin_the_bound_build(tmp_path: Path, nothing_built_here: None) -> None:
    state = State(tmp_path / "state.json")
    provider = ImageProvider(state, tmp_path)
    ref = "ghcr.io/madbench/no-such-image-here:0.1.0"
    value = provider.pinned(ref)
    assert value() == ref  # nothing built, nothing recorded: the plain tag
    provider._digest = "this checkout"
    state.update_image("no-such-image-here", image_id="b" * 64, code_digest="another")
    assert value() == ref  # the last build the rehearsal used, of other code: not bound
    state.update_image("no-such-image-here", code_digest="this checkout")
    assert value() == f"{ref}@sha256:{'b' * 64}"  # the last build the rehearsal used
    provider.bound["no-such-image-here"] = "c" * 64
    assert value() == f"{ref}@sha256:{'c' * 64}"
    assert State(tmp_path / "state.json").image("no-such-image-here")["image_id"] == "b" * 64


def test_only_images_the_rehearsal_built_are_removed(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    import subprocess

    removed: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        removed.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setenv("MADBENCH_BUILD_LOCK", str(tmp_path / "build.lock"))
    state = State(tmp_path / "state.json")
    lines: list[str] = []
    provider = ImageProvider(state, tmp_path, log=lines.append)
    mine, theirs, busy = "a" * 64, "b" * 64, "c" * 64
    state.update_image("det-mine", build_image_id=mine)  # built by a rehearsal
    state.update_image("det-theirs", build_image_id="d" * 64)  # since rebuilt by another
    provider.bound.update({"det-mine": mine, "det-theirs": theirs, "det-busy": busy})
    provider.ready.update({"det-mine", "det-theirs", "det-busy"})
    provider.release(["ghcr.io/madbench/det-busy:0.1.0@sha256:" + busy])
    assert removed == [["buildah", "rmi", mine]]
    assert provider.removed == {"det-mine"} and provider.ready == {"det-busy"}
    assert any("det-theirs" in line and "kept" in line for line in lines)
    provider.keep = True
    provider.ready.add("det-mine")
    provider.release([])
    assert len(removed) == 1  # KEEP_IMAGES=1: nothing goes


def test_no_image_is_removed_while_another_builds(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    """``buildah rmi`` during a build broke that build ("getting top layer info: layer not
    known"): removal takes the build lock, and waits for a later pod while a build holds it."""
    import fcntl
    import subprocess
    import threading

    removed: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        removed.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    lock = tmp_path / "build.lock"
    monkeypatch.setenv("MADBENCH_BUILD_LOCK", str(lock))
    state = State(tmp_path / "state.json")
    lines: list[str] = []
    provider = ImageProvider(state, tmp_path, log=lines.append)
    mine = "a" * 64
    state.update_image("det-mine", build_image_id=mine)
    provider.bound["det-mine"] = mine
    provider.ready.add("det-mine")
    with open(lock, "a") as build:  # a build under way (imagebuild.build_lock's file)
        fcntl.flock(build, fcntl.LOCK_EX)
        provider.release([])  # a finished pod: the removal waits, the pod slot does not
        assert removed == [] and provider.ready == {"det-mine"}
        assert any("waits" in line and str(lock) in line for line in lines)
        done = threading.Event()
        end = threading.Thread(target=lambda: (provider.release([], wait=True), done.set()))
        end.start()  # the end of a workflow: waits for the build
        assert not done.wait(0.3) and removed == []
        fcntl.flock(build, fcntl.LOCK_UN)
    end.join(10)
    assert done.is_set()
    assert removed == [["buildah", "rmi", mine]] and provider.removed == {"det-mine"}
    provider.release([])  # nothing left to remove: the lock is not even taken
    assert len(removed) == 1


def test_a_missing_upstream_mirror_is_named(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    from madbench_common.build.images import list_images

    with_src = [i for i in list_images() if i.upstream_src]
    assert with_src
    info = with_src[0]
    fetched = all((info.dir / ".upstream" / s.dest / ".madbench-commit").is_file()
                  for s in info.upstream_src)
    monkeypatch.setenv("MADBENCH_UPSTREAM_GIT", str(tmp_path / "{owner}+{name}" / "repo"))
    problems = upstream_problems([info.slug])
    if fetched:
        assert problems == []
    else:
        src = info.upstream_src[0]
        assert any(src.repo in p and "mirror" in p for p in problems)


def test_records_sum_rows_and_peaks_per_image(tmp_path: Path) -> None:
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    state.update_image("qc", image_id="sha", build_s=300, size_bytes=6_000_000_000,
                       torch="2.13.0", cuda="13.0", weights_callable="m:f", weights_files=7,
                       weights_bytes=2_500_000, weights_s=12.0)
    nodes: dict[str, dict[str, Any]] = {
        "w.source-qc.shard(0)": {"phase": "Succeeded", "template": "source-qc-shard",
                                 "image": "ghcr.io/madbench/qc:0.1.0@sha256:" + "a" * 64,
                                 "memo": False, "attempts": [{"phase": "Succeeded",
                                                              "peak_rss_bytes": 2**30}]},
        "w.source-qc-merge": {"phase": "Succeeded", "template": "source-qc-merge",
                              "image": "ghcr.io/madbench/qc:0.1.0", "memo": True,
                              "attempts": []},
        "w.split": {"phase": "Failed", "template": "split-shard",
                    "image": "ghcr.io/madbench/qc:0.1.0",
                    "attempts": [{"phase": "Failed", "exit_code": 3, "message": "no model",
                                  "peak_rss_bytes": 2**29}]},
    }
    results = {"full": WorkflowResult("w", "Failed", 100.0, nodes, [
        {"podName": "w.split", "phase": "Failed", "exitCode": 3, "message": "no model"}])}
    markers = {"full": {"source_qc": {"rows": 14, "rejected": 4}}}
    rec = build_records(state, results, markers, ImageProvider(state, tmp_path), 123.0,
                        Options(work=tmp_path, workflows=("full",)), load_profile())
    qc = rec["images"]["qc"]
    assert qc["rows_ok"] == 10 and qc["rows_rejected"] == 4
    assert qc["stages"] == {"full:source_qc": {"rows": 14, "rejected": 4, "reasons": {},
                                               "faults": 0, "max_failed_fraction": None},
                            "full:split": None}
    assert qc["peak_rss_mb"] == 1024 and qc["pods_run"] == 2 and qc["pods_skipped"] == 1
    assert qc["status"] == "failed" and qc["failures"][0]["exit_code"] == 3
    assert rec["complete"] is False and rec["note"] == BANNER and rec["wall_s"] == 123
    text = records_markdown(rec)
    assert "| qc | 300 | 6000 | 2.13.0 / 13.0 | 7 (2.5) | source_qc, split | 10 / 4 |" in text
    assert "random" in text.lower()


def test_a_resumed_pass_keeps_the_peaks_of_the_pods_it_skipped(tmp_path: Path) -> None:
    """A pass resumed across sessions skips most pods: their peak RSS and seconds are those
    of the run the memo recorded (the record of the first complete pass showed no peak
    for 17 of 28 images, whose pods had all run in an earlier part of the pass)."""
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    image = "ghcr.io/madbench/qc:0.1.0@sha256:" + "a" * 64
    nodes: dict[str, dict[str, Any]] = {
        "w.source-qc.shard(0)": {"phase": "Succeeded", "template": "source-qc-shard",
                                 "image": image, "memo": True, "attempts": [],
                                 "earlier": {"node": "w.source-qc.shard(0)", "image": image,
                                             "seconds": 40.0, "peak_rss_bytes": 3 * 2**30}},
        "w.source-qc-merge": {"phase": "Succeeded", "template": "source-qc-merge",
                              "image": image, "memo": False,
                              "attempts": [{"phase": "Succeeded", "seconds": 2.4,
                                            "peak_rss_bytes": 2**28}]},
    }
    results = {"full": WorkflowResult("w", "Succeeded", 3.0, nodes, [])}
    rec = build_records(state, results, {"full": {"source_qc": {"rows": 14, "rejected": 0}}},
                        ImageProvider(state, tmp_path), 3.0,
                        Options(work=tmp_path, workflows=("full",)), load_profile())
    qc = rec["images"]["qc"]
    assert qc["peak_rss_mb"] == 3072 and qc["pod_s"] == 42
    assert qc["pods_run"] == 1 and qc["pods_skipped"] == 1
    assert "| 1 / 1 | 42 | 3072 | — | — | ok |" in records_markdown(rec)


def test_the_record_adds_up_the_parts_of_a_pass_resumed_across_sessions(
        tmp_path: Path) -> None:
    """A pass of hours runs in parts; the record of the part that completed it said only
    that part's minutes (6.2 of about 141). Each part is in the state from its start, its
    wall time kept up to date at every save, so a part killed outright still counts; a run
    after a complete pass starts a new pass."""
    from madbench_common.cluster.rehearse import _wall_text, add_parts

    path = tmp_path / "state.json"
    state = State(path)
    state.begin_part()
    state.data["passes"][-1]["outcome"] = "complete"  # an earlier, complete pass
    state.data["passes"][-1]["wall_s"] = 999
    state._part = None
    state.begin_part()  # killed outright: nothing ends it; a later process reads the file
    state._part_t0 -= 120
    state.update_image("qc", image_id="sha")
    killed = State(path)
    assert killed.data["passes"][-1]["outcome"] == "killed"
    assert killed.data["passes"][-1]["wall_s"] == 120
    killed.begin_part()
    killed.end_part("interrupted")
    killed.begin_part()
    killed._part_t0 -= 60
    killed.end_part("complete")
    parts = killed.pass_parts()
    assert [p["outcome"] for p in parts] == ["killed", "interrupted", "complete"]
    rec = {"wall_s": 60, "complete": True}
    add_parts(rec, killed)
    # the headline is the pass's: every part added up; this part's is kept beside it
    assert rec["wall_s"] == 120 + parts[1]["wall_s"] + 60 and rec["part_wall_s"] == 60
    assert _wall_text(rec).startswith(f"{rec['wall_s'] / 60:.1f} min in 3 parts (this "
                                      "part 1.0 min)")
    again = State(path)
    again.begin_part()
    assert [p["outcome"] for p in again.pass_parts()] == ["killed"]  # a new pass


def test_a_build_that_cannot_fit_on_the_disk_stops_before_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch-2.0.1's base build peaks at 17 GiB; a pass started it at about 17 GiB free and
    failed minutes in with "no space left on device", twice (the second time 12 GB were
    temp folders that killed builds had left in /var/tmp). The check names the need from
    the lock's measured peaks, the free space and the leftovers, before the build."""
    import madbench_common.cluster.rehearse as rh

    lock = {"python-py311": {"build": {"disk_peak_gb": 4.8}},
            "torch-2.0.1-py311": {"build": {"disk_peak_gb": 17.0}},
            "deaf-salmonn": {"build": {"disk_peak_gb": 1.2}}}
    tmp = tmp_path / "var-tmp"
    (tmp / "buildah123456" / "layer").mkdir(parents=True)
    (tmp / "buildah123456" / "layer" / "blob").write_bytes(b"\0" * 4096)
    (tmp / "storage987").mkdir()
    (tmp / "unrelated").mkdir()
    monkeypatch.setattr(rh, "_BUILD_TMP", tmp)
    monkeypatch.setattr(rh, "_STORAGE", tmp_path / "no-store")
    gib = 2**30
    base_present = lambda s: s == "python-py311"  # noqa: E731
    problem = rh.disk_problem("deaf-salmonn", present=base_present, lock=lock,
                              free=lambda _p: 17 * gib)
    assert problem is not None
    assert "17.0 GiB free" in problem and "at least 20.2 GiB" in problem
    assert "torch-2.0.1-py311 17.0, deaf-salmonn 1.2" in problem and "python-py311" not in problem
    assert "2 temp folders" in problem and "buildah123456, storage987" in problem
    assert "unrelated" not in problem
    # with the base built only the leaf's peak counts; with room enough, no problem
    assert rh.disk_problem("deaf-salmonn", present=lambda s: True, lock=lock,
                           free=lambda _p: 17 * gib) is None
    assert rh.disk_problem("deaf-salmonn", present=base_present, lock=lock,
                           free=lambda _p: 21 * gib) is None
    assert rh.disk_problem("no-such-image", lock=lock, free=lambda _p: 0) is None

    state = State(tmp_path / "state.json")
    provider = ImageProvider(state, tmp_path)
    ran: list[Any] = []
    monkeypatch.setattr(rh, "disk_problem", lambda slug: f"image {slug}: no room")
    monkeypatch.setattr(provider, "_run_logged", lambda *a: ran.append(a))
    with pytest.raises(ConfigError, match="image deaf-salmonn: no room"):
        provider._run_build(["image", "deaf-salmonn"], tmp_path / "log", {}, "deaf-salmonn")
    assert ran == []


def test_a_quick_rerun_does_not_overwrite_the_run_that_did_the_work(tmp_path: Path) -> None:
    """A shard that finished before its stage did is run again on resume (the memo skips a
    pod only once its stage is done); it finds its output and ends in seconds. The memo
    keeps the larger measures, those of the run that did the work."""
    from madbench_common.cluster.rehearse import StateMemo

    state = State(tmp_path / "state.json")
    provider = ImageProvider(state, tmp_path)
    memo = StateMemo(state, "full", provider, lambda: {"omni_baichuan15"})
    pod = Pod(node="w.omni-baichuan15.shard(0)", template="omni-baichuan15-shard",
              image="ghcr.io/madbench/omni-baichuan15:0.1.0",
              argv=("madbench", "stage", "run", "--stage", "omni_baichuan15"),
              env=(), mounts=(), user=10001, group=10001)
    memo.record("k", pod, PodResult("Succeeded", 0, seconds=235.0,
                                    info={"peak_rss_bytes": 3074 * 2**20}))
    memo.record("k", pod, PodResult("Succeeded", 0, seconds=4.0,
                                    info={"peak_rss_bytes": 238 * 2**20}))
    entry = memo.entry("k", pod)
    assert entry["seconds"] == 235.0 and entry["peak_rss_bytes"] == 3074 * 2**20
    assert memo.done("k", pod)
    again = State(tmp_path / "state.json")  # and it is what a later session reads
    assert StateMemo(again, "full", provider, lambda: set()).entry("k", pod) == entry


def test_a_stage_left_with_no_row_makes_the_pass_incomplete(tmp_path: Path) -> None:
    """Every pod succeeded, but component_qc rejected every row: the stages after it ran on
    nothing, so the pass is not complete and the record names the stage. A stage given no
    row (features_references of the full profile, which has no model) is no fault."""
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    node = {"phase": "Succeeded", "image": "ghcr.io/madbench/qc:0.1.0", "memo": False,
            "attempts": [{"phase": "Succeeded", "peak_rss_bytes": 2**20}]}
    nodes = {"w.source-qc.shard(0)": {**node, "template": "source-qc-shard"},
             "w.component-qc.shard(0)": {**node, "template": "component-qc-shard"}}
    opts = Options(work=tmp_path, workflows=("full",))

    def records(rows: int, rejected: int) -> dict[str, Any]:
        results = {"full": WorkflowResult("w", "Succeeded", 10.0, nodes, [])}
        markers = {"full": {"source_qc": {"rows": 14, "rejected": 0},
                            "component_qc": {"rows": rows, "rejected": rejected}}}
        return build_records(state, results, markers, ImageProvider(state, tmp_path), 10.0,
                             opts, load_profile())

    good = records(188, 135)
    assert good["complete"] is True and good["empty_stages"] == []
    assert records(0, 0)["empty_stages"] == []
    bad = records(188, 188)
    assert bad["complete"] is False and bad["empty_stages"] == ["full:component_qc"]
    assert "`full:component_qc`" in records_markdown(bad)


# ------------------------------------------------------------------ in containers (opt-in)


@pytest.mark.image
@pytest.mark.slow
@pytest.mark.needs_tools("buildah", root=True)
def test_smoke_rehearsal_in_real_containers(tmp_path: Path) -> None:
    """Opt-in (MADBENCH_IMAGE_TEST=1, root, buildah): workflows/smoke.yaml through the executor,
    every pod in reference-cpu under the pod policy, inside the private namespace with
    SeaweedFS; ends with the report and a record. Builds reference-cpu when missing."""
    if os.environ.get("MADBENCH_IMAGE_TEST") != "1":
        pytest.skip("opt-in: set MADBENCH_IMAGE_TEST=1 (runs ~200 pods in reference-cpu)")
    from madbench_common.cluster.rehearse import rehearse

    records = tmp_path / "rehearsal.json"
    code = rehearse(Options(work=tmp_path / "work", workflows=("smoke",), keep_images=True,
                            records=records))
    rec = json.loads(records.read_text())
    assert code == 0, rec["workflows"]
    ref = rec["images"]["reference-cpu"]
    assert ref["rows_ok"] > 0 and ref["peak_rss_mb"] and ref["status"] == "ok"
    assert rec["workflows"]["smoke"]["phase"] == "Succeeded"
    # a second pass resumes: every pod is skipped by the memo
    code = rehearse(Options(work=tmp_path / "work", workflows=("smoke",), keep_images=True,
                            records=records))
    again = json.loads(records.read_text())["images"]["reference-cpu"]
    assert code == 0 and again["pods_run"] <= 1 and again["pods_skipped"] >= ref["pods"] - 1
    logs = "".join(p.read_text() for p in (tmp_path / "work" / "logs").rglob("*.log"))
    state = (tmp_path / "work" / "state.json").read_text()
    assert not re.search(r"AWS_SECRET_ACCESS_KEY=\w", logs + state)


def test_podresult_defaults() -> None:
    assert PodResult("Succeeded").info == {}


def test_a_pod_over_its_memory_limit_is_killed_and_reported(tmp_path: Path) -> None:
    """The memory cgroup enforces ``limits.memory`` (where this machine lets us make one)."""
    import subprocess
    import sys

    from madbench_common.cluster.rehearse import _Cgroup, _memory_cgroup

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


def test_command_line_overrides_reach_only_the_workflows_that_have_them(
        tmp_path: Path, nothing_built_here: None) -> None:
    from madbench_common.cluster.rehearse import _overrides

    profile = load_profile()
    flows = [f for f in profile.workflows if f.name in ("full", "deaf")]
    workflows = {f.name: Workflow.load(ROOT / f.file) for f in flows}
    opts = Options(work=tmp_path, params=("separate_model=ref-deepfilternet3",
                                          "separate_image=ghcr.io/madbench/reference-cpu:0.1.0"),
                   stage_sets=("source_qc.asr=ref-pocketsphinx", "deaf_judge.mode=rule"))
    params, sets = _overrides(opts, flows, workflows)
    assert sets == {"full": {"source_qc": {"asr": "ref-pocketsphinx"}},
                    "deaf": {"deaf_judge": {"mode": "rule"}}}
    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path)
    full = workflow_params(workflows["full"], flows[0], profile, provider,
                           {"stub_port": STUB_PORT}, params, sets["full"])
    assert full["separate_model"] == "ref-deepfilternet3"
    assert full["separate_image"]() == "ghcr.io/madbench/reference-cpu:0.1.0"  # nothing built
    assert json.loads(full["stage_params"])["source_qc"]["asr"] == "ref-pocketsphinx"
    assert json.loads(full["stage_params"])["source_qc"]["max_music_prob"] == 1.01  # profile kept
    deaf = workflow_params(workflows["deaf"], flows[1], profile, None, {"stub_port": STUB_PORT},
                           params, sets["deaf"])
    assert "separate_model" not in deaf
    with pytest.raises(ConfigError, match="no workflow of this rehearsal has a parameter"):
        _overrides(Options(work=tmp_path, params=("nope=1",)), flows, workflows)
    with pytest.raises(ConfigError, match="stage"):
        _overrides(Options(work=tmp_path, stage_sets=("nostage.k=1",)), flows, workflows)


def test_a_key_with_its_own_workflow_parameter_is_refused_in_stage_params() -> None:
    from madbench_common.benchmarks.deaf.graph import build_deaf_graph

    graph = build_deaf_graph()
    assert "voices" in graph["sic_tts"].workflow_params
    with pytest.raises(ConfigError, match="sic_tts_voices"):
        stage_overrides(graph, "deaf_judge", '{"sic_tts": {"voices": {"young_male": "v"}}}')


# keys stages read without declaring a default (madbench_common/benchmarks/deaf/stages_eval.py,
# judge)
_OPTIONAL_KEYS = {"max_new_tokens", "rpm", "model_args"}


@pytest.mark.parametrize("flow", ["smoke", "full", "deaf"])
def test_every_relaxation_of_the_profile_names_a_parameter_its_stage_has(flow: str) -> None:
    """A stage parameter renamed upstream would silently undo a relaxation: fail instead."""
    from madbench_common.cluster.rehearse import _graph_for
    from madbench_common.pipeline.stage import stage_params

    (wp,) = [f for f in load_profile().workflows if f.name == flow]
    graph = _graph_for(flow).profiled("full")
    for stage, values in wp.stage_params.items():
        declared = set(stage_params(graph[stage], {}))
        assert set(values) - declared <= _OPTIONAL_KEYS, (stage, set(values) - declared)


def test_an_interrupt_while_the_store_starts_leaves_no_server(tmp_path: Path) -> None:
    """Ctrl-C while SeaweedFS was still coming up left it running (found by a rehearsal
    interrupted in its first seconds): the start kills what it launched."""
    import subprocess
    import sys

    from madbench_common.cluster.sandbox import NamespacedS3

    class FakeNs:
        proc: subprocess.Popen[bytes] | None = None

        def popen(self, argv: list[str], kill_signal: int, **kwargs: Any
                  ) -> subprocess.Popen[bytes]:
            self.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            return self.proc

        def call(self, fn: Any, *args: Any) -> None:
            raise KeyboardInterrupt

    ns = FakeNs()
    s3 = NamespacedS3(tmp_path / "s3", ns)  # type: ignore[arg-type]
    with pytest.raises(KeyboardInterrupt):
        s3.start()
    assert ns.proc is not None and ns.proc.poll() is not None  # killed and reaped


def test_profile_fields_leave_json_braces_alone() -> None:
    from madbench_common.cluster.rehearse import _fill, _param_text

    text = _param_text({"base_url": "http://127.0.0.1:{stub_port}", "rpm": 0})
    assert json.loads(_fill(text, {"stub_port": 7})) == {"base_url": "http://127.0.0.1:7",
                                                         "rpm": 0}
    assert _fill("{other}", {"stub_port": 7}) == "{other}"
    assert _param_text(True) == "true" and _param_text(False) == "false"


def test_a_tree_unpacked_at_the_pinned_commit_needs_no_mirror(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stamp ``fetch_source`` writes is "<commit> <tree sha256>": such a tree is
    fetched (the check compared the whole line with the commit, so a machine that had
    built an image still asked for its mirror)."""
    import dataclasses

    from madbench_common.build import images as images_mod
    from madbench_common.build.upstream import STAMP

    real = images_mod.load_image("a2a-audiox")
    info = dataclasses.replace(real, folder=tmp_path)
    monkeypatch.setattr(images_mod, "load_image", lambda slug: info)
    monkeypatch.setenv("MADBENCH_UPSTREAM_GIT", str(tmp_path / "none" / "{owner}+{name}"))
    src = info.upstream_src[0]
    stamp = info.dir / ".upstream" / src.dest / STAMP
    stamp.parent.mkdir(parents=True)
    assert upstream_problems(["a2a-audiox"])  # nothing unpacked, no mirror
    stamp.write_text(f"{src.commit} {src.tree_sha256}\n")
    assert upstream_problems(["a2a-audiox"]) == []
    stamp.write_text(f"{'0' * 40} {src.tree_sha256}\n")  # another commit
    assert upstream_problems(["a2a-audiox"])


def test_a_resumed_pass_skips_no_pod_of_an_image_with_other_code(tmp_path: Path) -> None:
    """Pods run the pinned image id. An image the rehearsal used before is bound again on a
    resumed pass only while its madbench_common is this checkout's: after a code change
    its pods rerun (a resumed pass skipped component_qc after the CLAP fix)."""
    state = State(tmp_path / "state.json")
    state.update_image("qc", image_id="a" * 64, code_digest="old")
    provider = ImageProvider(state, tmp_path)
    provider._seen["qc"] = None  # not on the machine any more (removed after its pods)
    provider._digest = "new"
    assert provider.binding("qc", "ghcr.io/madbench/qc:0.1.0") is None
    assert provider.pinned("ghcr.io/madbench/qc:0.1.0")() == "ghcr.io/madbench/qc:0.1.0"
    provider._digest = "old"
    assert provider.binding("qc", "ghcr.io/madbench/qc:0.1.0") == "a" * 64
    # a local build the state has not checked is not trusted either
    provider._seen["qc"] = "b" * 64
    assert provider.binding("qc", "ghcr.io/madbench/qc:0.1.0") is None
    state.update_image("qc", image_id="b" * 64, code_digest="old")
    assert provider.binding("qc", "ghcr.io/madbench/qc:0.1.0") == "b" * 64


def test_the_profile_s_model_args_are_constructor_arguments_of_the_full_models() -> None:
    """A generator's ``model_args`` (diffusion steps) must name an argument of the class the
    full graph loads there, or the pod fails at load (exit 3) an hour into a pass."""
    import importlib
    import inspect

    from madbench_common.cluster.rehearse import _graph_for
    from madbench_common.models.registry import REGISTRY

    (wp,) = [f for f in load_profile().workflows if f.name == "full"]
    graph = _graph_for("full").profiled("full")
    checked = 0
    for stage, values in wp.stage_params.items():
        args = values.get("model_args")
        if not args:
            continue
        slug = graph[stage].model
        module, _, name = REGISTRY[slug].target.partition(":")
        accepted: set[str] = set()
        for cls in getattr(importlib.import_module(module), name).__mro__:  # **kwargs → base
            params = inspect.signature(cls.__init__).parameters
            accepted |= set(params)
            if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                break
        assert set(args) <= accepted, (stage, slug, set(args) - accepted)
        checked += 1
    assert checked >= 4


def test_a_generator_stage_passes_its_model_args_to_the_model(tmp_path: Path) -> None:
    from madbench_common.models.registry import load_model_with, model_args

    assert model_args('{"steps": 5}') == {"steps": 5} and model_args("") == {}
    with pytest.raises(ConfigError, match="not JSON"):
        model_args("{steps")
    with pytest.raises(ConfigError, match=r"model_args\.steps"):
        load_model_with("ref-layered-t2a", {"steps": [5]})
    with pytest.raises(ConfigError, match="no_such_argument"):
        load_model_with("ref-layered-t2a", {"no_such_argument": 1})
    graph = build_graph()
    assert all(graph[f"env_{b}_{s}"].params["model_args"] == {}
               for b in ENV_BRANCHES for s in GENERATOR_SLOTS)


def test_an_interrupted_pass_still_records_what_it_ran(tmp_path: Path) -> None:
    """A session's end stops a pass of hours with SIGTERM: the record of that pass keeps
    the pods that finished (their images, peaks) and says it was interrupted."""
    import signal

    from tests.cluster.test_argo_local import Recorder, container, workflow

    def rule(pod: Pod, attempt: int) -> PodResult:
        if pod.node.endswith(".b"):
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C: the main thread stops the run
            time.sleep(1)
        return PodResult("Succeeded", 0, info={"peak_rss_bytes": 2**27})

    wf = workflow([{"name": "a", "template": "a-shard"},
                   {"name": "b", "template": "b-shard", "dependencies": ["a"]}],
                  [container("a-shard", ["a"]), container("b-shard", ["b"])])
    ex = Executor(wf, runner=Recorder(rule), workers=1, name="w")
    # a shell starts a background job (`make test &`) with SIGINT ignored, and Python then
    # installs no handler: the raised SIGINT did nothing and the run finished
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            ex.run()
    finally:
        signal.signal(signal.SIGINT, previous)
    result = ex.snapshot("Interrupted", 2.0)
    assert result.phase == "Interrupted"
    assert result.nodes["w.a"]["phase"] == "Succeeded"
    assert result.nodes["w.a"]["attempts"][0]["peak_rss_bytes"] == 2**27
    state = State(tmp_path / "state.json")
    rec = build_records(state, {"full": result}, {}, ImageProvider(state, tmp_path), 2.0,
                        Options(work=tmp_path, workflows=("full",)), load_profile())
    assert rec["complete"] is False
    assert rec["images"]["reference-cpu"]["peak_rss_mb"] == 128
    rec["interrupted"] = "signal 15"
    assert "Interrupted (signal 15)" in records_markdown(rec)


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


def test_a_second_pass_in_one_work_folder_is_refused(tmp_path: Path) -> None:
    """Two passes in one folder would share its store, state and working containers
    (the second would remove the first's containers as a killed pass's leftovers)."""
    import fcntl
    import signal

    from madbench_common.cluster.rehearse import rehearse

    tmp_path.joinpath(".lock").touch()
    with open(tmp_path / ".lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ConfigError, match="another rehearsal is using this work folder"):
            rehearse(Options(work=tmp_path, workflows=("nope",)))
    # free again: the pass starts (and stops at the unknown workflow, not at the lock)
    handler = signal.getsignal(signal.SIGTERM)  # a pass that starts sets its own
    try:
        with pytest.raises(ConfigError, match="no workflow"):
            rehearse(Options(work=tmp_path, workflows=("nope",)))
    finally:
        signal.signal(signal.SIGTERM, handler)


def test_pods_and_probes_name_their_containers_after_the_work_folder(tmp_path: Path) -> None:
    """A killed pass leaves buildah working containers that block ``buildah rmi`` of their
    images: every container a pass makes carries the work folder's prefix, by which the
    next pass removes them."""
    from madbench_common.build.containers import container_name

    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path)
    other = ImageProvider(State(tmp_path / "b" / "state.json"), tmp_path / "b")
    assert provider.prefix.startswith("madbench-rehearsal-") and provider.prefix != other.prefix
    name = provider.container("rehearsal-full.main.features(det-batfd)(0)", "1")
    assert name.startswith(provider.prefix)
    assert re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*", name)
    long = provider.container("x" * 500, "0")
    assert long.startswith(provider.prefix) and len(long) <= 120
    assert container_name("a" * 300) != container_name("a" * 299 + "b")


@pytest.mark.needs_tools("buildah", root=True)
def test_a_killed_pass_s_containers_are_removed_by_name(tmp_path: Path) -> None:
    """Real buildah: a working container left under the prefix goes; another's stays."""
    import subprocess

    from madbench_common.build.containers import remove_containers

    prefix = ImageProvider(State(tmp_path / "s.json"), tmp_path).prefix
    mine, theirs = f"{prefix}pod-0", f"other-{prefix}pod-0"
    for name in (mine, theirs):
        subprocess.run(["buildah", "from", "--name", name, "scratch"], check=True,
                       capture_output=True)
    try:
        assert remove_containers(prefix) == [mine]
        names = subprocess.run(["buildah", "containers", "--format", "{{.ContainerName}}"],
                               capture_output=True, text=True, check=True).stdout.split()
        assert mine not in names and theirs in names
    finally:
        subprocess.run(["buildah", "rm", mine, theirs], capture_output=True)


class _CountingRunner:
    """Every pod succeeds at once; counts the pods per image slug."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def prepare(self, pod: Pod) -> None:
        pass

    def run(self, pod: Pod, attempt: int, cancel: threading.Event) -> PodResult:
        self.ran.append(image_slug(pod.image.split("@", 1)[0])[0])
        return PodResult("Succeeded", 0, seconds=1.0)


def _pass(tmp_path: Path, ids: dict[str, str], recipes: dict[str, str] | None = None
          ) -> tuple[_CountingRunner, int]:
    """One execution of the smoke workflow as the rehearsal makes it: parameters pinned to
    ``ids`` (the local builds), the state memo, the provider's pod identity."""
    from madbench_common.cluster.rehearse import StateMemo

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
    runner = _CountingRunner()
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
    assert first.ran and skipped == 0
    again, skipped = _pass(tmp_path, {"reference-cpu": "b" * 64})  # rebuilt: a new id
    exit_pods = len(again.ran)
    assert skipped == len(first.ran) - exit_pods and exit_pods <= 1  # only onExit reruns
    changed, skipped = _pass(tmp_path, {"reference-cpu": "b" * 64},
                             {"reference-cpu": "another recipe"})
    assert skipped == 0 and len(changed.ran) == len(first.ran)


def test_the_recipe_follows_the_build_inputs_and_not_the_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What changes a recipe: the image's folder, a parent's, the code digest (leaves
    only); what does not: an sbom (a build output) or another image's folder."""
    from madbench_common.cluster import rehearse

    base = rehearse.image_recipe("reference-cpu", "code")
    assert base and base == rehearse.image_recipe("reference-cpu", "code")
    assert rehearse.image_recipe("reference-cpu", "other code") != base
    parent = rehearse.image_recipe("torch-2.13.0-py311", "code")
    assert parent == rehearse.image_recipe("torch-2.13.0-py311", "other code")  # no code in it
    assert rehearse.image_recipe("no-such-image", "code") is None

    fake_root = tmp_path / "root"
    shutil.copytree(ROOT / "images", fake_root / "images",
                    ignore=shutil.ignore_patterns(".upstream"))
    shutil.copy(ROOT / "pyproject.toml", fake_root)
    monkeypatch.setattr(rehearse, "ROOT", fake_root)
    from madbench_common.build import images as images_mod

    monkeypatch.setattr(images_mod, "IMAGES", fake_root / "images", raising=False)
    assert rehearse.image_recipe("reference-cpu", "code") == base
    (fake_root / "images" / "reference-cpu" / "sbom.cdx.json").write_text("{}")
    (fake_root / "images" / "qc" / "requirements.lock").write_text("x")
    assert rehearse.image_recipe("reference-cpu", "code") == base
    chain = images_mod.chain(images_mod.load_image("reference-cpu"))
    parent_lock = fake_root / "images" / chain[-2].slug / "requirements.lock"
    parent_lock.write_text(parent_lock.read_text() + "\n# changed\n")
    assert rehearse.image_recipe("reference-cpu", "code") != base


@pytest.mark.parametrize("built_by_rehearsal", [True, False])
def test_a_rebuild_removes_the_build_it_superseded(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path,
                                                    built_by_rehearsal: bool) -> None:
    """A pass resumed on new code rebuilt every image and left the old builds untagged on
    disk (four 6-8 GB images at 665c969): the rebuild removes the rehearsal's own old
    build, under the build lock; an image it found on the machine stays."""
    import subprocess

    from madbench_common.cluster import rehearse

    calls: list[list[str]] = []

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    old, new = "a" * 64, "b" * 64
    ids = iter([old, new])
    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setenv("MADBENCH_BUILD_LOCK", str(tmp_path / "build.lock"))
    monkeypatch.setattr(rehearse, "_image_id", lambda ref: next(ids))
    state = State(tmp_path / "state.json")
    if built_by_rehearsal:
        state.update_image("det-mine", build_image_id=old)
    lines: list[str] = []
    provider = ImageProvider(state, tmp_path, log=lines.append)
    monkeypatch.setattr(provider, "_fresh", lambda slug, image_id: image_id == new)
    monkeypatch.setattr(provider, "_build", lambda slug: 1.0)
    monkeypatch.setattr(provider, "_describe", lambda slug, image_id: None)
    monkeypatch.setattr(provider, "_weights", lambda slug, image_id: None)
    monkeypatch.setattr(provider, "recipe", lambda slug: "recipe")
    assert provider._ensure("det-mine", "ghcr.io/madbench/det-mine:0.1.0") == new
    assert state.image("det-mine")["build_image_id"] == new
    if built_by_rehearsal:
        assert calls == [["buildah", "rmi", old]]
        assert any("superseded build aaaaaaaaaaaa" in line for line in lines)
    else:
        assert calls == []


def _image_test_provider(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                         lock: dict[str, dict[str, Any]], outcome: dict[str, Any] | None,
                         image_tests: bool = True) -> tuple[ImageProvider, list[list[str]],
                                                            list[str]]:
    """A provider whose build is faked and whose image test 'records' ``outcome`` in a lock
    held in ``lock`` (the real test needs a built image)."""
    from madbench_common.cluster import rehearse

    runs: list[list[str]] = []
    lines: list[str] = []

    def run_logged(args: list[str], log: Path, env: dict[str, str], what: str) -> None:
        runs.append(list(args))
        assert env["MADBENCH_RUN_ENGINE"] == "buildah" and log.name.startswith("image-test-")
        if outcome is not None:
            lock[args[-1]] = outcome
            if outcome["result"] != "pass":
                raise ConfigError(f"{what} failed (exit 1; log {log}):\nerror: no rows")

    monkeypatch.setattr(rehearse, "_lock_image_test", lambda slug: dict(lock.get(slug, {})))
    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path, log=lines.append,
                             image_tests=image_tests)
    monkeypatch.setattr(provider, "_ensure", lambda slug, ref: "b" * 64)
    monkeypatch.setattr(provider, "_run_logged", run_logged)
    return provider, runs, lines


def test_image_tests_run_each_image_test_once_on_the_image_the_pods_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """IMAGE_TESTS=1: the image test of the image the pods will run, before they do; a
    resumed pass whose lock holds a pass of the same image id does not run it again, one
    of another image id (a rebuild) does."""
    passed = {"result": "pass", "wall_s": 41, "image_id": "sha256:" + "b" * 64,
              "stages": {"speech_tts_same": "2 rows, 0 rejected"}}
    lock: dict[str, dict[str, Any]] = {}
    provider, runs, lines = _image_test_provider(monkeypatch, tmp_path, lock, passed)
    assert provider.ensure("ghcr.io/madbench/tts-f5:0.1.0") == "b" * 64
    assert runs == [["-m", "madbench_common.testing.imagetest", "test", "tts-f5"]]
    assert provider.state.image("tts-f5")["image_test"] == {
        "result": "pass", "wall_s": 41, "image_id": "b" * 64,
        "stages": {"speech_tts_same": "2 rows, 0 rejected"}}
    assert any("image tts-f5: image test passed in 41 s" in line for line in lines)
    provider.ensure("ghcr.io/madbench/tts-f5:0.1.0")  # ready: not again in this pass
    assert len(runs) == 1

    resumed, runs2, _ = _image_test_provider(monkeypatch, tmp_path, lock, passed)
    resumed.ensure("ghcr.io/madbench/tts-f5:0.1.0")
    assert runs2 == []  # the lock holds a pass of this very image
    lock["tts-f5"] = {**passed, "image_id": "sha256:" + "c" * 64}
    rebuilt, runs3, _ = _image_test_provider(monkeypatch, tmp_path, lock, passed)
    rebuilt.ensure("ghcr.io/madbench/tts-f5:0.1.0")
    assert len(runs3) == 1


def test_a_failed_image_test_is_recorded_and_the_pods_still_run(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    failed = {"result": "fail", "wall_s": 9, "image_id": "b" * 64,
              "reason": "speech_tts_same in localhost/madbench/tts-f5:0.1.0: no accepted rows"}
    provider, runs, lines = _image_test_provider(monkeypatch, tmp_path, {}, failed)
    assert provider.ensure("ghcr.io/madbench/tts-f5:0.1.0") == "b" * 64
    assert "tts-f5" in provider.ready and len(runs) == 1
    test = provider.state.image("tts-f5")["image_test"]
    assert test["result"] == "fail" and "no accepted rows" in test["reason"]
    assert any("image tts-f5: its image test FAILED" in line for line in lines)
    # a test that died before recording (killed, engine gone) is a failure, not a pass
    silent, _, _ = _image_test_provider(monkeypatch, tmp_path / "s", {}, None)
    (tmp_path / "s").mkdir()
    silent.ensure("ghcr.io/madbench/tts-f5:0.1.0")
    assert silent.state.image("tts-f5")["image_test"]["result"] == "fail"
    assert "recorded nothing" in silent.state.image("tts-f5")["image_test"]["reason"]


def test_image_tests_are_off_by_default_and_skip_images_without_one(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    passed = {"result": "pass", "wall_s": 1, "image_id": "b" * 64, "stages": {}}
    off, runs, _ = _image_test_provider(monkeypatch, tmp_path, {}, passed, image_tests=False)
    off.ensure("ghcr.io/madbench/tts-f5:0.1.0")
    assert runs == [] and "image_test" not in off.state.image("tts-f5")
    on, runs, _ = _image_test_provider(monkeypatch, tmp_path / "o", {}, passed)
    (tmp_path / "o").mkdir()
    on.ensure("ghcr.io/madbench/not-a-folder-here:1")  # an image with no folder here
    assert runs == []


def test_run_logged_runs_python_with_its_output_in_the_log(tmp_path: Path) -> None:
    """The subprocess builds and image tests go through: output in the log, a failure
    names the log and ends with its tail."""
    import sys

    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path, log=lambda _: None,
                             python=sys.executable)
    log = tmp_path / "ok.log"
    provider._run_logged(["-c", "print('made it')"], log, dict(os.environ), "a check")
    assert log.read_text() == "made it\n"
    with pytest.raises(ConfigError, match=r"a check failed \(exit 3; log .*bad.log\):\nboom"):
        provider._run_logged(["-c", "import sys; print('boom'); sys.exit(3)"],
                             tmp_path / "bad.log", dict(os.environ), "a check")


def test_the_record_shows_the_image_test_of_the_image_the_pods_ran(tmp_path: Path) -> None:
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    state.update_image("qc", image_id="a" * 64, image_test={
        "result": "pass", "wall_s": 33, "image_id": "a" * 64, "stages": {}})
    state.update_image("tts-f5", image_id="d" * 64, image_test={  # an older build's test
        "result": "pass", "wall_s": 30, "image_id": "c" * 64, "stages": {}})
    nodes = {f"w.{stage}.shard(0)": {"phase": "Succeeded", "template": f"{stage}-shard",
                                     "image": f"ghcr.io/madbench/{slug}:0.1.0", "memo": False,
                                     "attempts": [{"phase": "Succeeded", "seconds": 1.0}]}
             for stage, slug in (("source-qc", "qc"), ("speech-tts-same-a", "tts-f5"))}
    results = {"full": WorkflowResult("w", "Succeeded", 3.0, nodes, [])}
    rec = build_records(state, results, {"full": {}}, ImageProvider(state, tmp_path), 3.0,
                        Options(work=tmp_path, workflows=("full",), image_tests=True),
                        load_profile())
    assert rec["images"]["qc"]["image_test"]["result"] == "pass"
    assert rec["images"]["tts-f5"]["image_test"] is None
    assert rec["profile"]["image_tests"] is True
    text = records_markdown(rec)
    assert "| pass (33 s) | ok |" in text and "| — | ok |" in text
    assert "Image tests (`make image-test` of the image the pods ran): 1 passed, 0 failed." \
        in text


# ------------------------------------------------------------------ what the record says


def _node(template: str, image: str, gpu: int = 0, **extra: Any) -> dict[str, Any]:
    return {"phase": "Succeeded", "template": template, "image": image, "gpu": gpu,
            "memo": False, "attempts": [{"phase": "Succeeded", "seconds": 1.0}], **extra}


def test_every_image_whose_pods_request_a_gpu_is_recorded_as_run_on_the_cpu(
        tmp_path: Path) -> None:
    """27 of 28 images request nvidia.com/gpu; the record said so for one (the field came
    only from attempts that ran in this part, and memo entries dropped it)."""
    from madbench_common.cluster.argo_local import WorkflowResult
    from madbench_common.cluster.rehearse import StateMemo
    from tests.cluster.test_argo_local import Recorder, container, workflow

    # the executor's node snapshot carries the template's GPU request
    gpu = container("gpu", ["x"])
    gpu["container"]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    wf = workflow([{"name": "a", "template": "gpu"}, {"name": "b", "template": "cpu"}],
                  [gpu, container("cpu", ["y"])])
    nodes = Executor(wf, runner=Recorder(), name="w").run().nodes
    assert (nodes["w.a"]["gpu"], nodes["w.b"]["gpu"]) == (1, 0)

    state = State(tmp_path / "state.json")
    provider = ImageProvider(state, tmp_path)
    memo = StateMemo(state, "full", provider, lambda: {"omni_baichuan15"})
    pod = Pod(node="w.omni-baichuan15.shard(0)", template="omni-baichuan15-shard",
              image="ghcr.io/madbench/omni-baichuan15:0.1.0",
              argv=("madbench", "stage", "run", "--stage", "omni_baichuan15"),
              env=(), mounts=(), user=10001, group=10001, gpu=1)
    memo.record("k", pod, PodResult("Succeeded", 0, seconds=3.0))
    assert memo.entry("k", pod)["gpu_requested"] is True

    ran = _node("omni-baichuan15-shard", "ghcr.io/madbench/omni-baichuan15:0.1.0", gpu=1)
    skipped = {**_node("det-batfd-shard", "ghcr.io/madbench/det-batfd:0.1.0", gpu=1),
               "memo": True, "attempts": [], "earlier": {"seconds": 5.0}}  # an old entry
    cpu = _node("source-qc-shard", "ghcr.io/madbench/reference-cpu:0.1.0")
    results = {"full": WorkflowResult("w", "Succeeded", 3.0, {"w.a": ran, "w.b": skipped,
                                                              "w.c": cpu}, [])}
    rec = build_records(state, results, {"full": {}}, provider, 3.0,
                        Options(work=tmp_path, workflows=("full",)), load_profile())
    flags = {slug: r["gpu_requested_ran_on_cpu"] for slug, r in rec["images"].items()}
    assert flags == {"omni-baichuan15": True, "det-batfd": True, "reference-cpu": False}
    assert "| on CPU |" in records_markdown(rec)


def test_stand_ins_and_the_api_stub_are_marked_per_stage(tmp_path: Path) -> None:
    """The banner's "tiny checkpoint in the real release layout" does not hold for the
    stand-ins of hub-only code (DF-Arena, MiniCPM-o) nor for API models on the stub."""
    from madbench_common.cluster.argo_local import WorkflowResult
    from madbench_common.cluster.rehearse import MODEL_KINDS, model_kind

    state = State(tmp_path / "state.json")
    full = {"w.1": _node("features-det-df-arena-shard", "ghcr.io/madbench/det-df-arena:0.1"),
            "w.2": _node("omni-minicpmo45-shard", "ghcr.io/madbench/omni-minicpmo45:0.1"),
            "w.3": _node("omni-baichuan15-shard", "ghcr.io/madbench/omni-baichuan15:0.1"),
            "w.4": _node("ingest-shard", "ghcr.io/madbench/reference-cpu:0.1")}
    deaf = {"d.1": _node("answer-gemini-25-flash-shard", "ghcr.io/madbench/deaf-tf5:0.1"),
            "d.2": _node("answer-qwen2-audio-shard", "ghcr.io/madbench/deaf-tf5:0.1"),
            "d.3": _node("bsc-speech-shard", "ghcr.io/madbench/reference-cpu:0.1"),
            "d.4": _node("deaf-judge-shard", "ghcr.io/madbench/reference-cpu:0.1")}
    results = {"full": WorkflowResult("w", "Succeeded", 3.0, full, []),
               "deaf": WorkflowResult("d", "Succeeded", 3.0, deaf, [])}
    rec = build_records(state, results, {}, ImageProvider(state, tmp_path), 3.0,
                        Options(work=tmp_path, workflows=("full", "deaf")), load_profile())
    kinds = {k: v for r in rec["images"].values() for k, v in r["models"].items()}
    assert kinds == {"full:features_det_df_arena": "stand_in",
                     "full:omni_minicpmo45": "stand_in",
                     "full:omni_baichuan15": "tiny_random", "full:ingest": "reference",
                     "deaf:answer_gemini_25_flash": "api_stub",
                     "deaf:answer_qwen2_audio": "tiny_random",
                     "deaf:bsc_speech": "api_stub",  # its workflow parameter names the stub
                     "deaf:deaf_judge": "api_stub"}
    assert set(kinds.values()) <= set(MODEL_KINDS)
    text = records_markdown(rec)
    assert "features_det_df_arena‡" in text and "omni_minicpmo45‡" in text
    assert "answer_gemini_25_flash§, answer_qwen2_audio |" in text
    assert "‡ (stand-in code" in rec["note"] and "§ (an API model" in rec["note"]
    assert model_kind("det-df-arena", "features_det_df_arena", None) == "stand_in"


def test_the_record_lists_the_relaxations_and_the_rejection_reasons_per_stage(
        tmp_path: Path) -> None:
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    profile = load_profile()
    nodes = {"w.1": _node("tts-indextts2-shard", "ghcr.io/madbench/tts-indextts2:0.1", gpu=1),
             "w.2": _node("source-qc-shard", "ghcr.io/madbench/reference-cpu:0.1")}
    markers = {"full": {
        "tts_indextts2": {"rows": 26, "rejected": 17, "budget": {"max_failed_fraction": 0.05},
                          "reasons": {"generation_failed": 9, "device_error": 1,
                                      "too_long": 7}},
        "source_qc": {"rows": 14, "rejected": 0, "reasons": {}}}}
    rec = build_records(state, {"full": WorkflowResult("w", "Succeeded", 3.0, nodes, [])},
                        markers, ImageProvider(state, tmp_path), 3.0,
                        Options(work=tmp_path, workflows=("full",)), profile)
    tts = rec["images"]["tts-indextts2"]["stages"]["full:tts_indextts2"]
    assert tts["reasons"] == {"generation_failed": 9, "device_error": 1, "too_long": 7}
    assert tts["faults"] == 1 and tts["max_failed_fraction"] == 0.05
    assert rec["rejections"] == {"full:tts_indextts2": tts["reasons"]}
    relax = {r["name"]: r["value"] for r in rec["relaxations"]}
    assert relax["shards"] == profile.shards == 2
    assert relax["gpu_deadline_scale"] == profile.cpu_deadline_scale == 6
    assert relax["gpu_on_cpu"] is True and "stop_on_failure" not in relax  # Argo's scheduling
    assert "component_qc" in relax["full:stage_params"]
    text = records_markdown(rec)
    assert "- `shards`: every <stage>_shards workflow parameter set to 2" in text
    assert "multiplied by 6" in text
    assert "- `full:tts_indextts2`: **device_error** 1, generation_failed 9, too_long 7" in text
