"""``make rehearsal``: the paper's graphs end to end on one machine, on tiny random weights.

``madbench rehearse run`` executes the rendered workflows themselves
(``workflows/full.yaml``, then ``workflows/deaf.yaml``) with the local Argo interpreter
(:mod:`.argo_local`), every pod in its own image under the pod policy, as ``argo submit``
would run them on a cluster:

1. **Preflight** (fails at once, before any build): the container engine can run pods
   here; every image the workflows name has a folder; every upstream source an image
   unpacks (``upstream_src``) is already fetched or reachable through the
   ``MADBENCH_UPSTREAM_GIT`` mirrors; every image's tiny-weights callable exists; a dry
   run resolves every pod and :func:`.lint.check_pods` finds nothing.
2. **Sandbox**: a network namespace with only loopback (:mod:`.sandbox`) holds SeaweedFS
   (the object store; its data under the work folder, so a killed rehearsal resumes) and
   the local API stub; pods join it, so they reach the store (and the stub) and nothing
   else, as the cluster's NetworkPolicy intends. The demo clips are uploaded to
   ``s3://madbench/sources/`` as a user would. S3 keys are new at each start and reach
   pods only through the workflows' ``secretKeyRef`` (the local secret set
   ``madbench-s3``); API keys are the stub's (``madbench-api-keys``). Secret values are
   never logged or written (pod logs are redacted).
3. **Parameters** as ``argo submit -p``: ``store``, ``run_id``, ``sources``, every
   ``<stage>_shards`` (the profile's count), ``stage_params`` (the profile's relaxations,
   ``madbench_common/data/rehearsal.yaml``), and every ``<stage>_image`` pinned to the
   local build that runs it (``ghcr.io/madbench/<slug>:<tag>@sha256:<image id>``), bound
   when the first pod of that image starts: the stages' fingerprints include it, so a
   stage that had not finished when its image was rebuilt starts over.
4. **Images** (:class:`ImageProvider`): ``ghcr.io/madbench/<slug>:<tag>`` maps to the
   factory's local build ``localhost/madbench/<slug>:<tag>``; a missing one, or one whose
   ``madbench_common`` differs from this checkout's (the pods run the image's copy), is
   built with the factory's public entry point (``python -m madbench_common.build.imagebuild``,
   bases first). Then the image's ``image_test.weights`` callable writes its tiny
   checkpoints, in the release layout, into ``<work>/weights/<slug>`` (mounted writable
   for that step only, as ``make image-test`` does); the stages get it read-only at
   ``/weights`` (the ``madbench-weights`` claim). Pods whose image is ready run first; an
   image the rehearsal built is removed after the last pod that needs it (in this and the
   later workflows) unless ``KEEP_IMAGES=1``; one it found on the machine is left there.
   With ``IMAGE_TESTS=1`` each image's ``make image-test`` runs when the image is ready,
   before its first pod, and records itself in ``images/images.lock.yaml``.
5. **Pods** (:class:`PodRunner`): each runs through :mod:`.podexec` in a memory cgroup with
   the template's ``limits.memory`` (enforced; cgroup v1 or v2, where the machine lets
   us make one) and its ``activeDeadlineSeconds``; retries follow the template's
   ``retryStrategy`` (never exit 3). GPU requests run on the CPU (the buildah engine has
   no GPU; tiny models do not need one) and are recorded.
6. **Resumption**: a pod that finished before with the same resolved spec, the same
   image recipe (:func:`image_recipe`: the build inputs, not the image id, which every
   rebuild changes) and tiny weights, and the same upstream results is skipped without
   its image (the memo in ``<work>/state.json``); the stages' own ``_SUCCESS`` markers
   skip the rest. The work folder is locked for the pass, and its working containers
   carry the folder's prefix: the next pass removes a killed one's leftovers.
7. **Records**: ``images/rehearsal.json`` and ``images/rehearsal.md`` (per image: build
   seconds, size, torch/CUDA, weights, stages, rows ok/rejected, peak RSS; the wall
   time of this part and of every part of the pass; the commit), and the printed
   reports, labelled as random-weight numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from madbench_common.build.codedigest import code_digest, image_code_digest, package_data_globs
from madbench_common.cluster.argo_local import (
    Executor,
    Pod,
    PodResult,
    SecretRef,
    Workflow,
    WorkflowResult,
)
from madbench_common.cluster.lint import check_pods, check_target, image_slug
from madbench_common.cluster.relaxations import relaxations as argo_relaxations
from madbench_common.core.errors import ConfigError, MadbenchError

__all__ = ["BANNER", "ImageProvider", "PodRunner", "Profile", "State", "add_commands",
           "code_digest", "load_profile", "package_data_globs", "rehearse", "stale_evidence"]

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "madbench_common" / "data" / "rehearsal.yaml"
RECORDS = ROOT / "images" / "rehearsal.json"
BANNER = ("REHEARSAL ON TINY RANDOM WEIGHTS: every model below is a randomly initialised "
          "tiny checkpoint in the real release layout, except the stages marked ‡ (stand-in "
          "code for a hub-only architecture, random weights) and § (an API model answered "
          "by the local API stub); these numbers show that data flows through every stage "
          "and measure nothing about any model.")
SMOKE_BANNER = ("REHEARSAL OF THE SMOKE WORKFLOW: every stage runs a CPU reference (marked †), "
                "not the paper's model; these numbers check the machinery.")
_BUCKET = "madbench"
_STORE = f"s3://{_BUCKET}/runs"
_SOURCES = f"s3://{_BUCKET}/sources"
_WEIGHTS_CLAIM = "madbench-weights"
_S3_SECRET = "madbench-s3"
_API_SECRET = "madbench-api-keys"
_S3_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION")
_KILL_GRACE = 30.0
def stale_evidence(digest: str | None = None, records: Path | None = None,
                   lock: Path | None = None) -> list[str]:
    """What of the committed evidence ran on other code than ``digest`` (default: this
    checkout's :func:`code_digest`): the rehearsal record, and the image test of every
    image that installs ``madbench_common`` (a leaf) in ``images/images.lock.yaml``.
    One line for the record, one naming every stale image test; a record without a digest
    (older than this check) counts as stale."""
    from madbench_common.build.imagelock import read_lock
    from madbench_common.build.images import load_image

    digest = digest or code_digest()
    records = records or RECORDS
    out = []
    rec = json.loads(records.read_text()) if records.is_file() else {}
    if rec.get("code_digest") != digest:
        out.append(f"{records.name}: the committed pass ran on code "
                   f"{str(rec.get('code_digest') or 'not recorded')[:12]}, this checkout's is "
                   f"{digest[:12]}: run make rehearsal")
    tests = [slug for slug, entry in sorted(read_lock(lock).items())
             if (test := entry.get("image_test")) and test.get("code_digest") != digest
             and (ROOT / "images" / slug / "image.yaml").is_file() and load_image(slug).leaf]
    if tests:
        out.append(f"images.lock.yaml: the image tests of {', '.join(tests)} ran on other code "
                   f"than this checkout's {digest[:12]} (or did not record it): rebuild each "
                   "(make image IMAGE=…) and run make image-test IMAGE=…")
    return out


_NOT_INPUTS = {"sbom.cdx.json", ".upstream", "__pycache__"}
_PINNED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]*@sha256:[0-9a-f]{64}")


def image_recipe(slug: str, code: str) -> str | None:
    """sha256 of what a build of ``slug`` reads from the checkout: every file of its
    folder and of its parents' (Dockerfile, image.yaml with the upstream commits and
    tree digests, requirements and overrides), ``images/common.in`` and
    ``pyproject.toml``; for an image that installs madbench_common (a leaf) also every
    ``weights.yaml`` (its ``WEIGHTS_SHA256`` build argument) and ``code``, the code
    digest. ``None`` for an image with no folder here.

    What the memo keys a pod by, in place of the image id: a rebuild from the same
    inputs gives a new id (the ``REVISION`` label names the commit; an image removed
    after its pods comes back with new layers), and keying by it made a resumed pass
    after a complete one rerun the whole full graph (its exit handler rebuilt
    reference-cpu). Not covered: what a build fetches (Debian's packages at debootstrap
    time; PyPI's files, which the locks pin by hash)."""
    from madbench_common.build.imagebuild import weights_sha256
    from madbench_common.build.images import chain, load_image

    if not (ROOT / "images" / slug / "image.yaml").is_file():
        return None
    info = load_image(slug)
    h = hashlib.sha256()
    for link in chain(info):
        folder = ROOT / "images" / link.slug
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if path.is_file() and not _NOT_INPUTS & set(rel.parts):
                h.update(f"{link.slug}/{rel.as_posix()}\0".encode() + path.read_bytes() + b"\0")
    for path in (ROOT / "images" / "common.in", ROOT / "pyproject.toml"):
        h.update(path.read_bytes() + b"\0")
    if info.leaf:
        h.update(f"{weights_sha256(ROOT / 'images')}\0{code}".encode())
    return h.hexdigest()


# ------------------------------------------------------------------ profile


@dataclass(frozen=True)
class WorkflowProfile:
    name: str
    file: str
    run_id: str
    params: dict[str, str]
    stage_params: dict[str, dict[str, Any]]
    random_weights: bool = True

    @property
    def banner(self) -> str:
        return BANNER if self.random_weights else SMOKE_BANNER


@dataclass(frozen=True)
class Profile:
    sources_csv: str
    every: int
    shards: int
    workers: int
    workflows: tuple[WorkflowProfile, ...]
    api_keys: tuple[str, ...]
    cpu_deadline_scale: float = 1.0
    """A pod that requests a GPU runs on the CPU here: its ``activeDeadlineSeconds`` (sized
    for a GPU) is multiplied by this."""


def _param_text(value: Any) -> str:
    """A workflow parameter's text as ``argo submit -p`` takes it: a mapping or list as JSON,
    a YAML boolean as ``true``/``false`` (the workflows' enums), anything else as is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def load_profile(path: Path | None = None) -> Profile:
    """Read ``madbench_common/data/rehearsal.yaml`` (or ``path``)."""
    path = path or PROFILE
    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict) or doc.get("version") != 1:
        raise ConfigError(f"{path}: expected version: 1")
    unknown = set(doc) - {"version", "sources", "shards", "workers", "workflows", "api_keys",
                          "cpu_deadline_scale"}
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}")
    flows = []
    for w in doc["workflows"]:
        extra = set(w) - {"name", "file", "run_id", "params", "stage_params", "random_weights"}
        if extra:
            raise ConfigError(f"{path}: workflow {w.get('name')}: unknown keys {sorted(extra)}")
        flows.append(WorkflowProfile(str(w["name"]), str(w["file"]), str(w["run_id"]),
                                     {str(k): _param_text(v)
                                      for k, v in (w.get("params") or {}).items()},
                                     dict(w.get("stage_params") or {}),
                                     bool(w.get("random_weights", True))))
    src = doc.get("sources") or {}
    return Profile(str(src.get("csv", "data/demo/sources.csv")), int(src.get("every", 1)),
                   int(doc.get("shards", 2)), int(doc.get("workers", 2)), tuple(flows),
                   tuple(doc.get("api_keys") or ()),
                   float(doc.get("cpu_deadline_scale", 1.0)))


def _fill(value: Any, fields: Mapping[str, Any]) -> Any:
    """``{stub_port}``-style fields in the profile's strings (only the names in ``fields``:
    other braces, as in a JSON parameter value, are left as they are)."""
    if isinstance(value, str):
        return re.sub(r"\{(\w+)\}",
                      lambda m: str(fields[m[1]]) if m[1] in fields else m[0], value)
    if isinstance(value, list):
        return [_fill(v, fields) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, fields) for k, v in value.items()}
    return value


# ------------------------------------------------------------------ state


def _utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class State:
    """``<work>/state.json``: images built and weighted, pods done; written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.data: dict[str, Any] = {"images": {}, "memo": {}, "passes": []}
        if path.exists():
            self.data.update(json.loads(path.read_text()))
        self._part: dict[str, Any] | None = None
        self._part_t0 = 0.0

    def begin_part(self) -> None:
        """One run of ``make rehearsal`` on this work folder: a part of a pass (a pass of
        hours runs in parts across sessions). Its wall time is brought up to date at every
        save, so a part killed outright (SIGKILL, the machine going away) still says how
        long it ran, up to its last save; its outcome then stays ``killed``."""
        with self.lock:
            self._part_t0 = time.monotonic()
            self._part = {"started_at": _utc_now(), "wall_s": 0, "outcome": "killed"}
            self.data["passes"].append(self._part)
            self.save()

    def end_part(self, outcome: str) -> None:
        """``complete``, ``incomplete``, ``interrupted`` or ``error``."""
        with self.lock:
            if self._part is None:
                return
            self._part.update(outcome=outcome, finished_at=_utc_now())
            self.save()
            self._part = None

    def pass_parts(self) -> list[dict[str, Any]]:
        """The parts of the latest pass: every part after the last complete one before it
        (a run after a complete pass starts a new pass; ``--fresh`` forgets them all)."""
        with self.lock:
            parts = self.data["passes"]
            start = max((i + 1 for i, p in enumerate(parts[:-1])
                         if p.get("outcome") == "complete"), default=0)
            return [dict(p) for p in parts[start:]]

    def save(self) -> None:
        with self.lock:
            if self._part is not None:
                self._part["wall_s"] = round(time.monotonic() - self._part_t0)
                self._part["saved_at"] = _utc_now()
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
            tmp.replace(self.path)

    def image(self, slug: str) -> dict[str, Any]:
        with self.lock:
            return dict(self.data["images"].get(slug, {}))

    def update_image(self, slug: str, **values: Any) -> None:
        with self.lock:
            self.data["images"].setdefault(slug, {}).update(values)
            self.save()


