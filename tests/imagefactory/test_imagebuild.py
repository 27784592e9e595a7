"""Tests for the image build and image-test machinery that need no build engine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.imagefactory import imagebuild
from madbench_common.imagefactory.imagebuild import BuildRecord, NoEngine, build_lock
from madbench_common.testing.imagetest import _host_stages, demo_sources, pipeline_of

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("MADBENCH_HOST_CA", str(ca))
    return ca


def test_buildah_command_uses_chroot_docker_format_and_the_ca_secret(fake_ca: Path) -> None:
    cmd = imagebuild._build_cmd("buildah", "reference-cpu", "localhost/madbench/x:1",
                                {"BASE_IMAGE": "localhost/madbench/base-py311:0.1.0"})
    text = " ".join(cmd)
    assert cmd[:2] == ["buildah", "bud"]
    for flag in ("--isolation chroot", "--format docker", "--layers", "--force-rm",
                 f"--secret id=hostca,src={fake_ca}",
                 "--build-arg BASE_IMAGE=localhost/madbench/base-py311:0.1.0",
                 f"-f {ROOT / 'images' / 'reference-cpu' / 'Dockerfile'}"):
        assert flag in text, flag
    assert cmd[-1] == str(ROOT)
    docker = imagebuild._build_cmd("docker", "base-py311", "t", {})
    assert docker[:2] == ["docker", "build"] and "--secret" in docker


@pytest.mark.needs_tools("buildah", root=True)
def test_a_failed_buildah_build_leaves_no_working_container(tmp_path: Path,
                                                            fake_ca: Path) -> None:
    """The build command's own flags on a Dockerfile whose RUN fails (FROM scratch: no
    base image needed): without --force-rm buildah kept the working container."""
    def containers() -> set[str]:
        """Working containers of no image (FROM scratch): none of another test's or pod's."""
        out = subprocess.run(["buildah", "containers", "--notruncate", "--format",
                              "{{.ContainerID}} {{.ImageName}}"],
                             capture_output=True, text=True, check=True).stdout
        return {f[0] for line in out.splitlines() if (f := line.split())[1:] == ["scratch"]}

    (tmp_path / "Dockerfile").write_text("FROM scratch\nRUN false\n")
    cmd = imagebuild._build_cmd("buildah", "reference-cpu", "t", {})
    flags = cmd[:cmd.index("-f")]
    before = containers()
    build = subprocess.run([*flags, "-f", str(tmp_path / "Dockerfile"), "-t",
                            f"localhost/madbench-test/force-rm-{os.getpid()}:1", str(tmp_path)],
                           capture_output=True, text=True)
    assert build.returncode != 0
    left = containers() - before
    subprocess.run(["buildah", "rm", *left], capture_output=True)
    assert not left, f"the failed build left {left}"


def test_no_engine_is_a_skip_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(imagebuild.shutil, "which", lambda _name: None)
    with pytest.raises(NoEngine, match="install buildah"):
        imagebuild.engine()
    assert imagebuild._main(["image", "reference-cpu"]) == 77


def test_missing_parent_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(imagebuild, "image_exists", lambda _ref, _eng=None: False)
    with pytest.raises(ConfigError, match=r"make image IMAGE=torch-2\.13\.0-py311"):
        imagebuild._build_args("reference-cpu", "debootstrap")


def test_build_arguments_keep_the_bases_cached_across_commits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A base's REVISION is the last commit that touched its chain (so an unrelated commit
    leaves it, and every layer on it, cached); an image with madbench_common gets HEAD and
    the weights catalogue's sha256."""
    monkeypatch.setattr(imagebuild, "image_exists", lambda _ref, _eng=None: True)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    torch = imagebuild._build_args("torch-2.13.0-py311", "registry")
    model = imagebuild._build_args("reference-cpu", "registry")
    assert torch["BASE_IMAGE"] == "localhost/madbench/python-py311:0.1.0"
    assert "WEIGHTS_SHA256" not in torch
    assert model["BASE_IMAGE"] == "localhost/madbench/torch-2.13.0-py311:0.1.0"
    assert model["REVISION"] == head and len(model["WEIGHTS_SHA256"]) == 64
    assert imagebuild._build_args("python-py311", "registry").keys() == {"REVISION", "VERSION"}


def test_layer_sizes_come_from_the_layer_store(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "overlay-layers").mkdir()
    (tmp_path / "overlay-layers" / "layers.json").write_text(
        '[{"id": "x", "diff-digest": "sha256:aa", "diff-size": 7},'
        ' {"id": "y", "diff-digest": "sha256:bb", "diff-size": 5}]')
    monkeypatch.setattr(imagebuild, "_storage_root", lambda _eng: str(tmp_path))
    monkeypatch.setattr(imagebuild, "_run", lambda _cmd, _what: (
        '{"OCIv1": {"rootfs": {"diff_ids": ["sha256:bb", "sha256:aa"]}}}'))
    assert imagebuild.image_layers("ref", "buildah") == [("sha256:bb", 5), ("sha256:aa", 7)]


