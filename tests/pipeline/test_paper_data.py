"""The paper's data sets on the cluster: ``paper_data.yaml`` (DEMAND, EMIS), ``madbench data
fetch`` (sha256-checked, unpacked into the data volume) and ``workflows/data.yaml`` (the
one-off workflow that runs it), kept current by ``madbench render --check``."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from madbench_common.benchmarks.deaf.design import ENVIRONMENTS
from madbench_common.core.errors import EXIT_DETERMINISTIC
from madbench_common.pipeline.argo import ClusterProfile, ImageLock
from madbench_common.pipeline.argo_data import compile_data_workflow, render_data_workflow
from madbench_common.pipeline.paper_data import (
    DATA_ROOT,
    UNVERIFIED,
    DataMismatch,
    UnpinnedData,
    data_status,
    fetch_dataset,
    load_spec,
    pin_data,
)
from tests.paths import LOCK, ROOT
from tests.yaml_docs import load_yaml

PROFILE = ROOT / "k8s" / "overlays" / "gpu-nodepool" / "cluster-profile.yaml"
DATA = ROOT / "workflows" / "data.yaml"


# ------------------------------------------------------------------ the committed spec


def test_spec_lists_demand_and_emis_with_their_status() -> None:
    """DEMAND: one 16 kHz zip per DEAF environment (Table 6), CC-BY-SA-3.0. EMIS: its
    licence could not be read offline, so it stays unpinned with that reason. A sha256 is
    only ever written by ``madbench data pin`` from the bytes."""
    spec = load_spec()
    demand, emis = spec["demand"], spec["emis"]
    assert demand.licence == "CC-BY-SA-3.0" and demand.source.endswith("/records/1227121")
    assert {f.name for f in demand.files} == {f"{e.code}_16k.zip" for e in ENVIRONMENTS}
    assert all(f.url.startswith("https://zenodo.org/records/1227121/files/")
               for f in demand.files)
    assert demand.extract == ("*/ch01.wav",)
    assert emis.source.endswith("/records/19207001")
    reasons = dict.fromkeys(why for name, why in data_status(spec) if name == "emis")
    if emis.licence == UNVERIFIED:
        assert any("licence not established" in why for why in reasons)
    for f in [*demand.files, *emis.files]:
        assert f.sha256 is None or len(f.sha256) == 64


# ------------------------------------------------------------------ fetching


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def _spec(tmp: Path, url: str, sha256: str, licence: str = "CC-BY-SA-3.0") -> Path:
    path = tmp / "paper_data.yaml"
    path.write_text(f"""# a test spec
version: 1
datasets:
  demand:
    title: test
    source: https://example.invalid/demand
    licence: {licence}
    extract: ["*/ch01.wav"]
urls:
  # the one file
  - name: DKITCHEN_16k.zip
    dataset: demand
    url: {url}
    sha256: {sha256}