class StateMemo:
    """Pods done before: key (spec, upstream results, image recipe, weights) → outcome."""

    def __init__(self, state: State, workflow: str, provider: ImageProvider,
                 done_stages: Callable[[], set[str]]) -> None:
        self.state, self.workflow, self.provider = state, workflow, provider
        self._done_stages = done_stages

    def _key(self, key: str, pod: Pod) -> str:
        return hashlib.sha256((key + self.provider.identity(pod.image)).encode()).hexdigest()

    def done(self, key: str, pod: Pod) -> bool:
        with self.state.lock:
            entry = self.state.data["memo"].get(self.workflow, {}).get(self._key(key, pod))
        stage = _stage_of(pod)
        return entry is not None and (stage is None or stage in self._done_stages())

    def record(self, key: str, pod: Pod, result: PodResult) -> None:
        """Keep the pod's outcome. A pod that ran before under the same key (its stage had
        not finished, so the memo did not skip it) found its shard's output and ended in
        seconds: the entry keeps the larger of each measure, the run that did the work
        (a resumed pass had recorded Baichuan's 238 MiB re-run over its 3,074 MiB run)."""
        with self.state.lock:
            memo = self.state.data["memo"].setdefault(self.workflow, {})
            mkey = self._key(key, pod)
            entry = {"node": pod.node, "image": pod.image,
                     "seconds": round(result.seconds, 3),
                     "gpu_requested": bool(result.info.get("gpu_requested", pod.gpu)),
                     **{k: result.info.get(k) for k in ("peak_rss_bytes", "cgroup_peak_bytes")}}
            earlier = memo.get(mkey) or {}
            for k in ("seconds", "peak_rss_bytes", "cgroup_peak_bytes"):
                before = earlier.get(k)
                if before is not None and (entry[k] is None or before > entry[k]):
                    entry[k] = before
            memo[mkey] = entry
            self.state.save()

    def entry(self, key: str, pod: Pod) -> dict[str, Any]:
        with self.state.lock:
            return dict(self.state.data["memo"].get(self.workflow, {}).get(
                self._key(key, pod), {}))


def _stage_of(pod: Pod) -> str | None:
    argv = list(pod.argv)
    if "--stage" in argv and ("run" in argv or "merge" in argv):
        return argv[argv.index("--stage") + 1]
    return None


# ------------------------------------------------------------------ images


def _buildah(*args: str, check: bool = True) -> str:
    out = subprocess.run(["buildah", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise ConfigError(f"buildah {' '.join(args)}: {out.stderr.strip()[-500:]}")
    return out.stdout if out.returncode == 0 else ""


def _image_id(ref: str) -> str | None:
    out = subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                          "{{.FromImageID}}", ref], capture_output=True, text=True)
    return out.stdout.strip() or None if out.returncode == 0 else None


_SIZE = re.compile(r"^([0-9.]+)\s*([kMGT]?B)$")


def _image_size(image_id: str) -> int | None:
    raw = json.loads(_buildah("images", "--json", image_id) or "[]")
    if not raw:
        return None
    m = _SIZE.match(str(raw[0].get("size", "")).strip())
    if m is None:
        return None
    scale = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[m.group(2)]
    return int(float(m.group(1)) * scale)


def _tree_digest(root: Path) -> tuple[str, int, int]:
    """(sha256 over relative paths and contents, files, bytes) of a folder."""
    h, files, size = hashlib.sha256(), 0, 0
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            rel = p.relative_to(root).as_posix()
            digest = hashlib.sha256()
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            h.update(rel.encode() + b"\0" + digest.digest())
            files, size = files + 1, size + p.stat().st_size
    return h.hexdigest(), files, size


def upstream_problems(slugs: Iterable[str]) -> list[str]:
    """Upstream sources (``upstream_src``) that neither are fetched already nor reachable
    through ``$MADBENCH_UPSTREAM_GIT`` mirrors; empty when every build can get its code."""
    from madbench_common.build.images import load_image

    template = os.environ.get("MADBENCH_UPSTREAM_GIT", "")
    missing = []
    for slug in sorted(set(slugs)):
        if not (ROOT / "images" / slug / "image.yaml").is_file():
            continue
        info = load_image(slug)
        for src in info.upstream_src:
            stamp = info.dir / ".upstream" / src.dest / ".madbench-commit"
            # the stamp is "<commit> <tree sha256>" (build.upstream.fetch_source); a tree
            # already unpacked at the pinned commit needs no mirror
            if stamp.is_file() and stamp.read_text().split()[:1] == [src.commit]:
                continue
            owner, name = src.repo.split("/", 1)
            if template:
                mirror = template.format(owner=owner, name=name)
                ok = subprocess.run(["git", "--git-dir", mirror, "cat-file", "-e",
                                     f"{src.commit}^{{commit}}"], capture_output=True)
                if ok.returncode == 0:
                    continue
                missing.append(f"{slug}: {src.repo}@{src.commit[:12]} (mirror {mirror} is "
                               "missing or lacks the commit)")
            else:
                missing.append(f"{slug}: {src.repo}@{src.commit[:12]}")
    return missing


def weights_problems(slugs: Iterable[str]) -> list[str]:
    """Images whose ``image_test.weights`` callable does not exist in this checkout, or
    that fetch weights (``weights.yaml``) but have no callable to write tiny ones."""
    from madbench_common.build.images import load_image

    out = []
    for slug in sorted(set(slugs)):
        folder = ROOT / "images" / slug
        if not (folder / "image.yaml").is_file():
            continue
        test = load_image(slug).image_test
        callable_ = test.weights if test is not None else ""
        if callable_ and (why := check_target(callable_)):
            out.append(f"images/{slug}/image.yaml image_test.weights {callable_}: {why}")
        elif not callable_ and (folder / "weights.yaml").is_file():
            doc = yaml.safe_load((folder / "weights.yaml").read_text()) or {}
            wanted = sum(len(v) for v in doc.values() if isinstance(v, list))
            if wanted:
                out.append(f"images/{slug}: weights.yaml fetches {wanted} entries but "
                           "image.yaml has no image_test.weights callable: its pods get an "
                           "empty /weights")
    return out


def _upstream_message(missing: list[str]) -> str:
    return ("these images unpack upstream sources that this machine has not fetched:\n  "
            + "\n  ".join(missing) + "\nMake a bare mirror of each repository on a machine "
            "that reaches GitHub, e.g. `git clone --mirror https://github.com/<owner>/<name> "
            "/srv/git/<owner>+<name>/repo`, copy them here and set "
            "MADBENCH_UPSTREAM_GIT=/srv/git/{owner}+{name}/repo (the image builder reads "
            "them there; images/README.md)")


class BuildCancelled(ConfigError):
    """The rehearsal stopped while an image was building (not a failure of the image)."""


