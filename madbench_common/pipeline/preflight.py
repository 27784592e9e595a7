"""Before a local run's first stage: everything its chosen models need, checked at once.

``madbench run`` and ``madbench deaf run`` call :func:`check_run` before any stage starts,
so a missing need is found in seconds, not hours into the run. For every stage still to
run it collects what the stage and its models need — API keys (``key_env``), tools on
``PATH``, Python modules, weights under the weights root, locally built images, and the
stage's own ``preflight(params)`` — checks it where the stage runs (:class:`Where`), and
raises one :class:`~madbench_common.core.errors.EnvironmentMissing` (exit 3) listing every
missing thing.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madbench_common.core.errors import ConfigError, EnvironmentMissing, MadbenchError
from madbench_common.core.store import RunStore
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.repair import stage_done
from madbench_common.pipeline.stage import make_context, stage_params

__all__ = ["Where", "check_run", "model_slugs", "pending_stages", "stage_problems"]

_REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Where:
    """How one stage runs: in this process, another interpreter, or a container."""

    python: str = ""
    """Another interpreter's path (``--venv`` / ``--python``); empty: this process."""
    container: bool = False
    weights_root: str | None = None
    """Where that stage's weights are looked up (``None``: ``$MADBENCH_WEIGHTS``)."""


def model_slugs(stage: Stage, params: Mapping[str, Any]) -> list[str]:
    """The registry slugs a stage runs with ``params`` (``a+b`` names several)."""
    slug = str(params.get("model") or stage.model or "")
    return [s for s in slug.split("+") if s]


def gpu_models(stage: Stage, params: Mapping[str, Any]) -> list[str]:
    """The models ``stage`` runs with ``params`` (its defaults merged) that need a GPU:
    registered, not a CPU reference, and carried by an image built for a GPU
    (``gpu: true`` in its ``image.yaml``; an image without one counts as a GPU image).
    A compound stage's models are its slug-valued parameters (``vad``, ``asr``, …)."""
    from madbench_common.imagefactory.images import load_image

    merged = stage_params(stage, params)
    named = set(model_slugs(stage, merged)) | {
        v for v in merged.values() if isinstance(v, str) and v in REGISTRY}
    out = []
    for slug in sorted(named):
        spec = REGISTRY.get(slug)
        if spec is None or spec.reference:
            continue
        try:
            gpu = load_image(spec.image).gpu
        except ConfigError:
            gpu = True
        if gpu:
            out.append(slug)
    return out


def _model_args(params: Mapping[str, Any]) -> dict[str, Any]:
    value = params.get("model_args") or {}
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except json.JSONDecodeError:
            return {}
    return dict(value) if isinstance(value, dict) else {}


def _load_class(slug: str) -> Any:
    module, _, name = REGISTRY[slug].target.partition(":")
    return getattr(importlib.import_module(module), name)


def _key_env(cls: Any, kwargs: dict[str, Any]) -> str:
    try:
        param = inspect.signature(cls).parameters.get("key_env")
    except (TypeError, ValueError):
        return ""
    if param is None:
        return ""
    return str(kwargs.get("key_env", param.default if param.default is not param.empty else ""))


@dataclass
class _Needs:
    keys: dict[str, str]
    tools: dict[str, str]
    modules: dict[str, str]
    weights: list[tuple[str, str, str, str]]
    """(repo or "", image, revision, who): a repo snapshot, or all of an image's weights."""
    problems: list[str]


def _model_needs(slug: str, kwargs: dict[str, Any], who: str, needs: _Needs) -> None:
    spec = REGISTRY.get(slug)
    if spec is None:
        needs.problems.append(f"{who}: unknown model slug {slug!r}")
        return
    try:
        cls = _load_class(slug)
    except ModuleNotFoundError as exc:
        needs.problems.append(f"{who}: Python module {exc.name!r} missing (it belongs in image "
                              f"{spec.image!r})")
        return
    if env := _key_env(cls, kwargs):
        needs.keys.setdefault(env, who)
    for tool in getattr(cls, "tools", ()):
        needs.tools.setdefault(tool, who)
    for module in getattr(cls, "requires_modules", ()):
        needs.modules[module] = f"{needs.modules[module]}, {who}" if module in needs.modules \
            else who
    repo = getattr(cls, "repo", "")
    if isinstance(repo, str) and repo:
        needs.weights.append((repo, spec.image, str(getattr(cls, "revision", "") or ""), who))
    elif not spec.reference and not env:
        needs.weights.append(("", spec.image, "", who))