def test_build_lock_serialises_and_says_whom_it_waits_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    lock = tmp_path / "build.lock"
    monkeypatch.setenv("MADBENCH_BUILD_LOCK", str(lock))
    code = ("import time\nfrom madbench_common.imagefactory.imagebuild import build_lock\n"
            "with build_lock('other-image'):\n    print('held', flush=True)\n    time.sleep(2)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    start = time.perf_counter()
    with build_lock("mine"):
        waited = time.perf_counter() - start
        assert "building mine" in lock.read_text()
    holder.wait(timeout=30)
    assert waited > 0.5
    err = capsys.readouterr().err
    assert "waiting for the image build lock" in err and "building other-image" in err


def test_build_record_for_the_lock() -> None:
    rec = BuildRecord("s", "localhost/madbench/s:0.1.0", "sha256:" + "a" * 64, 3 * 2**30, 61.4,
                      int(2.5 * 2**30), 2, "buildah 1.28.2", "2.13.0+cu130", "13.0")
    entry = rec.as_lock()
    assert entry["size_mb"] == 3072 and entry["build_s"] == 61 and entry["disk_peak_gb"] == 2.5
    assert entry["torch"] == "2.13.0+cu130" and entry["cuda"] == "13.0"
    rec = BuildRecord("s", "r", "sha256:" + "a" * 64, 12, 1.0, 0, 0, "buildah", "", "",
                      commit="abc", parent="python-py311", steps=9,
                      layers=(("sha256:" + "b" * 64, 12),))
    entry = rec.as_lock()
    assert entry["layers"] == ["sha256:" + "b" * 64 + " 12"] and entry["commit"] == "abc"


def test_image_test_runs_upstream_stages_on_the_host() -> None:
    assert _host_stages(["ingest"]) == []
    assert _host_stages(["separate"]) == ["ingest"]
    assert _host_stages(["split"]) == ["ingest", "separate", "source_qc"]
    assert _host_stages(["separate", "source_qc"]) == ["ingest"]


def test_image_test_of_deaf_stages_runs_the_deaf_graph() -> None:
    """A DEAF answer stage's image test makes the stimuli and trials on the host and runs
    the stage in the image as `madbench deaf stage`."""
    deaf = pipeline_of(["answer_salmonn"])
    assert deaf.command == ("madbench", "deaf") and not deaf.sources
    assert _host_stages(["answer_salmonn"]) == [
        "deaf_sentences", "deaf_envlib", "esc_tts_a", "esc_tts_b", "esc_tts_c", "bsc_speech",
        "bsc_mix", "sic_tts", "deaf_trials"]
    assert pipeline_of(["separate"]).command == ("madbench",)
    with pytest.raises(ConfigError, match="not all stages"):
        pipeline_of(["separate", "answer_salmonn"])


@pytest.mark.slow
def test_deaf_image_test_host_part_gives_the_answer_stage_its_queries(tmp_path: Path) -> None:
    """The host half of `make image-test IMAGE=deaf-salmonn`: stimuli and trials from the
    committed four sentences, so the answer stage in the image has a few dozen queries."""
    from madbench_common.benchmarks.deaf.stages_eval import AnswerStage
    from madbench_common.core.store import RunStore, open_store
    from madbench_common.imagefactory.images import load_image
    from madbench_common.pipeline.stage import make_context
    from madbench_common.testing.imagetest import _run_on_host, image_test_params

    spec = load_image("deaf-salmonn").image_test
    assert spec is not None
    pipeline = pipeline_of(spec.stages)
    params = image_test_params(spec, pipeline, tmp_path / "unused.csv")
    assert Path(params["deaf_sentences"]["sentences"]).is_file()
    _run_on_host(tmp_path / "store", _host_stages(spec.stages), params, pipeline.graph)
    run = RunStore(open_store(str(tmp_path / "store")), "image-test")
    ctx = make_context(run, pipeline.graph, "answer_salmonn", params["answer_salmonn"],
                       "embedded", 0)
    queries = AnswerStage(ctx).plan()
    assert 20 <= len(queries) <= 100 and all(q.endswith("#0") for q in queries)


def test_image_test_sources_are_demo_clips(tmp_path: Path) -> None:
    csv = demo_sources(tmp_path / "src", 2)
    from madbench_common.benchmarks.madbench.sources import list_sources

    specs = list_sources(str(csv))
    assert len(specs) == 2
    for spec in specs:
        for path in (spec.path, spec.speech_stem, spec.env_stem):
            assert Path(path).is_file() and Path(path).is_relative_to(tmp_path)