@dataclass
class ImageProvider:
    """Local builds for the workflows' images: bind, build, weight, remove."""

    state: State
    work: Path
    engine: str = "buildah"
    keep: bool = False
    log: Callable[[str], None] = print
    retain: set[str] = field(default_factory=set)
    python: str = sys.executable
    bound: dict[str, str] = field(default_factory=dict)
    ready: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _seen: dict[str, str | None] = field(default_factory=dict)
    _recipes: dict[str, str | None] = field(default_factory=dict)
    cancel: threading.Event = field(default_factory=threading.Event)
    """Set when the rehearsal stops: a build under way is killed."""
    image_tests: bool = False
    """Run each built image's ``make image-test`` before its first pod (``IMAGE_TESTS=1``)."""
    _digest: str = ""

    @property
    def prefix(self) -> str:
        """Start of the name of every working container this work folder's rehearsals
        make: a killed pass's leftovers are found by it and removed at the next start
        (they kept ``buildah rmi`` from removing their images)."""
        from madbench_common.build.containers import container_name

        tag = hashlib.sha256(str(self.work.resolve()).encode()).hexdigest()[:10]
        return container_name("madbench-rehearsal", tag) + "-"

    def container(self, *parts: str) -> str:
        from madbench_common.build.containers import container_name

        return container_name(self.prefix + "-".join(parts))

    def local_ref(self, ref: str) -> str:
        slug, tag = image_slug(ref)
        return f"localhost/madbench/{slug}:{tag}"

    def _lock(self, slug: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(slug, threading.Lock())

    def binding(self, slug: str, ref: str) -> str | None:
        """The image id pods of ``slug`` run: bound this session, else the local build,
        else the last one the rehearsal used (a resumed pass skips its pods by it), but
        only an image known to carry this checkout's ``madbench_common``. After a code
        change it is ``None`` until the image is checked or rebuilt, so no pod is skipped
        on a result of the old code (a resumed pass did skip component_qc after its fix)."""
        with self._guard:
            if slug in self.bound:
                return self.bound[slug]
            if slug not in self._seen:  # looked up once: pods resolve many times
                self._seen[slug] = _image_id(self.local_ref(ref))
            found = self._seen[slug]
        entry = self.state.image(slug)
        candidate = found or entry.get("image_id")
        if candidate and entry.get("image_id") == candidate \
                and entry.get("code_digest") == self.digest:
            return str(candidate)
        return None

    def pinned(self, ref: str) -> Callable[[], str]:
        """A lazy workflow-parameter value: ``ref@sha256:<bound image id>``."""
        base = ref.split("@", 1)[0]
        slug, _ = image_slug(base)

        def value() -> str:
            image_id = self.binding(slug, base)
            return f"{base}@sha256:{image_id}" if image_id else base

        return value

    def recipe(self, slug: str) -> str | None:
        """The build inputs of ``slug`` in this checkout (:func:`image_recipe`)."""
        with self._guard:
            if slug not in self._recipes:
                self._recipes[slug] = image_recipe(slug, self.digest)
            return self._recipes[slug]

    def _stable(self, image: str) -> str:
        """A pod's image as the memo sees it: the reference with its recipe in place of a
        pinned id (``@sha256:<id>``); an image with no folder here keeps its id."""
        base = image.split("@", 1)[0]
        recipe = self.recipe(image_slug(base)[0])
        return f"{base}#recipe:{recipe}" if recipe else image

    def pod_identity(self, pod: Pod) -> str:
        """What the executor keys a pod by (and, through the chain, every pod after it):
        :meth:`Pod.identity` of the pod with each pinned image, in its ``image`` and in
        its arguments and environment (``--image``, the provenance a stage records), in
        its recipe's form."""
        def stable(text: str) -> str:
            return _PINNED.sub(lambda m: self._stable(m.group(0)), text)

        env = tuple((k, stable(v) if isinstance(v, str) else v) for k, v in pod.env)
        return dataclasses.replace(pod, image=self._stable(pod.image), env=env,
                                   argv=tuple(stable(a) for a in pod.argv)).identity()

    def identity(self, image: str) -> str:
        """Recipe and tiny-weights digest of a pod image (its part of a memo key)."""
        slug, _ = image_slug(image.split("@", 1)[0])
        entry = self.state.image(slug)
        return f"{self._stable(image)}|{entry.get('weights_sha256', '')}"

    def weights_dir(self, slug: str) -> Path:
        return self.work / "weights" / slug

    def ensure(self, ref: str) -> str:
        """Make the image of ``ref`` ready (built, fresh, weighted); return its id."""
        base = ref.split("@", 1)[0]
        slug, _ = image_slug(base)
        with self._lock(slug):
            if slug in self.failed:
                raise ConfigError(self.failed[slug])
            if slug in self.ready:
                return self.bound[slug]
            try:
                image_id = self._ensure(slug, base)
            except BuildCancelled:
                raise
            except MadbenchError as exc:
                self.failed[slug] = f"image {slug}: {exc}"
                raise ConfigError(self.failed[slug]) from None
            if self.image_tests:
                self._image_test(slug, image_id)
            with self._guard:
                self.bound[slug] = image_id
            self.ready.add(slug)
            self.removed.discard(slug)
            return image_id

    def _ensure(self, slug: str, ref: str) -> str:
        local = self.local_ref(ref)
        image_id = _image_id(local)
        stale = image_id
        if image_id is not None and not self._fresh(slug, image_id):
            self.log(f"image {slug}: its madbench_common differs from this checkout's; "
                     "rebuilding")
            image_id = None
        entry = self.state.image(slug)
        if image_id is not None and entry.get("recipe_image") == image_id \
                and entry.get("recipe") != self.recipe(slug):
            self.log(f"image {slug}: its folder (Dockerfile, image.yaml, locks) or a "
                     "parent's changed since the rehearsal built it; rebuilding")
            image_id = None
        if image_id is None:
            built_before = entry.get("build_image_id")
            seconds = self._build(slug)
            image_id = _image_id(local)
            if image_id is None:
                raise ConfigError(f"the build did not produce {local}")
            self.state.update_image(slug, build_s=round(seconds, 1), build_image_id=image_id,
                                    recipe=self.recipe(slug), recipe_image=image_id,
                                    built_at=_utc_now())
            # the code the build copied, read in the image: what binding() trusts later
            if not self._fresh(slug, image_id):
                raise ConfigError(f"image {slug}: the build does not carry this checkout's "
                                  "madbench_common (was the checkout changed during the "
                                  "build?)")
            if stale is not None and stale != image_id and stale == built_before:
                self._drop_superseded(slug, stale)
        self._describe(slug, image_id)
        self._weights(slug, image_id)
        return image_id

    def _image_test(self, slug: str, image_id: str) -> None:
        """``make image-test IMAGE=<slug>`` of the image the pods will run, while it is on
        the machine (``IMAGE_TESTS=1``): one pass then builds every image once and proves
        each, where a separate loop of ``make image`` and ``make image-test`` over 28 images
        built them all again (6-8 GB each, so they cannot all be kept).

        The test is :mod:`madbench_common.testing.imagetest` itself, in a subprocess, and
        records its outcome under the slug's ``image_test:`` in ``images/images.lock.yaml``
        as the make target does. Skipped when the lock already holds a pass of this image
        id (a resumed pass), and for an image with no ``image_test`` block (a base, or an
        image with no folder here). A failure is logged and recorded; the pods still run,
        so the pass says what the image does in the graph too."""
        from madbench_common.build.images import load_image

        if not (ROOT / "images" / slug / "image.yaml").is_file():
            return
        info = load_image(slug)
        if not info.leaf or info.image_test is None:
            return
        done = _lock_image_test(slug)
        if done.get("result") == "pass" and _bare(done.get("image_id")) == _bare(image_id):
            self.state.update_image(slug, image_test=_test_summary(done))
            return
        log = self.work / "logs" / f"image-test-{slug}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT), "MADBENCH_RUN_ENGINE": self.engine}
        try:
            self._run_logged(["-m", "madbench_common.testing.imagetest", "test", slug], log,
                             env, f"the image test of {slug}")
        except BuildCancelled:
            raise
        except ConfigError as exc:
            self.log(f"image {slug}: its image test FAILED; the pods run all the same "
                     f"({exc!s:.400})")
        done = _lock_image_test(slug)
        if _bare(done.get("image_id")) != _bare(image_id):  # it never got to record
            done = {"result": "fail", "image_id": image_id,
                    "reason": f"the image test recorded nothing (log {log})"}
        summary = _test_summary(done)
        self.state.update_image(slug, image_test=summary)
        if summary["result"] == "pass":
            self.log(f"image {slug}: image test passed in {summary['wall_s']} s "
                     f"({'; '.join(f'{k}: {v}' for k, v in summary['stages'].items())})")

    def _drop_superseded(self, slug: str, old: str) -> None:
        """Remove the rehearsal's earlier build of ``slug``, which this rebuild replaced:
        its code or recipe is not this checkout's, so no pod can run in it again, and the
        new build took its tag. Left behind, a pass resumed on a new commit kept one
        untagged 6-8 GB image per rebuilt image (four at 665c969). Under the build lock
        (:meth:`release`), and whatever ``KEEP_IMAGES`` says: only a rehearsal's own
        build goes, never an image it found on the machine."""
        with _build_lock(True):
            note = _rmi(old)
        self.log(f"image {slug}: removed its superseded build {old[:12]}{note}")

    def _fresh(self, slug: str, image_id: str) -> bool:
        entry = self.state.image(slug)
        if entry.get("image_id") == image_id and entry.get("code_digest") == self.digest:
            return True
        try:
            inside = image_code_digest(image_id, self.engine, self.container(slug, "digest"))
        except MadbenchError:
            return False
        self.state.update_image(slug, image_id=image_id, code_digest=inside)
        return inside == self.digest

    @property
    def digest(self) -> str:
        if not self._digest:
            self._digest = code_digest()
        return self._digest

    def _build(self, slug: str) -> float:
        """Build the image (its base first); returns the image's own build seconds."""
        from madbench_common.build.imagebuild import BASES

        missing = upstream_problems([slug])
        if missing:
            raise ConfigError(_upstream_message(missing))
        logs = self.work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if (ROOT / "images" / slug / "image.yaml").is_file():  # bases first
            from madbench_common.build.imagebuild import local_ref
            from madbench_common.build.images import load_image

            python = load_image(slug).python
            base = BASES[python][0]
            if _image_id(local_ref(base)) is None:
                self._run_build(["bases", python], logs / f"build-{base}.log", env, base)
        start = time.monotonic()
        try:
            self._run_build(["image", slug], logs / f"build-{slug}.log", env, slug)
        except BuildCancelled:
            raise
        except ConfigError as exc:
            # once more: a shared machine's disk or network fails builds now and then (an
            # image that cannot be pulled is retried on a cluster too)
            self.log(f"image {slug}: the build failed; trying once more in 60 s ({exc!s:.300})")
            time.sleep(60)
            start = time.monotonic()
            self._run_build(["image", slug], logs / f"build-{slug}.retry.log", env, slug)
        return time.monotonic() - start

    def _run_build(self, args: list[str], log: Path, env: dict[str, str], what: str) -> None:
        if problem := disk_problem(what):
            raise ConfigError(problem)
        self._run_logged(["-m", "madbench_common.build.imagebuild", *args], log, env,
                         f"building {what}")

    def _run_logged(self, args: list[str], log: Path, env: dict[str, str], what: str) -> None:
        """``python <args>`` with its output in ``log``; killed when the rehearsal stops."""
        from madbench_common.cluster.podexec import kill_tree

        if self.cancel.is_set():
            raise BuildCancelled(f"{what}: cancelled")
        self.log(f"{what} (python {' '.join(args)}; log {log})")
        with open(log, "w") as fh:
            proc = subprocess.Popen([self.python, *args], stdout=fh, stderr=subprocess.STDOUT,
                                    cwd=ROOT, env=env)
            while proc.poll() is None:
                if self.cancel.wait(1.0):
                    kill_tree(proc.pid, signal.SIGTERM, include_self=True)
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        kill_tree(proc.pid, include_self=True)
                    proc.wait()
                    raise BuildCancelled(f"{what}: cancelled")
        if proc.returncode != 0:
            tail = log.read_text(errors="replace")[-1500:]
            raise ConfigError(f"{what} failed (exit {proc.returncode}; log {log}):\n{tail}")

    def _describe(self, slug: str, image_id: str) -> None:
        entry = self.state.image(slug)
        if entry.get("described") == image_id:
            return
        from madbench_common.build.containers import run_in_image

        code = ("import importlib.util as u\nif u.find_spec('torch'):\n import torch\n"
                " print(torch.__version__, torch.version.cuda or '')")
        try:
            parts = run_in_image(image_id, ["python", "-c", code], capture=True,
                                 engine=self.engine, name=self.container(slug, "describe")).split()
        except MadbenchError:
            parts = []
        built_here = entry.get("build_image_id") == image_id
        # the factory's record of this build (its seconds exclude waiting for the machine's
        # build lock); else the wall time of the rehearsal's build command
        lock_build = _lock_build(slug)
        if lock_build.get("image_id") in (image_id, f"sha256:{image_id}"):
            build_s = lock_build.get("build_s")
        else:
            build_s = entry.get("build_s") if built_here else None
        self.state.update_image(slug, image_id=image_id, described=image_id,
                                size_bytes=_image_size(image_id),
                                torch=parts[0] if parts else None,
                                cuda=parts[1] if len(parts) > 1 else None,
                                build_s=build_s, built_by_rehearsal=built_here)

    def _weights(self, slug: str, image_id: str) -> None:
        from madbench_common.build.containers import Mount, run_in_image
        from madbench_common.build.images import load_image

        folder = self.weights_dir(slug)
        callable_ = ""
        if (ROOT / "images" / slug / "image.yaml").is_file():
            test = load_image(slug).image_test
            callable_ = test.weights if test is not None else ""
        entry = self.state.image(slug)
        recipe = self.recipe(slug)
        # kept while the recipe is: a rebuild from the same inputs writes the same tiny
        # weights, and writing them anew would give pods that ran on these a new memo key
        # (some writers' files differ from run to run in bytes though not in values)
        same = entry.get("weights_image") == image_id if recipe is None \
            else entry.get("weights_recipe") == recipe
        if folder.is_dir() and same and entry.get("weights_callable") == callable_:
            sha, _, _ = _tree_digest(folder)
            if sha == entry.get("weights_sha256"):
                if entry.get("weights_image") != image_id:
                    self.state.update_image(slug, weights_image=image_id)
                return
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        os.chown(folder, 10001, 10001)
        seconds = 0.0
        if callable_:
            if (why := check_target(callable_)) is not None:
                raise ConfigError(f"images/{slug}/image.yaml image_test.weights "
                                  f"{callable_}: {why}")
            module, _, func = callable_.partition(":")
            self.log(f"image {slug}: writing tiny weights ({callable_})")
            start = time.monotonic()
            run_in_image(image_id, ["python", "-c", f"import {module} as m; m.{func}('/weights')"],
                         mounts=[Mount(folder, "/weights", read_only=False)],
                         engine=self.engine, capture=True, name=self.container(slug, "weights"))
            seconds = time.monotonic() - start
        sha, files, size = _tree_digest(folder)
        self.state.update_image(slug, weights_image=image_id, weights_callable=callable_,
                                weights_recipe=recipe, weights_sha256=sha, weights_files=files,
                                weights_bytes=size, weights_s=round(seconds, 1))

    def release(self, needed: Iterable[str], *, wait: bool = False) -> None:
        """Remove the ready images no pending pod needs (unless ``keep``). Only images a
        rehearsal built go: one that was on the machine already (the image factory's, a
        user's) is left as it was found, since the machine is shared.

        ``buildah rmi`` runs under the machine-wide image build lock: removing an image
        while another is building broke that build ("checking if cached image exists
        from a previous build: getting top layer info: layer not known", env-audioldm2
        in the pass at f4fc4e6, whose retry built it). While a build holds the lock the
        removal waits for the next finished pod (``wait=False``, so no pod slot waits on
        a build) or, at the end of a workflow (``wait=True``), for the lock."""
        if self.keep:
            return
        wanted = {image_slug(r.split("@", 1)[0])[0] for r in needed} | self.retain
        if not self.ready - wanted:
            return
        with _build_lock(wait) as held:
            if not held:
                self.log("image removal waits: an image is building (the build lock "
                         f"{_build_lock_path()} is held)")
                return
            self._remove(wanted)

    def _remove(self, wanted: set[str]) -> None:
        for slug in sorted(self.ready - wanted):
            image_id = self.bound.get(slug)
            if image_id is None:
                continue
            if self.state.image(slug).get("build_image_id") != image_id:
                with self._lock(slug):
                    self.ready.discard(slug)
                self.log(f"image {slug}: its last pod is done; kept (not built by the "
                         "rehearsal)")
                continue
            with self._lock(slug):
                note = _rmi(image_id)
                self.ready.discard(slug)
                self.removed.add(slug)
                self.log(f"image {slug}: its last pod is done; removed{note}")


def _rmi(image_id: str) -> str:
    """``buildah rmi`` (the caller holds the build lock); ``""`` or the failure, for a log
    line."""
    out = subprocess.run(["buildah", "rmi", image_id], capture_output=True, text=True)
    return "" if out.returncode == 0 else f" (rmi: {out.stderr.strip()[-200:]})"


_DISK_MARGIN_GIB = 2.0
_BUILD_TMP = Path("/var/tmp")  # buildah's temp folders (containers.conf image_copy_tmp_dir)
_STORAGE = Path("/var/lib/containers/storage")  # root's image store


def disk_problem(slug: str, present: Callable[[str], bool] | None = None,
                 lock: Mapping[str, Any] | None = None,
                 free: Callable[[Path], int] | None = None) -> str | None:
    """Why a build of ``slug`` would run out of disk, or ``None``: the free space where
    buildah writes is below what the images of its chain that are not built yet took at
    their peak when last built (``disk_peak_gb`` in images/images.lock.yaml; a cached
    build recorded less, so this is a floor), plus a margin.

    Builds that fill the disk fail minutes in with "no space left on device" (a torch
    base peaks at 13 to 26 GiB: torch-2.0.1 failed twice at about 17 GiB free in one
    pass); this names the need, the free space and what takes it before the build."""
    from madbench_common.build.imagebuild import image_exists, local_ref
    from madbench_common.build.imagelock import read_lock
    from madbench_common.build.images import chain, load_image

    try:
        slugs = [i.slug for i in chain(load_image(slug))]
        lock = read_lock(ROOT / "images" / "images.lock.yaml") if lock is None else lock
    except (MadbenchError, OSError):
        return None  # no folder or no lock: the build itself says what is wrong
    if present is None:
        def present(s: str) -> bool:
            try:
                return image_exists(local_ref(s), "buildah")
            except (MadbenchError, OSError, KeyError):
                return False
    todo = [s for s in slugs if s == slug or not present(s)]
    peaks = {s: float(((lock.get(s) or {}).get("build") or {}).get("disk_peak_gb") or 0)
             for s in todo}
    need = sum(peaks.values()) + _DISK_MARGIN_GIB
    usage = free or (lambda path: shutil.disk_usage(path).free)
    where = [p for p in (_BUILD_TMP, _STORAGE) if p.exists()] or [Path("/")]
    have = min(usage(p) for p in where) / 2**30
    if have >= need:
        return None
    built = ", ".join(f"{s} {g:.1f}" for s, g in peaks.items())
    return (f"image {slug}: {have:.1f} GiB free on the disk of {', '.join(map(str, where))}, "
            f"but its build needs at least {need:.1f} GiB (the peaks of the last builds, "
            f"images/images.lock.yaml disk_peak_gb, in GiB: {built}; plus "
            f"{_DISK_MARGIN_GIB:.0f} GiB). {_leftovers()}Free space (images removed after "
            "their last pod unless KEEP_IMAGES=1; `buildah rmi --prune` drops unused "
            "layers) and run the same command again: the pass resumes.")


def _leftovers() -> str:
    """Temp folders of builds killed mid-way (buildah leaves ``buildah*``/``storage*`` in
    /var/tmp; 12 GB of them stopped a pass here)."""
    dirs = sorted(p for pattern in ("buildah*", "storage*") for p in _BUILD_TMP.glob(pattern)
                  if p.is_dir() and not p.is_symlink())
    if not dirs:
        return ""
    size = 0
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                with contextlib.suppress(OSError):
                    size += os.lstat(os.path.join(root, f)).st_size
    names = ", ".join(d.name for d in dirs[:4]) + (" …" if len(dirs) > 4 else "")
    return (f"{len(dirs)} temp folders in {_BUILD_TMP} hold {size / 2**30:.1f} GiB ({names}): "
            "builds killed mid-way leave them; remove them when no build is running. ")


def _build_lock_path() -> Path:
    """The machine-wide image build lock that ``madbench_common.build.imagebuild`` holds
    for a build (the same file and variable)."""
    return Path(os.environ.get("MADBENCH_BUILD_LOCK", "/tmp/madbench-image-build.lock"))


@contextlib.contextmanager
def _build_lock(wait: bool) -> Iterator[bool]:
    """Hold the image build lock; yields False at once when another holds it and not
    ``wait``. (Not imagebuild.build_lock: that module is pod code, in the images' code
    digest, and this one waits without a message.)"""
    with open(_build_lock_path(), "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _lock_image_test(slug: str) -> dict[str, Any]:
    """The slug's ``image_test:`` record in ``images/images.lock.yaml`` (``{}`` if none)."""
    try:
        from madbench_common.build.imagelock import lock_entry

        return dict(lock_entry(slug).get("image_test") or {})
    except (ConfigError, OSError):
        return {}


def _bare(image_id: object) -> str:
    return str(image_id or "").removeprefix("sha256:")


def _test_summary(done: dict[str, Any]) -> dict[str, Any]:
    """What the state and the records keep of an image test record."""
    return {"result": done.get("result", "fail"), "wall_s": done.get("wall_s"),
            "image_id": _bare(done.get("image_id")), "stages": dict(done.get("stages") or {}),
            **({"reason": str(done["reason"])[-600:]} if done.get("reason") else {})}


def _lock_build(slug: str) -> dict[str, Any]:
    try:
        from madbench_common.build.imagelock import lock_entry

        return dict(lock_entry(slug).get("build") or {})
    except (ConfigError, OSError):
        return {}


# ------------------------------------------------------------------ pods


class _Cgroup:
    """A memory cgroup for one pod, below this process's own (v1 or v2)."""

    def __init__(self, limit: int | None) -> None:
        self.path: Path | None = None
        self.version = 0
        self.why = ""
        base = _memory_cgroup()
        if base is None:
            self.why = "no writable memory cgroup here"
            return
        path, version = base
        try:
            child = path / f"madbench-pod-{uuid.uuid4().hex[:12]}"
            child.mkdir()
            if limit:
                if version == 1:
                    (child / "memory.limit_in_bytes").write_text(str(limit))
                else:
                    (child / "memory.max").write_text(str(limit))
                    if (child / "memory.swap.max").exists():
                        (child / "memory.swap.max").write_text("0")
            self.path, self.version = child, version
        except OSError as exc:
            self.why = f"cannot make a memory cgroup under {path}: {exc}"

    def stats(self) -> dict[str, Any]:
        if self.path is None:
            return {"memory_limit_enforced": False, "memory_note": self.why}
        p = self.path
        peak: int | None
        try:
            if self.version == 1:
                peak = int((p / "memory.max_usage_in_bytes").read_text())
                oom = _kv(p / "memory.oom_control").get("oom_kill", 0)
            else:
                peak_file = p / "memory.peak"
                peak = int(peak_file.read_text()) if peak_file.exists() else None
                oom = _kv(p / "memory.events").get("oom_kill", 0)
        except (OSError, ValueError):
            return {"memory_limit_enforced": True}
        return {"memory_limit_enforced": True, "cgroup_peak_bytes": peak,
                "oom_killed": bool(oom)}

    def kill_all(self) -> None:
        if self.path is None:
            return
        for line in (self.path / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(line), signal.SIGKILL)

    def remove(self) -> None:
        if self.path is None:
            return
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                self.kill_all()
                time.sleep(0.2)


def _kv(path: Path) -> dict[str, int]:
    out = {}
    for line in path.read_text().splitlines():
        k, _, v = line.partition(" ")
        if v.strip().isdigit():
            out[k] = int(v)
    return out


def _memory_cgroup() -> tuple[Path, int] | None:
    """This process's memory cgroup directory and its version, if we may write there."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    mounts = Path("/proc/self/mountinfo").read_text().splitlines()

    def under(fields: list[str], rel: str) -> Path:
        """The cgroup ``rel`` below the mount (whose own root is ``fields[3]``)."""
        root = fields[3].rstrip("/")
        rel = rel[len(root):] if root and rel.startswith(root) else rel
        return Path(fields[4]) / rel.lstrip("/")

    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(","):
            for m in mounts:
                fields = m.split()
                sep = fields.index("-")
                if fields[sep + 1] == "cgroup" and "memory" in fields[-1].split(","):
                    path = under(fields, rel)
                    return (path, 1) if os.access(path, os.W_OK) else None
    for line in lines:
        if line.startswith("0::"):
            for m in mounts:
                fields = m.split()
                sep = fields.index("-")
                if fields[sep + 1] == "cgroup2":
                    path = under(fields, line[3:])
                    ctl = path / "cgroup.controllers"
                    if ctl.exists() and "memory" in ctl.read_text().split() and \
                            os.access(path, os.W_OK):
                        return path, 2
    return None


class PodRunner:
    """Runs pods in their images inside the sandbox; what :class:`Executor` calls."""

    def __init__(self, provider: ImageProvider, secrets: Mapping[str, Mapping[str, str]],
                 work: Path, netns: str | None, engine: str = "buildah",
                 python: str = sys.executable, cpu_deadline_scale: float = 1.0) -> None:
        self.cpu_deadline_scale = cpu_deadline_scale
        self.provider, self.secrets, self.work = provider, secrets, work
        self.netns, self.engine, self.python = netns, engine, python
        self.logs = work / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self._redact = sorted({v for s in secrets.values() for v in s.values()
                               if len(v) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for value in self._redact:
            text = text.replace(value, "***")
        return text

    def prepare(self, pod: Pod) -> None:
        self.provider.ensure(pod.image)

    def _env(self, pod: Pod) -> dict[str, str]:
        env = {}
        for name, value in pod.env:
            if isinstance(value, SecretRef):
                found = self.secrets.get(value.secret, {}).get(value.key)
                if found is None:
                    if value.optional:
                        continue
                    raise ConfigError(f"secret {value.secret!r} has no key {value.key!r} (the "
                                      "pod could not start: CreateContainerConfigError)")
                env[name] = found
            else:
                env[name] = value
        return env

    def _mounts(self, pod: Pod) -> list[list[Any]]:
        out = []
        slug, _ = image_slug(pod.image.split("@", 1)[0])
        for m in pod.mounts:
            if m.kind == "emptyDir":
                if m.path != "/tmp":
                    raise ConfigError(f"emptyDir at {m.path}: only /tmp (the engine's tmpfs) "
                                      "is supported")
                continue
            if m.claim != _WEIGHTS_CLAIM:
                raise ConfigError(f"no local volume for the claim {m.claim!r}")
            if not m.read_only:
                raise ConfigError(f"the weights claim is mounted writable at {m.path}")
            folder = self.provider.weights_dir(slug)
            folder.mkdir(parents=True, exist_ok=True)
            out.append([str(folder), m.path, True])
        return out

    def deadline(self, pod: Pod) -> float | None:
        """The pod's ``activeDeadlineSeconds``; a GPU pod's times ``cpu_deadline_scale``,
        since it runs on the CPU here (AV Anomaly's full-size backbone took more than the
        template's hour for one shard of 120 samples on 2 cores)."""
        if not pod.deadline:
            return None
        return float(pod.deadline) * (self.cpu_deadline_scale if pod.gpu else 1.0)

    def run(self, pod: Pod, attempt: int, cancel: threading.Event) -> PodResult:
        start = time.monotonic()
        info: dict[str, Any] = {"memory_limit": pod.memory_limit, "gpu_requested": pod.gpu}
        deadline = self.deadline(pod)
        if deadline:
            info["deadline_s"] = deadline
        try:
            env = self._env(pod)
            mounts = self._mounts(pod)
            image_id = self.provider.ensure(pod.image)
        except ConfigError as exc:
            return PodResult("Error", None, str(exc), 0.0, {**info, "no_retry": True})
        safe = re.sub(r"[^A-Za-z0-9_.()-]", "_", pod.node)
        log = self.logs / pod.node.split(".", 1)[0] / f"{safe}.{attempt}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        result_file = log.with_suffix(".result.json")
        result_file.unlink(missing_ok=True)
        cgroup = _Cgroup(pod.memory_limit)
        request = {"image": image_id, "argv": list(pod.argv), "env": env, "mounts": mounts,
                   "engine": self.engine, "netns": self.netns,
                   "cgroup": str(cgroup.path) if cgroup.path else None,
                   "result": str(result_file),
                   "name": self.provider.container(safe, str(attempt))}
        tail: list[str] = []
        reason = ""
        from madbench_common.cluster.sandbox import pdeathsig

        try:
            proc = subprocess.Popen([self.python, "-m", "madbench_common.cluster.podexec"],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                                    start_new_session=True, preexec_fn=pdeathsig())
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(json.dumps(request))
            proc.stdin.close()
            reader = threading.Thread(target=self._pump, args=(proc.stdout, log, tail),
                                      daemon=True)
            reader.start()
            while proc.poll() is None:
                if cancel.wait(1.0) and not reason:
                    reason = "cancelled"
                elif deadline and time.monotonic() - start > deadline and not reason:
                    reason = (f"deadline exceeded (activeDeadlineSeconds {pod.deadline:.0f}"
                              + (f" × {self.cpu_deadline_scale:g}, a GPU pod on the CPU)"
                                 if deadline != pod.deadline else ")"))
                if reason:
                    self._stop(proc, cgroup)
                    break
            proc.wait()
            reader.join(timeout=10)
        finally:
            info.update(cgroup.stats())
            cgroup.remove()
        seconds = time.monotonic() - start
        result = json.loads(result_file.read_text()) if result_file.exists() else {}
        info.update({"peak_rss_bytes": result.get("peak_rss_bytes"), "log": str(log)})
        message = self.redact("".join(tail))[-3000:]
        code = result.get("exit_code")
        if reason:
            return PodResult("Failed", code if code not in (None, 0) else 143,
                             f"{reason}\n{message}", seconds, info)
        if result.get("error"):
            return PodResult("Error", None, self.redact(result["error"]), seconds,
                             {**info, "no_retry": True})
        if code == 0:
            return PodResult("Succeeded", 0, message[-500:], seconds, info)
        if info.get("oom_killed"):
            message = f"OOMKilled (limits.memory {pod.memory_limit} bytes)\n{message}"
        return PodResult("Failed", code, message, seconds, info)

    def _pump(self, stream: Any, log: Path, tail: list[str]) -> None:
        with open(log, "w") as fh:
            for line in stream:
                line = self.redact(line)
                fh.write(line)
                tail.append(line)
                if len(tail) > 200:
                    del tail[:100]

    def _stop(self, proc: subprocess.Popen[str], cgroup: _Cgroup) -> None:
        from madbench_common.cluster.podexec import kill_tree

        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=_KILL_GRACE)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid, include_self=True)
            cgroup.kill_all()


# ------------------------------------------------------------------ rehearsal


@dataclass
class Options:
    work: Path
    workflows: tuple[str, ...] = ("full", "deaf")
    keep_images: bool = False
    image_tests: bool = False
    """``make image-test`` of every image the pass builds, before its pods (``IMAGE_TESTS=1``)."""
    workers: int = 0
    engine: str = "buildah"
    fresh: bool = False
    records: Path = RECORDS
    keep_going: bool = True
    backoff_scale: float = 1.0
    strict: bool = False
    params: tuple[str, ...] = ()
    """``NAME=VALUE`` workflow parameters over the profile's (every workflow declaring NAME)."""
    stage_sets: tuple[str, ...] = ()
    """``STAGE.KEY=VALUE`` merged into the ``stage_params`` of the workflows with STAGE."""


_PRINT = threading.Lock()


def _say(text: str) -> None:
    stamp = datetime.now().strftime("%H:%M:%S")
    with _PRINT:
        print(f"[{stamp}] {text}", flush=True)


def _commit() -> dict[str, Any]:
    """The commit the rehearsal ran on, and the tracked files that differed from it (image
    builds record themselves in images/images.lock.yaml, for one)."""
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                         text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                            "--untracked-files=no"], capture_output=True, text=True).stdout
    return {"head": out.stdout.strip() or "unknown",
            "modified": sorted(line[3:] for line in dirty.splitlines() if line.strip())}