def _stage_models(stage: Stage, params: Mapping[str, Any]) -> list[str]:
    """The models the stage will load: its ``preflight_models(params)`` hook where it has
    one (a DEAF ESC stage reading EMIS clips loads none), else :func:`model_slugs`."""
    module, _, name = stage.target.partition(":")
    hook = getattr(getattr(importlib.import_module(module), name), "preflight_models", None)
    return [s for s in hook(params) if s] if hook is not None else model_slugs(stage, params)


def stage_problems(stage: Stage, params: Mapping[str, Any]) -> list[str]:
    """What the stage implementation itself reports missing (its ``preflight`` hook)."""
    module, _, name = stage.target.partition(":")
    hook = getattr(getattr(importlib.import_module(module), name), "preflight", None)
    if hook is None:
        return []
    return [f"stage {stage.name}: {p}" for p in hook(params)]


def _check_weights(repo: str, image: str, revision: str, root: str | None) -> list[str]:
    from madbench_common.models.weights import WeightsMissing, check_weights, hf_path

    if not repo:
        if not (_REPO / "images" / image / "weights.yaml").is_file():
            return []
        return check_weights(image, root, _REPO / "images")
    try:
        hf_path(repo, image=image, revision=revision or None, root=root)
    except WeightsMissing as exc:
        return [str(exc)]
    return []


def _missing_modules(python: str, modules: Iterable[str]) -> list[str]:
    names = sorted(set(modules))
    if not names:
        return []
    if not python:
        return [m for m in names if importlib.util.find_spec(m) is None]
    code = ("import importlib.util, json, sys; print(json.dumps([m for m in sys.argv[1:] "
            "if importlib.util.find_spec(m) is None]))")
    proc = subprocess.run([python, "-c", code, *names], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0:
        return [f"(interpreter {python} failed: {proc.stderr.strip()[-200:]})"]
    return list(json.loads(proc.stdout.strip().splitlines()[-1]))


def pending_stages(run: RunStore, graph: Graph, until: str | None,
                   params: dict[str, dict[str, Any]], image_of: Callable[[Stage], str],
                   seed: int) -> list[Stage]:
    """The stages up to ``until`` that a run would execute: not done with the fingerprint
    they would have now (a stage whose inputs are not done yet is pending)."""
    out = []
    for stage in graph.until(until):
        try:
            ctx = make_context(run, graph, stage.name, params.get(stage.name, {}),
                               image_of(stage), seed)
            if stage_done(ctx):
                continue
        except MadbenchError:
            pass  # inputs not done yet, or no image: it will run (and is checked)
        out.append(stage)
    return out


def check_run(stages: Sequence[Stage], params: dict[str, dict[str, Any]],
              where: Callable[[Stage], Where] = lambda s: Where(),
              images: Callable[[Stage], str] | None = None) -> None:
    """Raise one :class:`EnvironmentMissing` naming everything the ``stages`` (those that
    will run, with their per-stage ``params`` merged over the defaults) lack."""
    problems: list[str] = []
    by_place: dict[Where, _Needs] = {}
    for stage in stages:
        merged = stage_params(stage, params.get(stage.name, {}))
        place = where(stage)
        needs = by_place.setdefault(place, _Needs({}, {}, {}, [], []))
        for slug in _stage_models(stage, merged):
            _model_needs(slug, _model_args(merged), f"stage {stage.name} ({slug})", needs)
        try:
            problems += stage_problems(stage, merged)
        except MadbenchError as exc:
            problems.append(f"stage {stage.name}: {exc}")
        if images is not None and place.container:
            try:
                images(stage)
            except ConfigError as exc:
                problems.append(str(exc))
    for place, needs in by_place.items():
        problems += needs.problems
        problems += [f"{who}: API key ${env} is not set (the key comes only from the "
                     "environment)" for env, who in needs.keys.items() if not os.environ.get(env)]
        if not place.container:
            problems += [f"{who}: tool {tool!r} not found on PATH (apt-get install {tool})"
                         for tool, who in needs.tools.items() if shutil.which(tool) is None]
            missing = _missing_modules(place.python, needs.modules)
            problems += [f"{needs.modules.get(m, 'a stage')}: Python module {m!r} missing"
                         + (f" in {place.python}" if place.python else "") for m in missing]
        seen: set[tuple[str, str, str]] = set()
        for repo, image, revision, who in needs.weights:
            if (repo, image, revision) in seen:
                continue
            seen.add((repo, image, revision))
            problems += [f"{who}: {p}" for p in _check_weights(repo, image, revision,
                                                                place.weights_root)]
    if problems:
        unique = list(dict.fromkeys(problems))
        raise EnvironmentMissing("cannot start the run; missing:\n  - " + "\n  - ".join(unique))
