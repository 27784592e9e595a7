"""``make image-test IMAGE=<slug>``: prove a built image by running stage shards inside it.

From the slug's ``image_test:`` block (:class:`madbench_common.imagefactory.images.ImageTest`):
the stages the tested ones read from run on the host with CPU references, then each tested
stage runs one shard and its merge inside the image under the pod policy, on tiny random
weights (:func:`run_image_test`). The outcome is recorded under the slug's
``image_test:`` in ``images/images.lock.yaml``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from madbench_common.core.errors import ConfigError, MadbenchError
from madbench_common.imagefactory.containers import Mount, run_in_image
from madbench_common.imagefactory.imagebuild import image_exists, local_ref
from madbench_common.imagefactory.imagelock import record_image_test
from madbench_common.imagefactory.images import IMAGES, ImageTest, load_image
from madbench_common.pipeline.graph import Graph
from madbench_common.testing.faults import demo_sources

__all__ = ["BASE_TEST", "RUN_ID", "Pipeline", "StageOutcome", "check_imports", "check_models",
           "demo_sources", "image_test_params", "pipeline_of", "run_image_test"]

RUN_ID = "image-test"
BASE_TEST = ImageTest(stages=("ingest",), load_models=False)
"""The bases' test (they have no image.yaml): every module imports, and ingest runs."""


@dataclass(frozen=True)
class StageOutcome:
    """One tested stage: rows written and rejected."""

    stage: str
    rows: int
    rejected: int


@dataclass(frozen=True)
class Pipeline:
    """The graph the tested stages belong to and the CLI group that runs its stages."""

    graph: Graph
    command: tuple[str, ...]
    sources: bool
    """Its root stage reads the demo clips (MADBench's ``ingest``)."""


def pipeline_of(stages: Sequence[str]) -> Pipeline:
    """MADBench's graph when it has all ``stages``, else DEAF's (``madbench deaf stage``).

    A DEAF test's host stages make the stimuli with their CPU references (no demo clips; a
    relative ``deaf_sentences.sentences`` CSV is read from the repository, e.g.
    ``data/deaf/image_test_sentences.csv``: four sentences, one per conflict type and SIC's
    neutral control) and its stages run in the image as ``madbench deaf stage run|merge``.
    """
    from madbench_common.cli.pipelines import build_pipeline

    for graph, command, sources in ((build_pipeline("madbench"), ("madbench",), True),
                                    (build_pipeline("deaf"), ("madbench", "deaf"), False)):
        if set(stages) <= set(graph.stages):
            return Pipeline(graph, command, sources)
    raise ConfigError(f"image_test stages {sorted(stages)} are not all stages of the MADBench "
                      "graph or all of the DEAF graph")


def _host_stages(tested: Sequence[str]) -> list[str]:
    """Every stage the tested ones read from, transitively, minus the tested; graph order."""
    graph = pipeline_of(tested).graph
    need: set[str] = set()
    todo = list(tested)
    while todo:
        for dep in graph[todo.pop()].inputs:
            if dep not in need:
                need.add(dep)
                todo.append(dep)
    return [s.name for s in graph if s.name in need - set(tested)]


def _run_on_host(store: Path, stages: Sequence[str], params: dict[str, dict[str, Any]],
                 graph: Graph) -> None:
    from madbench_common.core.store import RunStore, open_store
    from madbench_common.pipeline.local import EMBEDDED_IMAGE
    from madbench_common.pipeline.repair import stage_done
    from madbench_common.pipeline.stage import make_context, merge_stage, run_shard

    run = RunStore(open_store(str(store)), RUN_ID)
    for name in stages:
        ctx = make_context(run, graph, name, params.get(name, {}), EMBEDDED_IMAGE, 0)
        if not stage_done(ctx):
            run_shard(ctx, 0, 1)
            merge_stage(ctx, 1)
        print(f"host: {name} done", flush=True)


def _key_placeholders() -> dict[str, str]:
    """Every API key a stage of either graph declares, set to a placeholder for the model
    check: an API model (ElevenLabs, Gemini, GPT-4o audio, the judge) is constructed with
    its client but calls nothing, and the container has no network. Real keys come only
    from the cluster's Secret, never from here."""
    from madbench_common.cli.pipelines import PIPELINES, build_pipeline

    names = {k for graph in map(build_pipeline, PIPELINES) for st in graph
             for k in st.secrets}
    return {name: "image-test-placeholder" for name in sorted(names)}


def _models_of(slug: str, extra: Sequence[str]) -> list[str]:
    from madbench_common.models.registry import REGISTRY

    return sorted({s.slug for s in REGISTRY.values() if s.image == slug} | set(extra))