def workflow_params(wf: Workflow, flow: WorkflowProfile, profile: Profile,
                    provider: ImageProvider | None, fields: Mapping[str, Any],
                    overrides: Mapping[str, str] | None = None,
                    stage_sets: Mapping[str, Mapping[str, Any]] | None = None
                    ) -> dict[str, Any]:
    """The ``argo submit -p`` values of one workflow in the rehearsal: the profile's, then
    ``overrides`` (``-p NAME=VALUE`` of the command line, those this workflow declares)
    and ``stage_sets`` merged into ``stage_params`` (``--set STAGE.KEY=VALUE``)."""
    declared = wf.parameters()
    params: dict[str, Any] = {"store": _STORE, "run_id": flow.run_id}
    if "sources" in declared:
        params["sources"] = f"{_SOURCES}/sources.csv"
    stage_params = _fill(flow.stage_params, fields)
    for stage, values in (stage_sets or {}).items():
        stage_params.setdefault(stage, {}).update(values)
    params["stage_params"] = json.dumps(stage_params, sort_keys=True)
    for name in declared:
        if name.endswith("_shards"):
            params[name] = str(profile.shards)
    params.update(_fill(dict(flow.params), fields))
    params.update({k: v for k, v in (overrides or {}).items() if k in declared})
    for name, default in declared.items():
        if (name.endswith("_image") or name == "summary_image") and provider is not None:
            params[name] = provider.pinned(str(params.get(name, default)))
    return params


