"""Every stage of workflows/smoke.yaml, run step by step inside the built reference image.

Opt-in (``MADBENCH_IMAGE_TEST=1``; marked ``image``). For each stage in graph order,
each shard task and then the merge task of ``smoke.yaml`` is executed as Argo would:
its container ``args`` with the workflow parameters substituted (two shards for a
fanned-out stage), its plain ``env``, under the pod policy of
:mod:`madbench_common.imagefactory.containers` (uid 10001, read-only root, no network). The rows
must equal those of ``madbench run`` on the same clips (all but the run-relative
``*_uri`` columns, whose fingerprint prefix names the image; ``params_hash`` included),
and a TTS stage without ``flite`` on its PATH must exit 3 with the reason.

The image is ``$MADBENCH_SMOKE_IMAGE`` (default: the local reference-cpu image); its
madbench_common must be this tree's, e.g. an image made by ``scripts/overlay_image.sh``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.stage import load_impl
from madbench_common.testing.faults import demo_sources

pytestmark = pytest.mark.image

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "data" / "demo"
CLIPS = ("demo_002", "demo_004", "demo_007")
RUN_ID = "smoke"
_PARAM = re.compile(r"\{\{workflow\.parameters\.([A-Za-z0-9_-]+)\}\}")
_RUN_ID = "{{=workflow.parameters.run_id == '' ? workflow.name : workflow.parameters.run_id}}"


def _image() -> str:
    if os.environ.get("MADBENCH_IMAGE_TEST") != "1":
        pytest.skip("opt-in: set MADBENCH_IMAGE_TEST=1 (runs every smoke stage in the image)")
    from madbench_common.core.errors import ConfigError
    from madbench_common.imagefactory.containers import run_engine
    from madbench_common.imagefactory.imagebuild import image_exists, local_ref

    ref = os.environ.get("MADBENCH_SMOKE_IMAGE") or local_ref("reference-cpu")
    try:
        run_engine()
    except ConfigError as exc:
        pytest.skip(str(exc))
    if not image_exists(ref):
        pytest.fail(f"{ref} is not built (make image IMAGE=reference-cpu, or "
                    "scripts/overlay_image.sh)")
    return ref


def _source_digest() -> str:
    """sha256 over madbench_common's .py files (what the image must carry)."""
    digest = hashlib.sha256()
    pkg = ROOT / "madbench_common"
    for path in sorted(pkg.rglob("*.py")):
        digest.update(path.relative_to(pkg).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()


_DIGEST_CODE = (
    "import hashlib, pathlib, madbench_common as m\n"
    "p = pathlib.Path(m.__file__).parent; d = hashlib.sha256()\n"
    "for f in sorted(p.rglob('*.py')): d.update(f.relative_to(p).as_posix().encode()"
    " + f.read_bytes())\n"
    "print(d.hexdigest())\n")


def _sources(work: Path) -> Path:
    return demo_sources(work / "sources", CLIPS)


def _templates() -> tuple[dict[str, Any], dict[str, str]]:
    doc = yaml.safe_load((ROOT / "workflows" / "smoke.yaml").read_text())
    values = {p["name"]: p.get("value", "") for p in doc["spec"]["arguments"]["parameters"]}
    return {t["name"]: t for t in doc["spec"]["templates"]}, values


def _argv(template: dict[str, Any], values: dict[str, str], shard: int) -> list[str]:
    args = [a.replace(_RUN_ID, RUN_ID).replace("{{inputs.parameters.shard}}", str(shard))
            for a in template["container"]["args"]]
    return [*template["container"]["command"],
            *(_PARAM.sub(lambda m: values[m.group(1)], a) for a in args)]


def _env(template: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in template["container"]["env"] if "value" in e}


def _rows(store: Path, stage: str) -> list[dict[str, Any]]:
    cls = load_impl(build_graph()[stage].target).row_type
    data = (store / RUN_ID / stage / "manifest.parquet").read_bytes()
    return [{k: v for k, v in dataclasses.asdict(r).items() if not k.endswith("uri")}
            for r in read_manifest_bytes(cls, data)]


def _in_image(ref: str, argv: list[str], **kw: Any) -> str:
    """``run_in_image``, retried when the engine itself fails (exit 125: on a shared
    machine another user's ``buildah rm --all`` can remove a working container)."""
    from madbench_common.imagefactory.containers import ContainerFailed, run_in_image

    for attempt in range(3):
        try:
            return run_in_image(ref, argv, **kw)
        except ContainerFailed as exc:
            if exc.code != 125 or attempt == 2:
                raise
    raise AssertionError("unreachable")


def test_every_smoke_stage_runs_in_the_image() -> None:
    ref = _image()
    assert _in_image(ref, ["python", "-c", _DIGEST_CODE], capture=True).strip() == \
        _source_digest(), f"{ref} carries another madbench_common: rebuild it from this tree"
    work = Path(tempfile.mkdtemp(prefix="madbench-smoke-",
                                 dir=os.environ.get("MADBENCH_IMAGE_TEST_DIR", "/var/tmp")))
    work.chmod(0o755)
    try:
        _run_all(ref, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_all(ref: str, work: Path) -> None:
    from madbench_common.imagefactory.containers import ContainerFailed, Mount
    from madbench_common.testing.imagetest import _writable

    store, sources = _writable(work / "store"), _sources(work)
    templates, values = _templates()
    values |= {"store": str(store), "sources": str(sources), "seed": "0"}
    values |= {k: ref for k in values if k.endswith("_image")}
    values |= {k: "2" for k in values if k.endswith("_shards")}
    mounts = [Mount(store, str(store), read_only=False), Mount(work, str(work)),
              Mount(DEMO, str(DEMO))]
    graph = build_graph()
    for stage in graph:
        name = stage.name.replace("_", "-")
        shards = int(values[f"{stage.name}_shards"]) if stage.sharded else 1
        for shard in range(shards):
            tpl = templates[f"{name}-shard"]
            _in_image(ref, _argv(tpl, values, shard), mounts=mounts, env=_env(tpl))
        tpl = templates[f"{name}-merge"]
        _in_image(ref, _argv(tpl, values, 0), mounts=mounts, env=_env(tpl))
    local = work / "local"
    LocalRunner(build_graph, RunOptions(store=str(local), run_id=RUN_ID, progress=False,
                                        params={"ingest": {"sources": str(sources)}})).execute()
    for stage in graph:
        assert _rows(store, stage.name) == _rows(local, stage.name), stage.name
    tts = _rows(store, "speech_tts_same_a")
    assert tts and all(r["status"] == "ok" for r in tts), "flite must run in the image"

    tpl = templates["speech-tts-same-a-shard"]
    argv = _argv(tpl, values | {"seed": "1"}, 0)  # a new fingerprint: the stage runs again
    env = _env(tpl) | {"PATH": "/opt/venv/bin"}  # no /usr/bin: no flite
    with pytest.raises(ContainerFailed) as err:
        _in_image(ref, argv, mounts=mounts, env=env, capture=True)
    assert err.value.code == 3 and "flite not found" in err.value.output