def _writable(path: Path) -> Path:
    """A folder uid 10001 can write (the host user may differ)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, 10001, 10001)
    else:
        path.chmod(0o777)
    return path


def _stage_in_image(ref: str, stage: str, store: Path, params: Mapping[str, Any],
                    mounts: Sequence[Mount], command: Sequence[str] = ("madbench",),
                    name: str = "") -> StageOutcome:
    """Run one shard and the merge of ``stage`` in image ``ref`` (an id or a tag); the
    manifests name the image ``name`` (its tag), as a pod's do."""
    common = ["--stage", stage, "--num-shards", "1", "--store", str(store), "--run-id", RUN_ID,
              "--image", name or ref, "--params-json", json.dumps(params)]
    for argv in ([*command, "stage", "run", "--shard", "0", *common],
                 [*command, "stage", "merge", *common]):
        print(f"image: {' '.join(argv)}", flush=True)
        run_in_image(ref, argv, mounts=mounts)
    marker = json.loads((store / RUN_ID / stage / "_SUCCESS").read_text())
    outcome = StageOutcome(stage, int(marker["rows"]), int(marker["rejected"]))
    if outcome.rows - outcome.rejected < 1:
        raise MadbenchError(f"{stage} in {ref}: no accepted rows ({outcome})")
    return outcome