def secret_problems(pods: Iterable[Pod], available: Mapping[str, Iterable[str]]) -> list[str]:
    """Each required ``secretKeyRef`` no local secret holds, as ``pod: secret/key`` (on a
    cluster such a pod never starts: CreateContainerConfigError). The deaf rehearsal found
    ``bsc_speech``'s ``AZURE_SPEECH_KEY`` so, two minutes into the run; now the preflight
    names it before anything is built."""
    keys = {name: set(values) for name, values in available.items()}
    out: list[str] = []
    for pod in pods:
        for _, value in pod.env:
            if isinstance(value, SecretRef) and not value.optional \
                    and value.key not in keys.get(value.secret, set()):
                out.append(f"{pod.node}: secret {value.secret!r} has no key {value.key!r}")
    return sorted(set(out))


def _upload_sources(s3: Any, csv_path: Path, every: int) -> int:
    """Every ``every``-th row of the CSV and its files into ``s3://madbench/sources/``."""
    import csv
    import io

    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))[::every]
    client = s3.client()
    buckets = {b["Name"] for b in client.list_buckets().get("Buckets", [])}
    if _BUCKET not in buckets:
        client.create_bucket(Bucket=_BUCKET)
    for row in rows:
        for col in ("path", "speech_stem", "env_stem"):
            if row.get(col):
                client.upload_file(str(csv_path.parent / row[col]), _BUCKET,
                                   f"sources/{row[col]}")
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    client.put_object(Bucket=_BUCKET, Key="sources/sources.csv", Body=out.getvalue().encode())
    return len(rows)


