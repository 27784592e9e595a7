"""Supply chain: an SBOM per image lock, licences listed, and no secret in
any YAML, log, manifest, SBOM or image layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from madbench_common.core.store import RunStore, open_store
from madbench_common.imagefactory.imagelock import read_lock
from madbench_common.imagefactory.sbom import _licenses, make_sbom, parse_lock, sbom_problems
from madbench_common.imagefactory.secrets_scan import INJECTED_KEYS, scan_bytes, scan_paths
from madbench_common.testing import SeaweedS3
from tests.paths import IMAGES, ROOT

LOCKED = sorted(p.parent.name for p in IMAGES.glob("*/image.yaml"))
"""Every image has an SBOM of its whole locked set (its lock on its parents')."""


@pytest.mark.parametrize("slug", LOCKED)
def test_every_image_lock_has_its_current_sbom(slug: str) -> None:
    """Regenerate with `make sbom` (python -m madbench_common.imagefactory.sbom) after a
    lock changes."""
    assert sbom_problems(slug) == []
    entry = read_lock()[slug]
    assert entry["sbom"]["image"] == (entry.get("digest") or (entry.get("build") or {})
                                      .get("image_id"))


@pytest.mark.parametrize("slug", LOCKED)
def test_sbom_is_valid_cyclonedx(slug: str) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    text = (IMAGES / slug / "sbom.cdx.json").read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc = json.loads(text)
    assert doc["metadata"]["component"]["name"] == f"madbench/{slug}"
    for c in doc["components"]:
        assert c["purl"] == f"pkg:pypi/{c['name']}@{c['version']}" and c["hashes"]
        assert c["properties"][0]["value"] != "none"


def test_lock_parsing_and_licence_precedence(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    lock.write_text("# header\nNumPy==2.0.1 \\\n    --hash=sha256:" + "a" * 64 + " \\\n"
                    "    --hash=sha256:" + "b" * 64 + "\n    # via x\nzzz-pkg==1.0 ; "
                    "python_version < '3.10' \\\n    --hash=sha256:" + "c" * 64 + "\n")
    pins = parse_lock(lock.read_text())
    assert [(p.name, p.version, len(p.hashes)) for p in pins] == [("numpy", "2.0.1", 2),
                                                                  ("zzz-pkg", "1.0", 1)]

    def rendered(meta: dict[str, object]) -> list[str]:
        return [str(getattr(x, "id", None) or getattr(x, "name", None) or x.value)
                for x in _licenses(meta)]

    assert rendered({"license_expression": "MIT OR Apache-2.0", "license": "x"}) == [
        "MIT OR Apache-2.0"]
    assert rendered({"license": "BSD-3-Clause"}) == ["BSD-3-Clause"]
    assert rendered({"license": "UNKNOWN", "classifier": [
        "License :: OSI Approved :: MIT License"]}) == ["MIT License"]
    assert rendered({"license": "UNKNOWN"}) == []


def test_sbom_is_deterministic() -> None:
    slug = "python-py311"
    text = (IMAGES / slug / "requirements.lock").read_text()
    meta = {p.name: {"license": "MIT"} for p in parse_lock(text)}
    assert make_sbom(slug, text, meta) == make_sbom(slug, text, meta)


def test_a_model_sbom_lists_its_torch_base() -> None:
    """The SBOM describes what is in the image: the torch and CUDA wheels of its base too."""
    doc = json.loads((IMAGES / "qc" / "sbom.cdx.json").read_text())
    names = {c["name"]: c["version"] for c in doc["components"]}
    assert names["torch"] == "2.8.0" and "nvidia-cudnn-cu12" in names and "numpy" in names


# ------------------------------------------------------------------ secrets


def test_scanner_finds_what_it_must(tmp_path: Path) -> None:
    planted = {
        "a.yaml": b"key: AKIA" + b"Q" * 16 + b"\n",
        "b.log": b"aws_secret_access_key = " + b"A1b2/" * 8 + b"\n",
        "c.json": b'{"token": "hf_' + b"x" * 34 + b'"}',
        "d.parquet": b"PAR1\x00mysecretvalue123\x00",
        "e.pem": b"-----BEGIN RSA PRIVATE KEY-----\n",
    }
    for name, data in planted.items():
        (tmp_path / name).write_bytes(data)
    kinds = {Path(f.where).name: f.kind for f in scan_paths([tmp_path],
                                                             known=["mysecretvalue123"])}
    assert kinds == {"a.yaml": "aws-access-key-id", "b.log": "aws-secret-access-key",
                     "c.json": "hf-token", "d.parquet": "known-secret",
                     "e.pem": "private-key"}
    assert "mysecretvalue123" not in repr(scan_bytes(planted["d.parquet"], "x",
                                                     ["mysecretvalue123"]))


def _fake(alphabet: str, n: int, seed: int) -> str:
    """A credential-shaped random string (made here, so none sits in the repository)."""
    import random

    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(n))


ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def test_scanner_finds_the_keys_the_workflows_inject(tmp_path: Path) -> None:
    """OpenAI, Gemini, ElevenLabs and JSON-form AWS secrets, and any value assigned to a
    name the workflows inject."""
    planted = {
        "openai.log": "key=sk-proj-" + _fake(ALNUM + "_-", 120, 1),
        "gemini.json": '{"k": "AIza' + _fake(ALNUM + "_-", 35, 2) + '"}',
        "eleven.txt": "xi-api-key: sk_" + _fake("0123456789abcdef", 48, 3),
        "sts.json": '{"Credentials": {"SecretAccessKey": "' + _fake(ALNUM + "/+", 40, 4)
                    + '"}}',
        "judge.env": "JUDGE_API_KEY=" + _fake(ALNUM, 24, 5),
        "azure.env": "export AZURE_SPEECH_KEY=" + _fake("0123456789abcdef", 32, 7),
        "azure.log": "Ocp-Apim-Subscription-Key: " + _fake("0123456789abcdef", 32, 8),
    }
    for name, text in planted.items():
        (tmp_path / name).write_text(text)
    kinds = {Path(f.where).name: f.kind for f in scan_paths([tmp_path])}
    assert kinds == {"openai.log": "openai-api-key", "gemini.json": "google-api-key",
                     "eleven.txt": "elevenlabs-api-key",
                     "sts.json": "aws-secret-access-key-json", "judge.env": "injected-secret",
                     "azure.env": "injected-secret", "azure.log": "azure-subscription-key"}


def test_scanner_reads_decoded_parquet_values(tmp_path: Path) -> None:
    """A literal in a zstd-compressed Parquet column is not in the file's bytes; the
    scanner decodes the columns and finds it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    secret = _fake(ALNUM, 32, 6)
    table = pa.table({"detail": [f"row {i} {secret}" for i in range(200)],
                      "tags": [[f"t{i}", secret] for i in range(200)]})
    path = tmp_path / "manifest.parquet"
    pq.write_table(table, path, compression="zstd", write_statistics=False)
    data = path.read_bytes()
    assert secret.encode() not in data
    found = scan_bytes(data, "m", known=[secret])
    assert {f.where for f in found if f.kind == "known-secret"} == {"m:detail", "m:tags"}
    assert secret not in repr(found)


def test_every_key_the_workflows_inject_has_a_pattern() -> None:
    keys: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("secretKeyRef"), dict):
                keys.add(node["secretKeyRef"]["key"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for wf in (ROOT / "workflows").glob("*.yaml"):
        walk(yaml.safe_load(wf.read_text()))
    assert {"OPENAI_API_KEY", "GEMINI_API_KEY", "AWS_SECRET_ACCESS_KEY"} <= keys
    assert keys - {"AWS_REGION", "AWS_ENDPOINT_URL"} <= set(INJECTED_KEYS)


def _repo_files() -> list[Path]:
    out = [p for p in ROOT.rglob("*.yaml") if ".git" not in p.parts and ".venv" not in
           p.parts and ".venvs" not in p.parts]
    return out + list(IMAGES.glob("*/sbom.cdx.json")) + list(ROOT.glob("k8s/**/*"))


def test_no_secret_in_yaml_or_sboms() -> None:
    findings = scan_paths(_repo_files())
    assert findings == []


@pytest.mark.s3
def test_no_secret_in_a_run_its_logs_or_workflows(s3_server: SeaweedS3, s3_uri: str,
                                                  demo_sources: Path, tmp_path: Path) -> None:
    """A run against S3 with credentials in the environment: its every object (manifests,
    markers, run logs, artifacts), the CLI's output and the Argo exit summary."""
    env = {**os.environ, **s3_server.env(), "COLUMNS": "200"}
    cli = [sys.executable, "-m", "madbench_common.cli"]
    run = subprocess.run([*cli, "-v", "run", "--sources", str(demo_sources), "--store",
                          s3_uri, "--run-id", "r", "--until", "ingest", "--no-progress"],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    summary = subprocess.run([*cli, "exit-summary", "--store", s3_uri, "--run-id", "r",
                              "--workflow", "wf", "--status", "Succeeded",
                              "--failures", '"null"'], env=env, capture_output=True, text=True,
                             check=True)
    status = subprocess.run([*cli, "status", "--store", s3_uri, "--run-id", "r", "--json"],
                            env=env, capture_output=True, text=True, check=True)
    known = [s3_server.secret_key, s3_server.access_key]
    store = RunStore(open_store(s3_uri), "r")
    keys = store.list()
    assert any(k.startswith("_logs/") for k in keys) and "_RUN_SUMMARY.json" in keys
    findings = [f for k in keys for f in scan_bytes(store.get_bytes(k), k, known)]
    for name, text in (("run", run.stdout + run.stderr), ("summary", summary.stdout),
                       ("status", status.stdout)):
        findings += scan_bytes(text.encode(), name, known)
    for wf in (ROOT / "workflows").glob("*.yaml"):
        doc = yaml.safe_load(wf.read_text())
        for tpl in doc["spec"]["templates"]:  # credentials only by reference to the Secret
            for env_var in (tpl.get("container") or {}).get("env", []):
                if env_var["name"].startswith("AWS_"):
                    assert "value" not in env_var and "secretKeyRef" in env_var["valueFrom"]
    assert findings == []


@pytest.mark.image
@pytest.mark.needs_tools("buildah", root=True)
def test_no_secret_in_image_layers(s3_server: SeaweedS3) -> None:
    """Opt-in (MADBENCH_IMAGE_TEST=1): every local madbench image's files and config."""
    if os.environ.get("MADBENCH_IMAGE_TEST") != "1":
        pytest.skip("opt-in: set MADBENCH_IMAGE_TEST=1 (reads every file of every image)")
    from madbench_common.imagefactory.imagebuild import image_exists, local_ref

    refs = [r for r in (local_ref(s) for s in read_lock()) if image_exists(r)]
    if not refs:
        pytest.skip("no madbench image is built on this machine")
    known = [s3_server.secret_key, s3_server.access_key]
    findings = []
    for ref in refs:
        config = subprocess.run(["buildah", "inspect", ref], capture_output=True, check=True)
        findings += scan_bytes(config.stdout, f"{ref} config", known)
        ctr = subprocess.run(["buildah", "from", "--pull=never", "--quiet", ref],
                             capture_output=True, text=True, check=True).stdout.strip()
        try:
            root = subprocess.run(["buildah", "mount", ctr], capture_output=True, text=True,
                                  check=True).stdout.strip()
            findings += scan_paths([Path(root)], known, max_bytes=1 << 20)
        finally:
            subprocess.run(["buildah", "rm", ctr], capture_output=True)
    assert findings == [], findings[:20]