def run_image_test(slug: str, keep: bool = False, image: str = "") -> list[StageOutcome]:
    """Run the slug's image test against its local image; return the tested stages' counts.

    1. A work folder under ``$MADBENCH_IMAGE_TEST_DIR`` (default ``/var/tmp``; not ``/tmp``,
       which is a tmpfs inside the container) holds the sources (the first ``clips`` demo
       clips and their CSV), a file store and a weights root. Store and sources are
       mounted at their host paths, so manifests written on the host and in the container
       name the same files.
    2. The stages the tested stages read from run first on the host, in-process, with
       their default CPU reference models (the run id is ``image-test``).
    3. Inside the image, under the pod policy of :mod:`madbench_common.imagefactory.containers`
       (uid 10001, read-only root, no network, ``/tmp`` a tmpfs): the ``weights`` callable
       writes its tiny random checkpoint into the weights root (mounted writable for that
       step only); every model the image registers is imported (and instantiated with
       ``load_models``); then each tested stage runs one shard and its merge with the
       weights mounted read-only at ``/weights`` (``MADBENCH_WEIGHTS=/weights``,
       ``HF_HUB_OFFLINE=1``).
    4. Each tested stage must have finished with at least one accepted row; any failure
       raises, nothing is skipped.

    ``image`` (an image id; default: the one the slug's local tag names when the test
    starts) is what every container of the test runs, so a rebuild or retag of the tag
    meanwhile (another session building on the same machine) cannot mix two images."""
    info = load_image(slug)
    if not info.leaf:
        raise ConfigError(f"{slug} is a {info.kind} image without madbench_common; test an "
                          "image built on it")
    is_base = info.kind == "base"
    models = () if is_base else info.models
    spec = BASE_TEST if is_base else info.image_test
    if spec is None:
        raise ConfigError(f"images/{slug}/image.yaml has no image_test block")
    ref = local_ref(slug)
    if not image_exists(ref):
        raise ConfigError(f"{ref} is not built; run: make image IMAGE={slug}")
    root = Path(os.environ.get("MADBENCH_IMAGE_TEST_DIR", "/var/tmp"))
    work = Path(tempfile.mkdtemp(prefix=f"madbench-image-test-{slug}-", dir=root)).resolve()
    work.chmod(0o755)
    try:
        return _run(image or tested_image(slug), slug, spec, models, work, ref)
    finally:
        if keep:
            print(f"kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)


def _hand_over(store: Path) -> None:
    """Give uid 10001 what the host stages wrote (files are created 0600 by their owner)."""
    if os.geteuid() != 0:
        return
    for path in [store, *store.rglob("*")]:
        os.chown(path, 10001, 10001, follow_symlinks=False)


def image_test_params(spec: ImageTest, pipeline: Pipeline, sources: Path
                      ) -> dict[str, dict[str, Any]]:
    """The stages' parameters: ``spec.params``, MADBench's ``ingest`` reading ``sources``,
    and a relative DEAF sentence CSV read from the repository."""
    params = {k: dict(v) for k, v in spec.params.items()}
    if pipeline.sources:
        params.setdefault("ingest", {}).setdefault("sources", str(sources))
    sentences = params.get("deaf_sentences", {}).get("sentences")
    if sentences and not Path(sentences).is_absolute():
        params["deaf_sentences"]["sentences"] = str(IMAGES.parent / sentences)
    return params


def tested_image(slug: str) -> str:
    """The id of the image the slug's local tag names now."""
    from madbench_common.imagefactory.imagebuild import image_id

    return image_id(local_ref(slug))


def _run(ref: str, slug: str, spec: ImageTest, models: Sequence[str],
         work: Path, name: str) -> list[StageOutcome]:
    pipeline = pipeline_of(spec.stages)
    sources = demo_sources(work / "sources", spec.clips)
    store, weights = _writable(work / "store"), _writable(work / "weights")
    params = image_test_params(spec, pipeline, sources)
    _run_on_host(store, _host_stages(spec.stages), params, pipeline.graph)
    _hand_over(store)
    data = [Mount(store, str(store), read_only=False), Mount(sources.parent, str(sources.parent))]
    if spec.weights:
        module, _, func = spec.weights.partition(":")
        code = f"import {module} as m; m.{func}('/weights')"
        run_in_image(ref, ["python", "-c", code],
                     mounts=[Mount(weights, "/weights", read_only=False)])
    mounts = [*data, Mount(weights, "/weights")]
    check = ["python", "-m", "madbench_common.testing.imagetest", "check-models",
             *_models_of(slug, models), *(["--load"] if spec.load_models else [])]
    print(run_in_image(ref, check, mounts=mounts, capture=True, env=_key_placeholders()),
          end="", flush=True)
    return [_stage_in_image(ref, s, store, params.get(s, {}), mounts, pipeline.command, name)
            for s in spec.stages]


def check_imports() -> list[str]:
    """Import every madbench_common module; one that needs a package this image lacks
    (a model family's library) is reported, any other failure raises. Returns the report."""
    import importlib
    import pkgutil

    import madbench_common

    lacking = []
    for mod in pkgutil.walk_packages(madbench_common.__path__, "madbench_common."):
        try:
            importlib.import_module(mod.name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("madbench_common"):
                raise
            lacking.append(f"{mod.name} (needs {exc.name})")
    return lacking


def check_models(slugs: Sequence[str], load: bool) -> list[str]:
    """Import (and with ``load``, instantiate) each registered model; run inside the image."""
    import importlib

    from madbench_common.models.registry import REGISTRY, load_model

    done = []
    for slug in slugs:
        spec = REGISTRY.get(slug)
        if spec is None:
            raise ConfigError(f"model {slug!r} is not registered")
        module, _, name = spec.target.partition(":")
        getattr(importlib.import_module(module), name)
        if load:
            load_model(slug)
        done.append(slug)
    return done


def _main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m madbench_common.testing.imagetest")
    sub = parser.add_subparsers(dest="command", required=True)
    test = sub.add_parser("test", help="run the image test of a built image (on the host)")
    test.add_argument("slug")
    test.add_argument("--keep", action="store_true", help="keep the work folder")
    models = sub.add_parser("check-models", help="import/instantiate models (in the image)")
    models.add_argument("models", nargs="*")
    models.add_argument("--load", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "check-models":
        print(f"python {sys.version.split()[0]}: every madbench_common module imports",
              *(f"; not here: {m}" for m in check_imports()), sep="")
        for slug in check_models(args.models, args.load):
            print(f"model ok: {slug}{' (loaded)' if args.load else ''}")
        return 0
    start = time.perf_counter()
    image = ""
    try:
        image = tested_image(args.slug) if image_exists(local_ref(args.slug)) else ""
        outcomes = run_image_test(args.slug, args.keep, image)
    except MadbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        _record(args.slug, start, [], str(exc), image)
        return 1
    for o in outcomes:
        print(f"image-test {args.slug}: {o.stage} ran in the image: {o.rows} rows, "
              f"{o.rejected} rejected")
    _record(args.slug, start, outcomes, "", image)
    return 0


def _image_code(image: str) -> str | None:
    from madbench_common.imagefactory.codedigest import image_code_digest

    try:
        return image_code_digest(image) if image else None
    except MadbenchError:
        return None


def _record(slug: str, start: float, outcomes: Sequence[StageOutcome], error: str,
            image: str) -> None:
    """Write the outcome under the slug's ``image_test:`` in the images lock (pass or fail
    with its reason, wall seconds, rows per stage, the image id and the commit)."""
    commit = subprocess.run(["git", "-C", str(IMAGES.parent), "describe", "--always",
                             "--dirty", "--abbrev=12"], capture_output=True, text=True)
    result: dict[str, Any] = {
        "result": "fail" if error else "pass",
        "wall_s": round(time.perf_counter() - start),
        "image_id": image or None,
        "commit": commit.stdout.strip() or None,
        "tested_at": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "stages": {o.stage: f"{o.rows} rows, {o.rejected} rejected" for o in outcomes},
        # the code the test ran (its image's): a later edit of any file a pod reads, a
        # catalog card included, makes this record stale (rehearsal.preflight.stale_evidence)
        "code_digest": _image_code(image)}
    if error:
        # the reason, not the whole log: the last lines say what failed
        result["reason"] = "\n".join(error.strip().splitlines()[-6:])[-1500:]
    record_image_test(slug, result)


if __name__ == "__main__":
    sys.exit(_main())