def _graph_for(name: str) -> Any:
    from madbench_common.cli.pipelines import build_pipeline

    return build_pipeline("deaf" if name == "deaf" else "madbench")


def _markers(s3: Any, run_id: str, graph: Any) -> dict[str, dict[str, Any]]:
    from madbench_common.core.store import RunStore, S3Store
    from madbench_common.pipeline.stage import read_marker

    run = RunStore(S3Store(_STORE, client=s3.client()), run_id)
    out = {}
    for stage in graph:
        marker = read_marker(run, stage.name)
        if marker is not None:
            out[stage.name] = marker
    return out


def _print_reports(s3: Any, name: str, run_id: str, graph: Any, banner: str) -> None:
    from madbench_common.cli.pipeline import main_section, print_status, zero_shot_sections
    from madbench_common.core.store import RunStore, S3Store
    from madbench_common.pipeline.stage import read_marker
    from madbench_common.pipeline.status import collect_status

    run = RunStore(S3Store(_STORE, client=s3.client()), run_id)
    print(f"\n{'=' * 100}\n{banner}\n{'=' * 100}")
    os.environ.setdefault("COLUMNS", "160")  # rich: tables as wide as a terminal's
    print_status(collect_status(run, graph), table1=name != "deaf")
    stage = "deaf_report" if name == "deaf" else "evaluate"
    marker = read_marker(run, stage)
    if marker is None:
        print(f"({name}: {stage} has not finished; no report)")
        return
    text = run.get_bytes(f"{marker['prefix']}/report/report.md").decode()
    if name == "deaf":
        print("## " + text.split("\n## ", 1)[1].strip() if "\n## " in text else text)
    else:
        print(main_section(text))
        for section in text.split("\n## ")[2:]:
            if section.startswith(("Table 3", "Table 4", "Table 5")):
                print("\n## " + section.strip())
        for section in zero_shot_sections(text):
            print("\n" + section)
    print(f"\n{banner}\nreport: {run.uri(marker['prefix'] + '/report/report.md')}")


def rehearse(opts: Options) -> int:
    """Run the rehearsal; returns 0 when every workflow succeeded. The work folder is
    locked meanwhile: two passes in one folder would share its store, state and
    containers."""
    work = opts.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    path = work / _LOCK
    with open(path, "a") as fh:  # the lock goes with the process, killed or not
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"{work}: another rehearsal is using this work folder (it "
                              f"holds {path}); wait for it, stop it, or pass another "
                              "--work") from None
        return _rehearse(opts, work)


_LOCK = ".lock"


def _rehearse(opts: Options, work: Path) -> int:
    from madbench_common.build.containers import remove_containers, run_engine
    from madbench_common.cluster.sandbox import STUB_PORT, Namespace, NamespacedS3, start_stub
    from madbench_common.models.api_stub import STUB_KEY

    t0 = time.monotonic()
    # SIGTERM stops like Ctrl-C: running pods are stopped and the services shut down (a
    # SIGKILL leaves nothing either: pods, store and stub die with their parent)
    signal.signal(signal.SIGTERM, _interrupt)
    profile = load_profile()
    flows = [f for f in profile.workflows if f.name in opts.workflows]
    if unknown := set(opts.workflows) - {f.name for f in profile.workflows}:
        raise ConfigError(f"no workflow {sorted(unknown)} in the rehearsal profile")
    if opts.engine == "docker":
        raise ConfigError("the docker engine runs containers in the daemon's network, not the "
                          "rehearsal's namespace: use buildah (root) or podman")
    engine = run_engine(opts.engine)
    if opts.fresh:
        _say(f"--fresh: emptying {work}")
        for entry in work.iterdir():
            if entry.name != _LOCK:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
    state = State(work / "state.json")
    provider = ImageProvider(state, work, engine, opts.keep_images, _say,
                             image_tests=opts.image_tests)
    if gone := remove_containers(provider.prefix, engine):
        _say(f"removed {len(gone)} working containers a killed pass left: {', '.join(gone)}")
    fields = {"stub_port": STUB_PORT}

    # 1. preflight: everything that can fail without building or running anything.
    # An unsupported construct or a missing upstream mirror stops here; what the dry run
    # finds wrong with single pods (a missing image folder, module or weights callable) is
    # listed, and those pods then fail in place, each naming its reason (--strict: stop).
    workflows = {f.name: Workflow.load(ROOT / f.file) for f in flows}
    overrides, stage_sets = _overrides(opts, flows, workflows)
    images: dict[str, set[str]] = {}
    problems: list[str] = []
    for flow in flows:
        wf = workflows[flow.name]
        params = workflow_params(wf, flow, profile, None, fields, overrides,
                                 stage_sets[flow.name])
        pods = Executor(wf, params, name=f"rehearsal-{flow.name}").dry_run()
        problems += [f"{flow.file}: {p}" for p in check_pods(pods)
                     if not p.startswith("warning:")]
        images[flow.name] = {image_slug(p.image)[0] for p in pods}
        if missing_keys := secret_problems(pods, {_S3_SECRET: _S3_KEYS,
                                                  _API_SECRET: profile.api_keys}):
            raise ConfigError(f"{flow.file}: " + "; ".join(missing_keys) + " (add the key to "
                              "api_keys in the rehearsal profile, madbench_common/data/"
                              "rehearsal.yaml)")
    needed = sorted(set().union(*images.values()))
    if missing := upstream_problems(needed):
        raise ConfigError(_upstream_message(missing))
    problems += weights_problems(needed)
    for line in problems:
        _say(f"preflight: {line}")
    if problems and opts.strict:
        raise ConfigError(f"the dry run finds {len(problems)} problems (listed above)")
    _say(f"preflight: {', '.join(f.file for f in flows)}; {len(needed)} images; "
         f"{len(problems)} problems; engine {engine}; work folder {work}")

    # 2. sandbox
    state.begin_part()
    ns = Namespace().start()
    s3 = stub = None
    interrupted: KeyboardInterrupt | None = None
    markers: dict[str, dict[str, dict[str, Any]]] = {}
    results: dict[str, WorkflowResult] = {}
    memos: dict[str, StateMemo] = {}
    executors: dict[str, Executor] = {}
    departures: dict[str, list[dict[str, Any]]] = {}
    try:
        isolation = ns.check_isolated()
        s3 = NamespacedS3(work / "s3", ns)  # bound first: an interrupt during its start
        s3.start()  # still stops it (SeaweedFS outlived a Ctrl-C here)
        stub = start_stub(ns, work)
        clips = ns.call(_upload_sources, s3, ROOT / profile.sources_csv, profile.every)
        _say(f"sandbox: namespace {isolation}; object store and API stub inside; "
             f"{clips} source clips uploaded to {_SOURCES}/")
        secrets = {_S3_SECRET: {k: v for k, v in s3.env().items() if k in _S3_KEYS},
                   _API_SECRET: {k: STUB_KEY for k in profile.api_keys}}
        runner = PodRunner(provider, secrets, work, ns.path, engine,
                           cpu_deadline_scale=profile.cpu_deadline_scale)
        for i, flow in enumerate(flows):
            provider.retain = {slug for f in flows[i + 1:] for slug in images[f.name]}
            wf = workflows[flow.name]
            graph = _graph_for(flow.name)
            done_now = ns.call(_markers, s3, flow.run_id, graph)
            memo = StateMemo(state, flow.name, provider, functools.partial(set, done_now))
            memos[flow.name] = memo
            params = workflow_params(wf, flow, profile, provider, fields, overrides,
                                     stage_sets[flow.name])
            ex = Executor(wf, params, runner=runner, workers=opts.workers or profile.workers,
                          name=f"rehearsal-{flow.name}", stop_on_failure=not opts.keep_going,
                          memo=memo, backoff_scale=opts.backoff_scale,
                          pod_identity=provider.pod_identity,
                          rank=lambda pod: 0 if image_slug(pod.image.split("@", 1)[0])[0]
                          in provider.ready else 1)
            ex.on_event = _events(ex, provider)
            provider.cancel = ex.cancel
            executors[flow.name] = ex
            departures[flow.name] = [r.as_dict() for r in argo_relaxations(
                wf, params, cpu_deadline_scale=profile.cpu_deadline_scale,
                workers=opts.workers or profile.workers, stop_on_failure=not opts.keep_going,
                backoff_scale=opts.backoff_scale)]
            _say(f"{flow.name}: executing {flow.file} as workflow {ex.name} (run id "
                 f"{flow.run_id})")
            started = time.monotonic()
            try:
                results[flow.name] = ex.run()
            except KeyboardInterrupt:
                results[flow.name] = ex.snapshot("Interrupted", time.monotonic() - started)
                raise
            provider.release((), wait=True)  # what a build kept from going (release's doc)
            _say(f"{flow.name}: {results[flow.name].phase} in "
                 f"{results[flow.name].seconds:.0f} s")
            ns.call(_print_reports, s3, flow.name, flow.run_id, graph, flow.banner)
        markers = {f.name: ns.call(_markers, s3, f.run_id, _graph_for(f.name)) for f in flows}
    except KeyboardInterrupt as exc:
        # a stopped pass still says what it did (a session's end stops a pass of hours):
        # the pods done so far, their peaks and the rows of the stages that finished
        interrupted = exc
        if s3 is not None:
            with contextlib.suppress(Exception):
                markers = {n: ns.call(_markers, s3, f.run_id, _graph_for(n))
                           for f in flows if (n := f.name) in results}
    except BaseException:
        state.end_part("error")
        raise
    finally:
        if stub is not None:
            stub.terminate()
            stub.wait(timeout=10)
        if s3 is not None:
            s3.stop()
        ns.stop()
    wall = time.monotonic() - t0
    records = build_records(state, results, markers, provider, wall, opts, profile)
    records["argo_departures"] = departures  # per workflow, as cluster.relaxations lists them
    if interrupted is not None:
        records["complete"] = False
        records["interrupted"] = str(interrupted) or "Ctrl-C"
    state.end_part("interrupted" if interrupted is not None
                   else "complete" if records["complete"] else "incomplete")
    add_parts(records, state)
    write_records(records, opts.records)
    _say(f"records: {opts.records} and {opts.records.with_suffix('.md')}; wall time "
         f"{wall / 60:.1f} min")
    if interrupted is not None:
        raise interrupted
    bad = [n for n, r in results.items() if r.phase != "Succeeded"]
    for name in bad:
        for failure in results[name].failures:
            _say(f"{name}: FAILED {failure['podName']}: {failure['message'][-600:]}")
    return 0 if not bad and len(results) == len(flows) else 1


