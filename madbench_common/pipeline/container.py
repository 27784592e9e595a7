"""Local container engine: ``madbench run --engine podman|docker|buildah`` runs every shard
(and merge) of a stage inside the stage's image, as the Argo pods do, on one machine.

Each stage's image is its ``image`` slug's local build (``localhost/madbench/<slug>:<tag>``,
``make image IMAGE=<slug>``), or the one ``--image`` given for every stage (a slug or a
full ref; ``--image reference-cpu`` is the smoke run); mounts and user:
:class:`ContainerEngine`. The fingerprint includes the image by its manifest digest
(:meth:`ContainerEngine.image_ref`), so outputs land under other prefixes than an
in-process run's; the rows and the bytes they point to are the same.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from madbench_common.core.errors import ConfigError
from madbench_common.imagefactory.containers import USER, Mount, run_engine, run_in_image
from madbench_common.pipeline.graph import Stage
from madbench_common.pipeline.stage import ShardResult

__all__ = ["ContainerEngine", "read_only_mounts"]

_AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL",
        "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE")


def _outermost(paths: Sequence[Path]) -> list[Path]:
    """The given folders minus those inside another one of them."""
    out: list[Path] = []
    for path in sorted(set(paths), key=lambda p: len(p.parts)):
        if not any(path == o or o in path.parents for o in out):
            out.append(path)
    return out


def read_only_mounts(paths: Iterable[str | Path]) -> list[Mount]:
    """Read-only mounts (at their own paths) of the folders that hold ``paths``: a folder
    itself, a file's folder; ``s3://`` paths need none. The caller says which paths a
    stage reads (the CLI: a local sources listing's files, ``sources.source_files``)."""
    folders = []
    for given in map(str, paths):
        if not given or given.startswith("s3://"):
            continue
        path = Path(given.removeprefix("file://")).resolve()
        folders.append(path if path.is_dir() else path.parent)
    return [Mount(p, str(p)) for p in _outermost(folders)]


@dataclass
class ContainerEngine:
    """Runs stage shards and merges in images; what :class:`LocalRunner` delegates to.

    Containers follow the pod policy of :mod:`madbench_common.imagefactory.containers` with: the
    store mounted read-write at its own path (a ``file://`` or plain path store; an
    ``s3://`` store is reached over the network with the caller's ``AWS_*`` variables, the
    one case that gets a network); the sources (the CSV's folder and every folder its rows
    point into) read-only at their own paths, so manifests name the same files as an
    in-process run; the weights root (``--weights``, default ``$MADBENCH_WEIGHTS``)
    read-only at ``/weights``; the caller's uid:gid as the container user, or uid 10001
    (the pods' user) when the caller is root, in which case the run's folder in a local
    store is handed to 10001; GPUs where the stage requests them (podman ``--device
    nvidia.com/gpu=all``, docker ``--gpus all``; the buildah engine cannot pass GPUs and
    refuses such stages).
    """

    engine: str
    store: str
    run_id: str
    image: str | None = None
    weights: Path | None = None
    mounts: list[Mount] = field(default_factory=list)
    workers: int = 1
    _handed_over: bool = False
    _pinned: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, engine: str, store: str, run_id: str, image: str | None = None,
               weights: str | None = None, reads: Iterable[str | Path] = (),
               workers: int = 1) -> ContainerEngine:
        eng = run_engine(engine)
        root = weights or os.environ.get("MADBENCH_WEIGHTS")
        return cls(eng, store, run_id, image, Path(root).resolve() if root else None,
                   read_only_mounts(reads), max(1, workers))

    def image_ref(self, stage: Stage) -> str:
        """The local image a stage runs in (checked to exist), by an immutable name: the
        tag pinned to the image's manifest digest (its id with docker), so a rebuilt image
        gives the stage another fingerprint."""
        from madbench_common.imagefactory.imagebuild import image_exists, local_ref
        from madbench_common.imagefactory.imagepush import local_image_digest

        wanted = self.image or stage.image
        ref = wanted if ("/" in wanted or ":" in wanted) else local_ref(wanted)
        if not image_exists(ref, self.engine):
            raise ConfigError(f"stage {stage.name}: image {ref} is not built here; run: make "
                              f"image IMAGE={wanted} (or pick one with --image reference-cpu)")
        if ref not in self._pinned:
            self._pinned[ref] = local_image_digest(ref, self.engine)
        return self._pinned[ref]

    @property
    def user(self) -> str:
        """The container user: the caller, or the pods' uid 10001 for root."""
        return USER if os.geteuid() == 0 else f"{os.getuid()}:{os.getgid()}"

    def _store_access(self) -> tuple[list[Mount], dict[str, str], bool]:
        if self.store.startswith("s3://"):
            env = {k: os.environ[k] for k in _AWS if k in os.environ}
            return [], env, True
        path = Path(self.store.removeprefix("file://")).resolve()
        run_dir = path / self.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0 and not self._handed_over:
            uid, gid = (int(x) for x in USER.split(":"))
            for sub in (run_dir, *run_dir.rglob("*")):
                os.chown(sub, uid, gid)
            self._handed_over = True
        return [Mount(path, str(path), read_only=False)], {}, False

    def _run(self, stage: Stage, ref: str, argv: list[str]) -> dict[str, Any]:
        store_mounts, env, network = self._store_access()
        mounts = [*store_mounts, *self.mounts]
        if self.weights is not None:
            mounts.append(Mount(self.weights, "/weights"))
        out = run_in_image(ref, ["madbench", *argv], mounts=mounts, env=env,
                           gpu=bool(stage.gpu), engine=self.engine, capture=True,
                           network=network, user=self.user)
        result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        return result

    def _args(self, stage: Stage, verb: str, ref: str, params: Mapping[str, Any], seed: int,
              n: int) -> list[str]:
        return ["stage", verb, "--stage", stage.name, "--num-shards", str(n), "--store",
                self.store, "--run-id", self.run_id, "--image", ref, "--seed", str(seed),
                "--params-json", json.dumps(params, sort_keys=True)]

    def run_shards(self, stage: Stage, params: Mapping[str, Any], seed: int, n: int,
                   tick: Callable[[], None]) -> list[ShardResult]:
        """Every shard of ``stage`` in its image, ``workers`` containers at a time."""
        ref = self.image_ref(stage)

        def one(shard: int) -> ShardResult:
            argv = [*self._args(stage, "run", ref, params, seed, n), "--shard", str(shard)]
            result = ShardResult(**self._run(stage, ref, argv))
            tick()
            return result

        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(one, range(n)))

    def merge(self, stage: Stage, params: Mapping[str, Any], seed: int, n: int) -> dict[str, Any]:
        """The stage's merge in its image; returns the ``_SUCCESS`` marker."""
        ref = self.image_ref(stage)
        return self._run(stage, ref, self._args(stage, "merge", ref, params, seed, n))
