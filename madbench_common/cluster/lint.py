"""``madbench lint``: Argo's own rules for a workflow file, and checks of resolved pods
against this checkout, without running or importing anything heavy.

:func:`lint_workflow` reports every reason Argo would refuse a workflow
(:mod:`madbench_common.pipeline.argo_rules`: its validator, its controller's run-time
refusals and the API server's resource rules, at a pinned Argo release). :func:`check_pods`
takes the pods of a dry run (:meth:`Executor.dry_run`) and reports what would fail on a
cluster before any pod starts.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import io
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from madbench_common.cluster.argo_local import Pod
from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.argo_rules import (
    ARGO_COMMIT,
    ARGO_RELEASE,
    MIN_ARGO_VERSION,
    check_workflow,
    min_version,
)

__all__ = ["add_commands", "check_pods", "check_target", "image_slug", "lint_workflow"]

_ROOT = Path(__file__).resolve().parents[2]
_IMAGE = re.compile(r"^(?:ghcr\.io|localhost)/madbench/(?P<slug>[a-z0-9][a-z0-9-]*)"
                    r":(?P<tag>[\w.-]+)(?:@sha256:[0-9a-f]{12,64})?$")
_MODEL_KEYS = ("model", "vad", "asr", "speaker", "tagger", "prompt_model")


def image_slug(ref: str) -> tuple[str, str]:
    """``(slug, tag)`` of a MADBench image reference; ConfigError for any other image."""
    m = _IMAGE.match(ref)
    if m is None:
        raise ConfigError(f"image {ref!r} is not a MADBench image (ghcr.io/madbench/<slug>:<tag>)")
    return m["slug"], m["tag"]


@functools.cache
def _defined(module: str) -> frozenset[str] | None:
    """Top-level names a madbench_common module defines or imports (``None``: no file)."""
    rel = Path(*module.split("."))
    # a package shadows a module of the same name, as in Python's own import system
    for path in (_ROOT / rel / "__init__.py", _ROOT / rel.with_suffix(".py")):
        if path.is_file():
            break
    else:
        return None
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            # ``A, B = factory(...)`` binds both names (the same/cross TTS pairs)
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(names)


def check_target(target: str) -> str | None:
    """Why ``module:attr`` does not resolve in this checkout (``None`` when it does)."""
    module, _, attr = target.partition(":")
    if not module.startswith("madbench_common"):
        return None  # outside this checkout: checked when its image is built
    names = _defined(module)
    if names is None:
        return f"module {module} does not exist"
    if attr and attr not in names:
        return f"{module} defines no {attr}"
    return None


@functools.cache
def _parser() -> argparse.ArgumentParser:
    from madbench_common.cli import build_parser

    return build_parser()


def _parse(argv: list[str]) -> tuple[argparse.Namespace | None, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            return _parser().parse_args(argv), ""
        except SystemExit:
            return None, err.getvalue().strip().splitlines()[-1] if err.getvalue() else "?"


def check_pods(pods: Iterable[Pod], images_dir: Path | None = None) -> list[str]:
    """Problems found in ``pods`` (empty when every pod would start and find its code).

    - the image is a MADBench image (``ghcr.io/madbench/<slug>:<tag>``) whose folder has a
      Dockerfile and a requirements lock;
    - the command parses with ``madbench``'s own argument parser;
    - a ``stage run|merge`` names a stage of its graph (MADBench, or DEAF's with its
      ``--models``), its ``--stage-params`` pass the pod's own check, and every model the
      stage will load (``model`` and the QC stages' ``vad``, ``asr``, ``speaker``,
      ``tagger``, ``prompt_model``) is registered, lives in the pod's image, and its
      ``module:Class`` target exists (read from the source file's syntax tree, so no
      model library is imported);
    - the stage implementation's ``module:Class`` target exists.
    """
    images = images_dir or _ROOT / "images"
    problems: list[str] = []
    warned: set[str] = set()
    for pod in pods:
        where = f"{pod.node} ({pod.template})"
        try:
            slug, _ = image_slug(pod.image)
        except ConfigError as exc:
            problems.append(f"{where}: {exc}")
            slug = ""
        if slug and not (images / slug / "Dockerfile").is_file():
            problems.append(f"{where}: image {slug}: images/{slug}/Dockerfile does not exist")
        elif slug and not slug.startswith("base-") and \
                not (images / slug / "requirements.lock").is_file():
            problems.append(f"{where}: image {slug}: images/{slug}/requirements.lock does not "
                            "exist")
        if not pod.argv or pod.argv[0] != "madbench":
            problems.append(f"{where}: command {pod.argv[:1]} is not madbench")
            continue
        args, error = _parse(list(pod.argv[1:]))
        if args is None:
            problems.append(f"{where}: madbench {' '.join(pod.argv[1:3])}: {error}")
            continue
        if getattr(args, "stage_command", None):
            problems += _check_stage(where, args, slug, warned)
    return problems


def _check_stage(where: str, args: argparse.Namespace, slug: str, warned: set[str]
                 ) -> list[str]:
    from madbench_common.cli.pipeline import parse_params, stage_overrides
    from madbench_common.models.registry import REGISTRY
    from madbench_common.pipeline.stage import stage_params

    out: list[str] = []
    try:
        graph = _graph(getattr(args, "deaf_command", None) is not None,
                       getattr(args, "models", "") or "")
        stage = graph[args.stage]
        params = parse_params(args.params_json, args.param)
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            params.update(stage_overrides(graph, args.stage, args.stage_params))
        for line in err.getvalue().splitlines():
            if line not in warned:
                warned.add(line)
                out.append(line if line.startswith("warning:") else f"warning: {line}")
    except ConfigError as exc:
        return [f"{where}: {exc}"]
    if (why := check_target(stage.target)) is not None:
        out.append(f"{where}: stage {stage.name} target {stage.target}: {why}")
    merged = stage_params(stage, params)
    for key in _MODEL_KEYS:
        value = merged.get(key)
        if not isinstance(value, str) or not value or "+" in value:
            continue
        spec = REGISTRY.get(value)
        if spec is None:
            out.append(f"{where}: {key}={value!r} is not a registered model")
            continue
        if slug and spec.image != slug:
            out.append(f"{where}: {key}={value} lives in image {spec.image}, the pod runs "
                       f"image {slug}")
        if (why := check_target(spec.target)) is not None:
            out.append(f"{where}: model {value} target {spec.target}: {why}")
    return out


@functools.cache
def _graph(deaf: bool, models: str) -> Any:
    from madbench_common.cli.pipelines import build_pipeline

    if deaf:
        return build_pipeline("deaf", tuple(m.strip() for m in models.split(",") if m.strip()))
    return build_pipeline("madbench")


# ------------------------------------------------------------------ madbench lint


def lint_workflow(path: str | Path, target: tuple[int, int] = MIN_ARGO_VERSION,
                  pods: bool = False, notes: list[str] | None = None) -> list[str]:
    """Every reason Argo would refuse the workflow file ``path``, in Argo's words
    (:func:`madbench_common.pipeline.argo_rules.check_workflow`), each prefixed by the
    file; with ``pods``, also every pod of its local dry run checked against this
    checkout (:func:`check_pods`). A workflow the local executor does not run (such as
    ``weights.yaml``, with ``withParam``) gets a line in ``notes`` instead: that is no
    reason for Argo to refuse it."""
    import yaml

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        return [f"{path}: cannot read: {exc}"]
    problems = [f"{path}: {p}" for p in check_workflow(doc, target)]
    if pods and not problems:
        from madbench_common.cluster.argo_local import Executor, UnsupportedConstruct, Workflow

        try:
            executor = Executor(Workflow.from_doc(doc, str(path)))
        except UnsupportedConstruct as exc:
            if notes is not None:
                notes.append(f"{path}: pods not checked (the local executor does not run "
                             f"it): {exc}")
            return problems
        try:
            problems += [f"{path}: {p}" for p in check_pods(executor.dry_run())]
        except ConfigError as exc:
            problems.append(f"{path}: {exc}")
    return problems


def _version(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an Argo version like 3.5")
    return int(m.group(1)), int(m.group(2))


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``madbench lint``."""
    p = sub.add_parser(
        "lint", help=f"check workflows against Argo's own rules (Argo {ARGO_RELEASE}'s "
                     "validator, its controller's run-time refusals, Kubernetes resource "
                     "rules, version-gated fields) before argo submit")
    p.add_argument("workflows", nargs="+", metavar="WORKFLOW")
    p.add_argument("--argo-version", type=_version, default=MIN_ARGO_VERSION,
                   metavar="MAJOR.MINOR",
                   help="the oldest Argo the workflows must run on (default: "
                        f"{MIN_ARGO_VERSION[0]}.{MIN_ARGO_VERSION[1]}, the README's minimum)")
    p.add_argument("--pods", action="store_true",
                   help="also resolve every pod (the local executor's dry run) and check "
                        "its image, command, stage and models against this checkout")
    p.set_defaults(func=_lint)


def _lint(args: argparse.Namespace) -> int:
    import yaml

    bad = 0
    for path in args.workflows:
        notes: list[str] = []
        problems = lint_workflow(path, args.argo_version, args.pods, notes)
        for line in problems:
            print(line)
        for line in notes:
            print(f"note: {line}", file=sys.stderr)
        if problems:
            bad += 1
            continue
        need = min_version(yaml.safe_load(Path(path).read_text()))
        print(f"ok: {path} (Argo v{need[0]}.{need[1]} or later; rules of "
              f"{ARGO_RELEASE} {ARGO_COMMIT[:10]})")
    return 1 if bad else 0