def _overrides(opts: Options, flows: list[WorkflowProfile], workflows: Mapping[str, Workflow]
               ) -> tuple[dict[str, str], dict[str, dict[str, dict[str, Any]]]]:
    """``-p NAME=VALUE`` (some workflow must declare NAME) and ``--set STAGE.KEY=VALUE``
    (some workflow's graph must have STAGE) from the command line, per workflow."""
    from madbench_common.cli.pipeline import parse_set

    params: dict[str, str] = {}
    for item in opts.params:
        name, eq, value = item.partition("=")
        if not eq or not any(name in wf.parameters() for wf in workflows.values()):
            raise ConfigError(f"-p {item!r}: no workflow of this rehearsal has a parameter "
                              f"{name!r}")
        params[name] = value
    sets = parse_set(opts.stage_sets)
    per: dict[str, dict[str, dict[str, Any]]] = {}
    for flow in flows:
        stages = set(_graph_for(flow.name).stages)
        per[flow.name] = {k: v for k, v in sets.items() if k in stages}
    if unknown := set(sets) - {s for p in per.values() for s in p}:
        raise ConfigError(f"--set: no workflow of this rehearsal has stage(s) {sorted(unknown)}")
    return params, per


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _events(ex: Executor, provider: ImageProvider) -> Callable[[str, dict[str, Any]], None]:
    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "pod_start":
            _say(f"start  {data['node']} (attempt {data['attempt']})")
        elif kind == "pod_skipped":
            _say(f"done before: {data['node']}")
        elif kind == "pod_retry":
            _say(f"retry  {data['node']} in {data['in_seconds']:.0f} s")
        elif kind == "pod_done":
            info = data["info"]
            rss = info.get("peak_rss_bytes")
            _say(f"{data['phase'].lower():9s} {data['node']} exit {data['exit_code']} "
                 f"{data['seconds']:.0f} s" + (f", peak RSS {rss / 2**20:.0f} MiB" if rss else "")
                 + ("" if data["phase"] == "Succeeded" else f"\n{data['message'][-1500:]}"))
            provider.release(ex.pending_images())

    return on_event


# ------------------------------------------------------------------ records


def build_records(state: State, results: Mapping[str, WorkflowResult],
                  markers: Mapping[str, Mapping[str, dict[str, Any]]],
                  provider: ImageProvider, wall: float, opts: Options, profile: Profile
                  ) -> dict[str, Any]:
    """Per image: build, size, torch/CUDA, weights, stages (rows, rejection reasons, the
    kind of model each ran), rows, peak RSS and whether it asked for a GPU and ran on the
    CPU; the relaxations of the pass."""
    per: dict[str, dict[str, Any]] = {}
    flows = {f.name: f for f in profile.workflows}
    for flow, result in results.items():
        for node, data in result.nodes.items():
            image = data.get("image")
            if not image:
                continue
            slug = image_slug(image.split("@", 1)[0])[0]
            rec = per.setdefault(slug, {"stages": set(), "pods": 0, "pods_run": 0,
                                        "pods_skipped": 0, "peak_rss_bytes": 0, "pod_s": 0.0,
                                        "cgroup_peak_bytes": 0, "failed": [],
                                        "gpu_requested": False, "workflows": set()})
            rec["workflows"].add(flow)
            rec["pods"] += 1
            # the template's request, whether its pod ran, was skipped or never started
            rec["gpu_requested"] |= bool(data.get("gpu"))
            attempts = data.get("attempts") or []
            if data.get("memo"):
                rec["pods_skipped"] += 1
            elif attempts:
                rec["pods_run"] += 1
            # a pod skipped by the memo ran before on the same image, weights and inputs: its
            # peaks are those of that run (a pass resumed across sessions keeps them)
            for a in [*attempts, *([data["earlier"]] if data.get("earlier") else [])]:
                rec["pod_s"] += float(a.get("seconds") or 0)
                rec["peak_rss_bytes"] = max(rec["peak_rss_bytes"], a.get("peak_rss_bytes") or 0)
                rec["cgroup_peak_bytes"] = max(rec["cgroup_peak_bytes"],
                                               a.get("cgroup_peak_bytes") or 0)
                rec["gpu_requested"] |= bool(a.get("gpu_requested"))
            if data["phase"] in ("Failed", "Error"):
                last = attempts[-1] if attempts else {}
                rec["failed"].append({"node": node, "phase": data["phase"],
                                      "exit_code": last.get("exit_code"),
                                      "message": str(last.get("message", ""))[-800:]})
            stage = _stage_from_template(data.get("template", ""))
            if stage:
                rec["stages"].add((flow, stage))
    images = {}
    for slug, rec in sorted(per.items()):
        entry = state.image(slug)
        rows: dict[str, dict[str, Any] | None] = {}
        models: dict[str, str] = {}
        for flow, stage in sorted(rec["stages"]):
            name = stage.replace("-", "_")
            m = markers.get(flow, {}).get(name)
            rows[f"{flow}:{name}"] = _stage_record(m) if m else None
            models[f"{flow}:{name}"] = model_kind(
                slug, name, flows.get(flow), {s.replace("-", "_") for f, s in rec["stages"]
                                              if f == flow})
        ok = sum(r["rows"] - r["rejected"] for r in rows.values() if r)
        rejected = sum(r["rejected"] for r in rows.values() if r)
        images[slug] = {
            "image_id": entry.get("image_id"), "build_s": entry.get("build_s"),
            "built_by_rehearsal": bool(entry.get("built_by_rehearsal")),
            "size_mb": round(entry["size_bytes"] / 1e6) if entry.get("size_bytes") else None,
            "torch": entry.get("torch"), "cuda": entry.get("cuda"),
            "weights": {"callable": entry.get("weights_callable") or None,
                        "files": entry.get("weights_files"),
                        "mb": round((entry.get("weights_bytes") or 0) / 1e6, 1),
                        "seconds": entry.get("weights_s")},
            "workflows": sorted(rec["workflows"]), "stages": rows, "models": models,
            "rows_ok": ok, "rows_rejected": rejected,
            "pods": rec["pods"], "pods_run": rec["pods_run"], "pods_skipped": rec["pods_skipped"],
            "pod_s": round(rec["pod_s"]),
            "peak_rss_mb": round(rec["peak_rss_bytes"] / 2**20) or None,
            "cgroup_peak_mb": round(rec["cgroup_peak_bytes"] / 2**20) or None,
            "gpu_requested_ran_on_cpu": rec["gpu_requested"],
            "status": "failed" if rec["failed"] else "ok", "failures": rec["failed"],
            "image_test": test if (test := entry.get("image_test")) and entry.get("image_id")
            and test.get("image_id") == _bare(entry.get("image_id")) else None,
        }
    tiny = any(f.random_weights for f in profile.workflows if f.name in results)
    # a stage that rejected every row it got stops the data: the stages after it
    # "succeed" on nothing, and a report of empty tables is no rehearsal (a full pass
    # reached the detectors with 0 samples: component_qc rejected every environment
    # component, then assemble every sample). A stage given no row at all may be
    # legitimate (features_references has no model in the full profile).
    empty = sorted({stage for r in images.values() for stage, n in r["stages"].items()
                    if n is not None and n["rows"] > 0 and n["rows"] <= n["rejected"]})
    return {
        "note": BANNER if tiny else SMOKE_BANNER, "commit": _commit(),
        "code_digest": provider.digest,
        "finished_at": _utc_now(),
        "wall_s": round(wall), "complete": all(r.phase == "Succeeded" for r in results.values())
        and set(results) == set(opts.workflows) and not (opts.params or opts.stage_sets)
        and not empty,
        "empty_stages": empty,
        "workflows": {n: {"phase": r.phase, "seconds": round(r.seconds),
                          "failures": [{k: f.get(k) for k in ("podName", "phase", "exitCode",
                                                              "message")}
                                       for f in r.failures]}
                      for n, r in results.items()},
        "relaxations": relaxations(profile, opts, [f for f in profile.workflows
                                                   if f.name in results]),
        "rejections": {stage: n["reasons"] for r in images.values()
                       for stage, n in r["stages"].items() if n is not None and n["reasons"]},
        "profile": {"clips_every": profile.every, "shards": profile.shards,
                    "cpu_deadline_scale": profile.cpu_deadline_scale,
                    "workers": opts.workers or profile.workers,
                    "keep_images": opts.keep_images, "image_tests": opts.image_tests,
                    "overrides": [*(f"-p {p}" for p in opts.params),
                                  *(f"--set {s}" for s in opts.stage_sets)]},
        "images": images,
    }


def _stage_record(marker: Mapping[str, Any]) -> dict[str, Any]:
    """A stage's rows, rejected rows, rejected rows by reason and those of them that count
    against its rejection budget (faults), from its ``_SUCCESS`` marker."""
    from madbench_common.pipeline.failures import BUDGET_PARAM, is_fault

    reasons = {str(k): int(v) for k, v in (marker.get("reasons") or {}).items()}
    return {"rows": int(marker.get("rows") or 0), "rejected": int(marker.get("rejected") or 0),
            "reasons": reasons, "faults": sum(n for k, n in reasons.items() if is_fault(k)),
            BUDGET_PARAM: (marker.get("budget") or {}).get(BUDGET_PARAM)}


STANDIN_WEIGHTS = "madbench_common.models.tiny.remote"
"""The module whose tiny-weights writers put stand-in remote code in place of hub-only
architectures (DF-Arena, MiniCPM-o): an image whose ``image_test.weights`` is one of its
functions runs a stand-in, not the release's code."""
MODEL_KINDS = {
    "tiny_random": "the release's own code on a randomly initialised tiny checkpoint",
    "stand_in": "stand-in code for a hub-only architecture, random weights (‡)",
    "api_stub": "an API model answered by the local API stub (§)",
    "reference": "the CPU reference image: a reference model or no model (†)",
}


def _standin_image(slug: str) -> bool:
    from madbench_common.build.images import load_image

    if not (ROOT / "images" / slug / "image.yaml").is_file():
        return False
    test = load_image(slug).image_test
    return test is not None and test.weights.split(":", 1)[0] == STANDIN_WEIGHTS


def _stub_stages(flow: WorkflowProfile, stages: Iterable[str]) -> set[str]:
    """The stages the profile points at the API stub: a ``stage_params`` entry, or a
    ``<stage>_<param>`` workflow parameter, whose value names ``{stub_port}``."""
    names = sorted(stages, key=len, reverse=True)
    out = {s for s, v in flow.stage_params.items() if "{stub_port}" in json.dumps(v)}
    for param, value in flow.params.items():
        if "{stub_port}" in value:
            out |= {next((s for s in names if param.startswith(f"{s}_")), param)}
    return out


def model_kind(slug: str, stage: str, flow: WorkflowProfile | None,
               stages: Iterable[str] = ()) -> str:
    """What ran in ``stage`` on image ``slug``: a key of :data:`MODEL_KINDS`."""
    if flow is not None and stage in _stub_stages(flow, {stage, *stages}):
        return "api_stub"
    if slug == "reference-cpu" or (flow is not None and not flow.random_weights):
        return "reference"
    return "stand_in" if _standin_image(slug) else "tiny_random"


