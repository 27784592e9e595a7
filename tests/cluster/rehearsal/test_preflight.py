"""The checks a pass makes before it builds anything: every pod of the rendered workflows
resolves in a dry run and passes its checks, and the upstream sources of the images are
fetched or mirrored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cluster.argo_local import Pod, Workflow
from madbench_common.cluster.lint import check_pods, check_target, image_slug
from madbench_common.cluster.rehearsal.preflight import upstream_problems
from madbench_common.core.errors import ConfigError
from tests.cluster.rehearsal.support import ROOT, WORKFLOWS, dry


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
    # deaf.yaml may name SALMONN's image and module; any other problem is new
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


def test_a_missing_upstream_mirror_is_named(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    from madbench_common.imagefactory.images import list_images

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


def test_a_tree_unpacked_at_the_pinned_commit_needs_no_mirror(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stamp ``fetch_source`` writes is "<commit> <tree sha256>": such a tree is
    fetched (the check compared the whole line with the commit, so a machine that had
    built an image still asked for its mirror)."""
    import dataclasses

    from madbench_common.imagefactory import images as images_mod
    from madbench_common.imagefactory.upstream import STAMP

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