""")
    return path


@pytest.fixture
def archive(tmp_path: Path) -> tuple[Path, str]:
    data = _zip({"DKITCHEN/ch01.wav": b"RIFF-one", "DKITCHEN/ch02.wav": b"RIFF-two",
                 "../escape/ch01.wav": b"evil"})
    path = tmp_path / "www" / "DKITCHEN_16k.zip"  # what ``http_folder`` serves
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def test_fetch_checks_the_sha256_and_unpacks_what_is_read(tmp_path: Path,
                                                         archive: tuple[Path, str]) -> None:
    src, sha = archive
    spec = load_spec(_spec(tmp_path, src.as_uri(), f'"{sha}"'))
    dest = tmp_path / "volume"
    lock = json.loads(fetch_dataset("demand", dest, spec=spec).read_text())
    assert (dest / "demand" / "DKITCHEN" / "ch01.wav").read_bytes() == b"RIFF-one"
    assert not (dest / "demand" / "DKITCHEN" / "ch02.wav").exists()  # only channel 1
    assert not (tmp_path / "escape").exists() and not (dest / "escape").exists()
    assert lock["files"] == [{"name": "DKITCHEN_16k.zip", "url": src.as_uri(), "sha256": sha,
                              "sha256_pinned": True, "members": 1}]
    assert lock["licence"] == "CC-BY-SA-3.0" and lock["allow_unpinned"] is False
    # the pinned archive is kept: fetching again needs no download
    src.unlink()
    fetch_dataset("demand", dest, spec=spec)
    assert (dest / "archives" / "demand" / "DKITCHEN_16k.zip").exists()


def test_fetch_over_http_and_a_mismatch_names_the_file(tmp_path: Path,
                                                       archive: tuple[Path, str],
                                                       http_folder: tuple[str, Path]) -> None:
    base, _ = http_folder
    src, sha = archive
    url = f"{base}/{src.name}"
    dest = tmp_path / "volume"
    fetch_dataset("demand", dest, spec=load_spec(_spec(tmp_path, url, f'"{sha}"')))
    assert (dest / "demand" / "DKITCHEN" / "ch01.wav").is_file()
    shutil.rmtree(dest)
    wrong = hashlib.sha256(b"other bytes").hexdigest()
    with pytest.raises(DataMismatch) as err:
        fetch_dataset("demand", dest, spec=load_spec(_spec(tmp_path, url, f'"{wrong}"')))
    text = str(err.value)
    assert "demand/DKITCHEN_16k.zip" in text and url in text
    assert f"sha256 {sha} != {wrong}" in text and "refused" in text
    assert err.value.exit_code == EXIT_DETERMINISTIC  # never retried by the workflow
    archives = dest / "archives" / "demand"
    assert not archives.exists() or list(archives.iterdir()) == []  # nothing kept
    assert not (dest / "demand" / "DKITCHEN" / "ch01.wav").exists()


def test_unpinned_or_unverified_is_refused_unless_allowed(tmp_path: Path,
                                                          archive: tuple[Path, str]) -> None:
    src, sha = archive
    dest = tmp_path / "volume"
    loose = load_spec(_spec(tmp_path, src.as_uri(), "unpinned"))
    with pytest.raises(UnpinnedData, match=r"DKITCHEN_16k\.zip: no sha256 recorded"):
        fetch_dataset("demand", dest, spec=loose)
    lock = json.loads(fetch_dataset("demand", dest, spec=loose, allow_unpinned=True)
                      .read_text())
    assert lock["allow_unpinned"] is True and lock["unpinned"]
    assert lock["files"][0]["sha256"] == sha and lock["files"][0]["sha256_pinned"] is False
    (tmp_path / "again").mkdir()
    unverified = load_spec(_spec(tmp_path / "again", src.as_uri(), f'"{sha}"', UNVERIFIED))
    with pytest.raises(UnpinnedData, match="licence not established"):
        fetch_dataset("demand", tmp_path / "v2", spec=unverified)


def test_pin_writes_the_digest_in_place(tmp_path: Path, archive: tuple[Path, str]) -> None:
    src, sha = archive
    path = _spec(tmp_path, src.as_uri(), "unpinned")
    pinned, failed = pin_data(spec_path=path)
    assert (pinned, failed) == (["DKITCHEN_16k.zip"], [])
    text = path.read_text()
    assert f'sha256: "{sha}"' in text and "# the one file" in text
    assert load_spec(path)["demand"].files[0].sha256 == sha
    fetch_dataset("demand", tmp_path / "volume", spec=load_spec(path))  # now pinned


def test_cli_fetch_exits_3_on_a_mismatch(tmp_path: Path, archive: tuple[Path, str],
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from madbench_common.cli import main
    from madbench_common.pipeline import paper_data

    src, _ = archive
    monkeypatch.setattr(paper_data, "SPEC", _spec(tmp_path, src.as_uri(), '"' + "a" * 64 + '"'))
    code = main(["data", "fetch", "--dataset", "demand", "--dest", str(tmp_path / "v")])
    assert code == EXIT_DETERMINISTIC
    assert "DKITCHEN_16k.zip" in capsys.readouterr().err


# ------------------------------------------------------------------ workflows/data.yaml


def test_data_workflow_is_current_and_fills_the_volume(tmp_path: Path) -> None:
    lock, profile = ImageLock.load(LOCK), ClusterProfile.load(PROFILE)
    assert render_data_workflow(lock, profile, ROOT / "workflows", check=True) == []
    assert render_data_workflow(lock, profile, tmp_path, check=True) == [tmp_path / "data.yaml"]
    assert not (tmp_path / "data.yaml").exists()  # check writes nothing
    render_data_workflow(lock, profile, tmp_path)
    assert (tmp_path / "data.yaml").read_text() == DATA.read_text()
    doc = load_yaml(DATA)
    spec = doc["spec"]
    params = {p["name"]: p for p in spec["arguments"]["parameters"]}
    assert json.loads(params["datasets"]["value"]) == ["demand", "emis"]
    assert params["allow_unpinned"]["value"] == "false"
    assert params["allow_unpinned"]["enum"] == ["false", "true"]
    fetch = {t["name"]: t for t in spec["templates"]}["fetch"]
    assert fetch["container"]["args"] == [
        "data", "fetch", "--dataset", "{{inputs.parameters.dataset}}", "--dest", DATA_ROOT,
        "--allow-unpinned={{workflow.parameters.allow_unpinned}}"]
    assert fetch["retryStrategy"]["expression"] == 'lastRetry.exitCode != "3"'
    assert fetch["metadata"]["labels"]["madbench.io/egress"] == "hub"
    mount = {m["name"]: m for m in fetch["container"]["volumeMounts"]}["data"]
    assert mount["mountPath"] == DATA_ROOT and not mount.get("readOnly")
    claim = {v["name"]: v for v in spec["volumes"]}["data"]["persistentVolumeClaim"]
    assert claim == {"claimName": profile.data_claim} == {"claimName": "madbench-data"}
    assert "secretKeyRef" not in DATA.read_text()  # public data: no credential


def test_the_data_workflows_parameter_lists_what_it_is_given() -> None:
    wf = compile_data_workflow(ImageLock.load(LOCK), ClusterProfile.load(PROFILE), ["demand"])
    params = {p.name: p.value for p in wf.spec.arguments.parameters}  # type: ignore[union-attr]
    assert json.loads(str(params["datasets"])) == ["demand"]


def test_render_check_guards_data_yaml(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from madbench_common.cli import build_parser

    out = tmp_path / "workflows"
    shutil.copytree(ROOT / "workflows", out)
    args = build_parser().parse_args(["render", "--check", "--out", str(out), "--readme", "",
                                      "--lock", str(LOCK), "--profile", str(PROFILE)])
    assert args.func(args) == 0
    (out / "data.yaml").write_text(DATA.read_text().replace("madbench-data", "other-claim"))
    assert args.func(args) == 1
    assert f"stale: {out / 'data.yaml'}" in capsys.readouterr().out


def test_the_data_claim_is_a_cluster_object() -> None:
    import yaml

    pvc = yaml.safe_load((ROOT / "k8s" / "base" / "data-pvc.yaml").read_text())
    assert pvc["metadata"]["name"] == ClusterProfile.load(PROFILE).data_claim
    assert "data-pvc.yaml" in yaml.safe_load(
        (ROOT / "k8s" / "base" / "kustomization.yaml").read_text())["resources"]
    assert ClusterProfile().data_claim == "madbench-data"


def test_the_readme_says_how_to_fill_and_use_the_data_volume() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "argo submit -n madbench workflows/data.yaml" in readme
    assert "madbench data pin" in readme and "allow_unpinned=true" in readme
    assert "/data/demand" in readme and "/data/emis" in readme
    assert "<CODE>/ch01.wav" in readme


def test_a_whole_record_archive_is_unpacked_with_the_zips_inside(tmp_path: Path) -> None:
    """EMIS comes as Zenodo's archive of the whole record: a zip in it is unpacked too."""
    inner = _zip({"wav/1_happyexplicit_sad_0011_cosyvoice.wav": b"RIFF",
                  "sentences.csv": b"ID,Sentence\n1,I am thrilled today.\n"})
    outer = tmp_path / "emis.zip"
    outer.write_bytes(_zip({"EMIS.zip": inner}))
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""version: 1
datasets:
  emis: {{licence: CC-BY-4.0, source: https://example.invalid, extract: ["*"]}}
urls:
  - {{name: emis.zip, dataset: emis, url: {outer.as_uri()},
      sha256: "{hashlib.sha256(outer.read_bytes()).hexdigest()}"}}
""")
    lock = json.loads(fetch_dataset("emis", tmp_path / "v", spec=load_spec(spec)).read_text())
    emis = tmp_path / "v" / "emis"
    assert (emis / "wav" / "1_happyexplicit_sad_0011_cosyvoice.wav").read_bytes() == b"RIFF"
    assert (emis / "sentences.csv").is_file() and not (emis / "EMIS.zip").exists()
    assert lock["files"][0]["members"] == 2


def test_a_failed_download_keeps_nothing(tmp_path: Path,
                                         http_folder: tuple[str, Path]) -> None:
    import urllib.error

    base, _ = http_folder
    spec = load_spec(_spec(tmp_path, f"{base}/missing.zip", '"' + "b" * 64 + '"'))
    with pytest.raises(urllib.error.HTTPError):
        fetch_dataset("demand", tmp_path / "v", spec=spec)
    assert list((tmp_path / "v" / "archives" / "demand").iterdir()) == []