def relaxations(profile: Profile, opts: Options, flows: Sequence[WorkflowProfile]
                ) -> list[dict[str, Any]]:
    """Every way the pass differs from ``argo submit`` of the committed workflows on a
    cluster, in one place: the shard counts, the GPU pods' deadlines, the profile's
    workflow and stage parameters, and the executor's failFast."""
    out: list[dict[str, Any]] = [
        {"name": "shards", "value": profile.shards,
         "what": f"every <stage>_shards workflow parameter set to {profile.shards}"},
        {"name": "gpu_on_cpu", "value": True,
         "what": "a pod that requests nvidia.com/gpu runs on the CPU (no GPU here); see "
                 "gpu_requested_ran_on_cpu per image"},
        {"name": "gpu_deadline_scale", "value": profile.cpu_deadline_scale,
         "what": f"activeDeadlineSeconds of a GPU pod multiplied by "
                 f"{profile.cpu_deadline_scale:g}"},
    ]
    for flow in flows:
        if flow.params:
            out.append({"name": f"{flow.name}:workflow_params", "value": sorted(flow.params),
                        "what": f"{flow.file}: the profile's -p values"})
        if flow.stage_params:
            out.append({"name": f"{flow.name}:stage_params",
                        "value": {s: sorted(v) for s, v in sorted(flow.stage_params.items())},
                        "what": f"{flow.file}: the profile's stage parameters (QC thresholds, "
                                "sizes, the API stub)"})
    if not opts.keep_going:
        out.append({"name": "stop_on_failure", "value": True,
                    "what": "no new task of a DAG started after its first failure (stricter "
                            "than Argo, which keeps scheduling while any node runs)"})
    return out


def add_parts(records: dict[str, Any], state: State) -> None:
    """The parts of the pass this record ends, from the state: ``wall_s`` becomes the
    pass's, every part's added up (a part killed outright counts to its last save);
    ``part_wall_s`` is this part's. A pass resumed across sessions recorded only its last
    part's minutes before."""
    parts = state.pass_parts()
    records["parts"] = parts
    records["part_wall_s"] = records["wall_s"]
    records["wall_s"] = sum(int(p.get("wall_s") or 0) for p in parts) or records["wall_s"]


def _stage_from_template(template: str) -> str:
    for suffix in ("-shard", "-merge"):
        if template.endswith(suffix):
            return template[: -len(suffix)]
    return ""


def _test_cell(test: dict[str, Any] | None) -> str:
    """The record's image-test cell: this pass's image tested (``IMAGE_TESTS=1``) or not."""
    if not test:
        return "—"
    return f"pass ({test.get('wall_s')} s)" if test.get("result") == "pass" else "FAIL"


def _wall_text(records: dict[str, Any]) -> str:
    parts = records.get("parts") or ()
    if len(parts) <= 1:
        return f"{records['wall_s'] / 60:.1f} min"
    part = records.get("part_wall_s", records["wall_s"])
    return (f"{records['wall_s'] / 60:.1f} min in {len(parts)} parts (this part "
            f"{part / 60:.1f} min)")


def write_records(records: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    path.with_suffix(".md").write_text(records_markdown(records))


def records_markdown(records: dict[str, Any]) -> str:
    """The per-image table of a rehearsal record."""
    lines = [
        "# Rehearsal record (generated by `make rehearsal`; do not edit)",
        "",
        f"> {records['note']}",
        "",
        f"Commit `{records['commit']['head']}`"
        + (f" (modified: {', '.join(records['commit']['modified'])})"
           if records["commit"]["modified"] else "")
        + (f", code digest `{records['code_digest'][:12]}`" if records.get("code_digest")
           else "")
        + f", finished {records['finished_at']}, wall time " + _wall_text(records)
        + f", complete: {'yes' if records['complete'] else 'no'}.",
        "",
    ]
    if len(records.get("parts") or ()) > 1:
        lines += ["Parts of this pass (each a run of `make rehearsal` that resumed the one "
                  "before):", ""]
        lines += [f"{i}. started {p.get('started_at')}, {int(p.get('wall_s') or 0) / 60:.1f} "
                  f"min, {p.get('outcome')}"
                  + (f" (last seen {p['saved_at']})" if p.get("outcome") == "killed"
                     and p.get("saved_at") else "")
                  for i, p in enumerate(records["parts"], 1)]
        lines.append("")
    if records.get("interrupted"):
        lines += [f"Interrupted ({records['interrupted']}): this records what ran until then; "
                  "the same command resumes the pass.", ""]
    if records["profile"].get("overrides"):
        lines += ["Not the profile as committed: " + ", ".join(
            f"`{o}`" for o in records["profile"]["overrides"]) + ".", ""]
    if records.get("relaxations"):
        lines += ["Relaxations of this pass (what differs from `argo submit` on a cluster):", ""]
        lines += [f"- `{r['name']}`: {r['what']}" for r in records["relaxations"]]
        lines.append("")
    if records.get("rejections"):
        from madbench_common.pipeline.failures import is_fault

        lines += ["Rejected rows by stage and reason (**bold**: a fault, which counts against "
                  "the stage's rejection budget; the others are about the input data):", ""]
        lines += [f"- `{stage}`: " + ", ".join(
            (f"**{k}** {n}" if is_fault(k) else f"{k} {n}")
            for k, n in sorted(reasons.items(), key=lambda kv: (not is_fault(kv[0]), -kv[1])))
            for stage, reasons in sorted(records["rejections"].items())]
        lines.append("")
    if records.get("empty_stages"):
        lines += ["Stages that rejected every row they got: " + ", ".join(
            f"`{s}`" for s in records["empty_stages"]) + ".", ""]
    for name, w in records["workflows"].items():
        lines.append(f"- `{name}`: {w['phase']} in {w['seconds'] / 60:.1f} min" +
                     "".join(f"; failed {f['podName']} (exit {f['exitCode']})"
                             for f in w["failures"][:8]))
    tested = [r["image_test"] for r in records["images"].values() if r.get("image_test")]
    if records["profile"].get("image_tests") or tested:
        failed = [s for s, r in records["images"].items()
                  if r.get("image_test") and r["image_test"]["result"] != "pass"]
        lines += ["", f"Image tests (`make image-test` of the image the pods ran): "
                  f"{len(tested) - len(failed)} passed, {len(failed)} failed"
                  + (f" ({', '.join(failed)})" if failed else "") + "."]
    lines += ["", "A pod skipped by the memo ran in an earlier part of this pass on the same "
              "image, weights and inputs: its seconds and peak RSS are that run's. Pod seconds "
              "add up every pod's wall time (pods run side by side).",
              "", "Stages: " + "; ".join(f"{m}" for k, m in MODEL_KINDS.items()
                                         if k != "tiny_random") + ". GPU: the image's pods "
              "request nvidia.com/gpu and ran on the CPU.",
              "", "| image | build s | size MB | torch / CUDA | weights files (MB) | stages "
              "| rows ok / rejected | pods run / skipped | pod s | peak RSS MiB | GPU "
              "| image test | status |",
              "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---|---|---|"]
    marks = {"stand_in": "‡", "api_stub": "§", "reference": "†", "tiny_random": ""}
    for slug, r in records["images"].items():
        models = r.get("models") or {}
        stages = ", ".join(k.split(":", 1)[1] + marks.get(models.get(k, ""), "")
                           for k in r["stages"])
        w = r["weights"]
        lines.append(
            f"| {slug} | {r['build_s'] if r['build_s'] is not None else '—'} | "
            f"{r['size_mb'] or '—'} | {r['torch'] or '—'} / {r['cuda'] or '—'} | "
            f"{w['files'] if w['callable'] else '—'} ({w['mb']}) | {stages} | "
            f"{r['rows_ok']} / {r['rows_rejected']} | {r['pods_run']} / {r['pods_skipped']} | "
            f"{r['pod_s']} | {r['peak_rss_mb'] or '—'} | "
            f"{'on CPU' if r.get('gpu_requested_ran_on_cpu') else '—'} | "
            f"{_test_cell(r.get('image_test'))} | "
            f"{r['status']} |")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ CLI


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``rehearse run`` and ``rehearse dry-run``."""
    p = sub.add_parser("rehearse", help="execute rendered workflows locally (make rehearsal)")
    rsub = p.add_subparsers(dest="rehearse_command", required=True)
    run = rsub.add_parser("run", help="the rehearsal: full.yaml then deaf.yaml on tiny weights")
    run.add_argument("--work", default=".rehearsal", help="work folder (default .rehearsal)")
    run.add_argument("--workflows", default="full,deaf")
    run.add_argument("--keep-images", action="store_true",
                     default=os.environ.get("KEEP_IMAGES") == "1",
                     help="keep every image (default: remove each after its last pod)")
    run.add_argument("--image-tests", action="store_true",
                     default=os.environ.get("IMAGE_TESTS") == "1",
                     help="run each image's make image-test when it is ready, before its "
                          "pods, and record it in images/images.lock.yaml")
    run.add_argument("--workers", type=int, default=0, help="pods at a time (default: profile)")
    run.add_argument("--engine", default=os.environ.get("MADBENCH_RUN_ENGINE") or "buildah")
    run.add_argument("--fresh", action="store_true", help="forget the work folder first")
    run.add_argument("--records", default=str(RECORDS))
    run.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                     help="a workflow parameter over the profile's, as argo submit -p (e.g. "
                          "swap a broken stage to its CPU reference to rehearse past it; "
                          "the records then say the pass is not the profile's)")
    run.add_argument("--set", action="append", default=[], metavar="STAGE.KEY=VALUE",
                     help="merged into the workflow's stage_params")
    run.add_argument("--strict", action="store_true",
                     help="refuse to start when the dry run finds a problem in any pod")
    run.add_argument("--stop-on-failure", action="store_true",
                     help="Argo's failFast: no new task after a failure (default: run the "
                          "independent branches, to find every failure in one pass)")
    run.set_defaults(func=_cmd_run)
    dry = rsub.add_parser("dry-run", help="resolve every pod of a workflow (argv, env, mounts) "
                                          "and check it, without running anything")
    dry.add_argument("workflow", help="a rendered workflow, e.g. workflows/full.yaml")
    dry.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE")
    dry.add_argument("--json", action="store_true", help="one JSON object per pod")
    dry.set_defaults(func=_cmd_dry)


def _cmd_run(args: argparse.Namespace) -> int:
    opts = Options(work=Path(args.work), workflows=tuple(
        w.strip() for w in args.workflows.split(",") if w.strip()),
        keep_images=args.keep_images, image_tests=args.image_tests, workers=args.workers,
        engine=args.engine,
        fresh=args.fresh, records=Path(args.records), keep_going=not args.stop_on_failure,
        strict=args.strict, params=tuple(args.parameter), stage_sets=tuple(args.set))
    try:
        return rehearse(opts)
    except KeyboardInterrupt as exc:
        _say(f"interrupted ({exc or 'Ctrl-C'}): pods stopped, store and stub shut down; run "
             "the same command again to resume")
        return 130


def _cmd_dry(args: argparse.Namespace) -> int:
    params = {}
    for item in args.parameter:
        name, eq, value = item.partition("=")
        if not eq:
            raise ConfigError(f"-p {item!r}: expected NAME=VALUE")
        params[name] = value
    pods = Executor(Workflow.load(args.workflow), params).dry_run()
    for pod in pods:
        print(json.dumps(pod.describe()) if args.json else
              f"{pod.node}  {pod.image}  {' '.join(pod.argv)}")
    problems = check_pods(pods)
    problems += [f"warning: stale: {line}" for line in stale_evidence()]
    for line in problems:
        print(line, file=sys.stderr)
    errors = [p for p in problems if not p.startswith("warning:")]
    print(f"{len(pods)} pods, {len(errors)} problems", file=sys.stderr)
    return 1 if errors else 0
