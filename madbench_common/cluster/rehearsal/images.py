"""The workflows' images in a pass (:class:`ImageProvider`): ``ghcr.io/madbench/<slug>:<tag>``
is the factory's local build ``localhost/madbench/<slug>:<tag>``, built (bases first) when
missing or when its ``madbench_common`` is not this checkout's, given its tiny weights, pinned
by image id, and removed after its last pod. The memo knows an image by its recipe (its build
inputs), not by its id, which every rebuild changes."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from madbench_common.cluster.argo_local import Pod
from madbench_common.cluster.lint import check_target, image_slug
from madbench_common.cluster.rehearsal.imagestore import (
    _build_lock,
    _build_lock_path,
    _image_id,
    _image_size,
    _rmi,
    disk_problem,
)
from madbench_common.cluster.rehearsal.preflight import _upstream_message, upstream_problems
from madbench_common.cluster.rehearsal.profile import ROOT
from madbench_common.cluster.rehearsal.state import State, _utc_now
from madbench_common.core.errors import ConfigError, MadbenchError
from madbench_common.imagefactory.codedigest import code_digest, image_code_digest

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
    from madbench_common.imagefactory.imagebuild import weights_sha256
    from madbench_common.imagefactory.images import chain, load_image

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
        from madbench_common.imagefactory.containers import container_name

        tag = hashlib.sha256(str(self.work.resolve()).encode()).hexdigest()[:10]
        return container_name("madbench-rehearsal", tag) + "-"

    def container(self, *parts: str) -> str:
        from madbench_common.imagefactory.containers import container_name

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
        from madbench_common.imagefactory.images import load_image

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
        from madbench_common.imagefactory.imagebuild import BASES

        missing = upstream_problems([slug])
        if missing:
            raise ConfigError(_upstream_message(missing))
        logs = self.work / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        if (ROOT / "images" / slug / "image.yaml").is_file():  # bases first
            from madbench_common.imagefactory.imagebuild import local_ref
            from madbench_common.imagefactory.images import load_image

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
        self._run_logged(["-m", "madbench_common.imagefactory.imagebuild", *args], log, env,
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
        from madbench_common.imagefactory.containers import run_in_image

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
        from madbench_common.imagefactory.containers import Mount, run_in_image
        from madbench_common.imagefactory.images import load_image

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


def _lock_image_test(slug: str) -> dict[str, Any]:
    """The slug's ``image_test:`` record in ``images/images.lock.yaml`` (``{}`` if none)."""
    try:
        from madbench_common.imagefactory.imagelock import lock_entry

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
        from madbench_common.imagefactory.imagelock import lock_entry

        return dict(lock_entry(slug).get("build") or {})
    except (ConfigError, OSError):
        return {}
