"""Catalog integrity: every name the registry, the image folders and the
rendered workflows use resolves, so that what CI cannot run (the model images) cannot drift.

Checked by parsing files only. A ``module:attr`` resolves when the module's file exists where
Python would import it from (a package ``x/__init__.py`` wins over a module ``x.py``) and its
``ast`` defines ``attr`` at the top level or ``attr`` is a submodule. The registry and the
two graphs are plain data; :func:`test_the_catalog_imports_no_model_library` checks that
importing them pulls in neither torch nor transformers.

* **Names resolve**: registry targets, graph stage targets, ``image.yaml``'s ``models`` and
  ``image_test.weights`` callables, every ``madbench_common`` import in the package and the
  tests (adapter tests included), and no module shadowed by a package of the same name.
* **Workflows**: every ``*_model`` default is a registry slug, every image they name has a
  folder with a Dockerfile, ``requirements.in`` and ``requirements.lock`` (``image.yaml``
  and ``weights.yaml`` for a model image), and every stage template names the stage, the
  image parameter and the model parameter of one graph stage.
* **One slug names a model everywhere**: a model's registry image is the image that runs it
  in each workflow, in each profile of the graphs and in ``image.yaml``.
* **Paper models** (registered, ``in_paper``, not a reference, not a hosted API on
  ``reference-cpu``, not an unavailable slot): an image test that runs the model on a tiny
  checkpoint (``image_test.weights`` resolves and a tested stage names the slug) and
  adapter tests that exist and name the adapter class.

Gaps owned by other work in progress are strict ``xfail`` entries in :data:`KNOWN_GAPS`
naming the missing thing: fixing one turns its entry into a failure until it is removed.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from madbench_common.benchmarks.deaf.graph import build_deaf_graph
from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.imagefactory.images import load_image
from madbench_common.models.registry import REGISTRY, ModelSpec
from madbench_common.pipeline.graph import Graph
from tests.paths import IMAGES, ROOT

WORKFLOWS = sorted((ROOT / "workflows").glob("*.yaml"))
BASES = ("base-py311", "base-py39")
HOSTED = "reference-cpu"
"""The image of the CPU references and of the hosted-API adapters (no weights)."""
UNAVAILABLE = "madbench_common.models.adapters.unavailable"
"""Registry slots of paper models with no public code or weights (never run)."""
MODEL_KEYS = ("model", "vad", "asr", "speaker", "tagger", "prompt_model")
"""Stage parameters whose value is a registry slug (``model`` may join several with ``+``)."""
_REF = re.compile(
    r"^ghcr\.io/madbench/(?P<slug>[a-z0-9][a-z0-9-]*):[^@\s]+(@sha256:[0-9a-f]{64})?$")
_PARAM = re.compile(r"^\{\{workflow\.parameters\.(\w+)\}\}$")

KNOWN_GAPS: dict[str, str] = {}
"""``kind:slug`` → the missing thing and whose work it is: a strict xfail, so the fix makes
the test fail until its entry is removed here."""


def _gap(kind: str, key: str) -> Any:
    reason = KNOWN_GAPS.get(f"{kind}:{key}")
    return pytest.param(key, marks=pytest.mark.xfail(reason=reason, strict=True)) if reason \
        else key


# ----------------------------------------------------------------------- resolution by ast


def module_file(module: str) -> Path | None:
    """The file ``import module`` would load from this checkout, or None."""
    parts = module.split(".")
    for i in range(1, len(parts)):
        if not (ROOT.joinpath(*parts[:i]) / "__init__.py").is_file():
            return None
    base = ROOT.joinpath(*parts)
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _targets(node: ast.expr) -> Iterator[str]:
    if isinstance(node, ast.Name):
        yield node.id
    elif isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            yield from _targets(elt)


def _top_level(body: list[ast.stmt]) -> Iterator[str]:
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                yield from _targets(target)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            yield from _targets(node.target)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield "*" if alias.name == "*" else (alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for block in ("body", "orelse", "finalbody"):
                yield from _top_level(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                yield from _top_level(handler.body)


@cache
def defined_names(path: Path) -> frozenset[str]:
    """Top-level names of a module (``*`` where it has ``__getattr__`` or a star import)."""
    names = set(_top_level(ast.parse(path.read_text(), str(path)).body))
    return frozenset(names | ({"*"} if "__getattr__" in names else set()))


def resolve(module: str, attr: str | None = None) -> str | None:
    """None when ``module`` (and ``module:attr``) resolves, else why not."""
    path = module_file(module)
    if path is None:
        return f"no module {module} (no file for it under {ROOT.name}/)"
    if attr is None:
        return None
    names = defined_names(path)
    if attr in names or "*" in names or module_file(f"{module}.{attr}") is not None:
        return None
    return f"{module} ({path.relative_to(ROOT)}) defines no {attr!r}"


def resolve_ref(ref: str) -> str | None:
    module, colon, attr = ref.partition(":")
    if not colon or not attr:
        return f"{ref!r} is not module:attr"
    return resolve(module, attr)


def _package_of(path: Path) -> list[str]:
    """The package a relative import in ``path`` starts from (``x/__init__.py``: ``x``)."""
    return list(path.relative_to(ROOT).with_suffix("").parts[:-1])


def import_problems(path: Path) -> list[str]:
    """Every ``madbench_common`` import in ``path`` (function bodies too) that fails."""
    return import_problems_at(path, _package_of(path), path.relative_to(ROOT))


def import_problems_at(path: Path, package: list[str] | None = None,
                       name: Path | None = None) -> list[str]:
    """:func:`import_problems` for a file anywhere (relative imports from ``package``)."""
    problems = []
    label = name or path
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = package or []
                base = pkg[:len(pkg) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            if module.split(".")[0] != "madbench_common":
                continue
            for alias in node.names:
                why = resolve(module, None if alias.name == "*" else alias.name)
                if why:
                    problems.append(f"{label}:{node.lineno}: {why}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "madbench_common" and (why := resolve(alias.name)):
                    problems.append(f"{label}:{node.lineno}: {why}")
    return problems


# ----------------------------------------------------------------------------- the catalog


@cache
def graphs() -> dict[str, Graph]:
    """The MADBench and DEAF graphs in both profiles."""
    madbench, deaf = build_graph(), build_deaf_graph()
    return {"madbench": madbench, "madbench-full": madbench.profiled("full"),
            "deaf": deaf, "deaf-full": deaf.profiled("full")}


def graph_of(stages: list[str]) -> str | None:
    """``madbench`` or ``deaf``: the graph that has all ``stages`` (the rule of
    ``madbench_common.testing.imagetest.pipeline_of``, which ``make image-test`` follows)."""
    for name in ("madbench", "deaf"):
        if set(stages) <= set(graphs()[name].stages):
            return name
    return None


@cache
def image_docs() -> dict[str, dict[str, Any]]:
    """Each image.yaml with what it reads from the cards filled in (``models``,
    ``image_test`` stages and params: :func:`madbench_common.imagefactory.images.load_image`)."""
    out = {}
    for path in sorted(IMAGES.glob("*/image.yaml")):
        doc = yaml.safe_load(path.read_text()) or {}
        info = load_image(path.parent.name, IMAGES)
        doc["models"] = list(info.models)
        if info.image_test is not None:
            doc["image_test"] = {**doc["image_test"], "stages": list(info.image_test.stages),
                                 "params": info.image_test.params}
        out[path.parent.name] = doc
    return out


@cache
def workflow_docs() -> dict[str, dict[str, Any]]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in WORKFLOWS}


def _slugs(value: str) -> list[str]:
    return [s for s in str(value).split("+") if s]


def _param_models(params: dict[str, Any]) -> list[str]:
    return [s for k in MODEL_KEYS if params.get(k) for s in _slugs(params[k])]


def _unavailable(spec: ModelSpec) -> bool:
    return spec.target.startswith(UNAVAILABLE + ":")


def _tested_models(doc: dict[str, Any]) -> set[str]:
    test = doc.get("image_test") or {}
    params = test.get("params") or {}
    return {s for stage in test.get("stages") or () for s in _param_models(params.get(stage) or {})}


def _paper_models() -> list[str]:
    return sorted(s.slug for s in REGISTRY.values() if s.in_paper and not s.reference
                  and s.image != HOSTED and not _unavailable(s))


# ---------------------------------------------------------------------------- module:attr


def test_resolution_finds_what_it_must(tmp_path: Path) -> None:
    """The resolver itself: packages win over modules, names come from the ast, and each
    kind of miss is reported (so the checks below can fail)."""
    assert resolve_ref("madbench_common.models.tiny.qc:install_tiny_qc") is None
    assert resolve_ref("madbench_common.models.registry:REGISTRY") is None  # an assignment
    assert resolve_ref("madbench_common.models.tiny:det") is None  # a submodule
    assert "defines no 'install_tiny_qc'" in str(resolve_ref(
        "madbench_common.models.tiny:install_tiny_qc"))  # the package, not a module
    assert "no module" in str(resolve_ref("madbench_common.models.nowhere:X"))
    assert "not module:attr" in str(resolve_ref("madbench_common.models.registry"))
    mod = tmp_path / "m.py"
    mod.write_text("try:\n    import a as b\nexcept ImportError:\n    c = 1\n"
                   "if True:\n    def d(): ...\nclass E: ...\nf, (g, h) = 1, (2, 3)\n")
    assert {"b", "c", "d", "E", "f", "g", "h"} <= defined_names(mod)
    bad = tmp_path / "uses.py"
    bad.write_text("from madbench_common.models.tiny import install_tiny_qc\n"
                   "def f():\n    from madbench_common.nowhere import x\n")
    problems = import_problems_at(bad)
    assert len(problems) == 2 and "install_tiny_qc" in problems[0] and "nowhere" in problems[1]



def test_no_module_is_shadowed_by_a_package() -> None:
    """``x.py`` beside a package ``x/`` is dead code: ``import x`` loads the package."""
    shadowed = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "madbench_common").rglob("*.py"))
                if (p.with_suffix("") / "__init__.py").is_file()]
    assert not shadowed, f"modules shadowed by a package of the same name: {shadowed}"


def test_registry_targets_resolve() -> None:
    bad = {s.slug: why for s in REGISTRY.values() if (why := resolve_ref(s.target))}
    assert not bad, bad


@pytest.mark.parametrize("name", ["madbench", "madbench-full", "deaf", "deaf-full"])
def test_graph_stages_resolve(name: str) -> None:
    """Stage targets resolve; a stage's models are registry slugs, and in the full profile
    each one's registry image is the stage's image."""
    bad = []
    for stage in graphs()[name]:
        if why := resolve_ref(stage.target):
            bad.append(f"{stage.name}: {why}")
        for slug in [*_slugs(stage.model), *_param_models(stage.params)]:
            spec = REGISTRY.get(slug)
            if spec is None:
                bad.append(f"{stage.name}: model {slug!r} is not registered")
            elif name.endswith("-full") and spec.image != stage.image:
                bad.append(f"{stage.name}: model {slug} belongs to image {spec.image}, "
                           f"the stage runs {stage.image}")
    assert not bad, bad


def test_imports_of_madbench_common_resolve() -> None:
    """Every ``from madbench_common… import …`` in the package and the tests (adapter tests,
    which run only in their image venvs, included) names something that exists."""
    files = [*sorted((ROOT / "madbench_common").rglob("*.py")), *sorted((ROOT / "tests").rglob(
        "*.py"))]
    bad = [p for f in files for p in import_problems(f)]
    assert not bad, "\n".join(bad)


# --------------------------------------------------------------------------- image folders


def _missing_files(slug: str) -> list[str]:
    """The Dockerfile and the lock an image is built from that are missing: a base image
    (``kind: base``, madbench_common on the Python runtime) installs its parent's lock."""
    doc = image_docs().get(slug) or {}
    lock_folder = (IMAGES / ("python-py" + str(doc["python"]).replace(".", ""))
                   if doc.get("kind") == "base" else IMAGES / slug)
    return [f"images/{slug}/Dockerfile"] * (not (IMAGES / slug / "Dockerfile").is_file()) + [
        f"{lock_folder.relative_to(IMAGES.parent)}/{n}" for n in ("requirements.in",
                                                                   "requirements.lock")
        if not (lock_folder / n).is_file()]


@pytest.mark.parametrize("slug", sorted(image_docs()))
def test_image_folder_names_resolve(slug: str) -> None:
    doc, folder = image_docs()[slug], IMAGES / slug
    bad = [f"missing {n}" for n in _missing_files(slug)]
    models = list(doc.get("models") or ())
    for model in models:
        spec = REGISTRY.get(model)
        if spec is None:
            bad.append(f"models: {model!r} is not registered")
        elif spec.image != slug:
            bad.append(f"models: {model} is registered on image {spec.image}")
    if models and not (folder / "weights.yaml").is_file():
        bad.append("its models need weights: no weights.yaml")
    if (folder / "weights.yaml").is_file():
        wdoc = yaml.safe_load((folder / "weights.yaml").read_text()) or {}
        if wdoc.get("image") != slug:
            bad.append(f"weights.yaml names image {wdoc.get('image')!r}")
    bad += [f"adapter_tests: {t} does not exist" for t in doc.get("adapter_tests") or ()
            if not (ROOT / t).is_file()]
    test = doc.get("image_test") or {}
    if test.get("weights") and (why := resolve_ref(test["weights"])):
        bad.append(f"image_test.weights: {why}")
    stages = list(test.get("stages") or ())
    params = test.get("params") or {}
    graph = graph_of([*stages, *params]) if stages else "madbench"
    if graph is None:
        bad.append(f"image_test: stages {stages} and params {sorted(params)} are not all "
                   "stages of one graph (madbench or deaf)")
    for stage in stages:
        for model in _param_models(params.get(stage) or {}):
            spec = REGISTRY.get(model)
            if spec is None or spec.image != slug:
                bad.append(f"image_test.params.{stage}: {model!r} is not a model of this image")
    assert not bad, bad


def test_registry_images_are_image_folders() -> None:
    """Each registered model's image folder lists it (references and hosted APIs: the
    reference-cpu image, which lists none); an unavailable slot is named by no workflow."""
    bad = []
    docs = image_docs()
    for spec in REGISTRY.values():
        if spec.image == HOSTED or _unavailable(spec):
            continue
        if spec.image not in docs:
            bad.append(f"{spec.slug}: image {spec.image!r} has no images/{spec.image}/image.yaml")
        elif spec.slug not in (docs[spec.image].get("models") or ()):
            bad.append(f"{spec.slug}: images/{spec.image}/image.yaml does not list it")
    assert not bad, bad


# ------------------------------------------------------------------------------- workflows


def _params(doc: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: str(p.get("value", "")) for p in doc["spec"]["arguments"]["parameters"]}


def _image_slug(ref: str) -> str | None:
    found = _REF.match(ref)
    return found.group("slug") if found else None


def _containers(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for template in doc["spec"]["templates"]:
        if template.get("container"):
            yield template["name"], template["container"]


def _arg(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


@pytest.mark.parametrize("name", [p.stem for p in WORKFLOWS])
def test_workflow_names_resolve(name: str) -> None:
    doc = workflow_docs()[name]
    params = _params(doc)
    bad = []
    for key, value in params.items():
        if key.endswith("_model"):
            bad += [f"{key}: {s!r} is not registered" for s in _slugs(value) if s not in REGISTRY]
        if key.endswith("_image"):
            slug = _image_slug(value)
            if slug is None:
                bad.append(f"{key}: {value!r} is not ghcr.io/madbench/<slug>:<tag>")
                continue
            folder = IMAGES / slug
            bad += [f"{key}: {n} missing" for n in _missing_files(slug)]
            if slug not in BASES and not (folder / "image.yaml").is_file():
                bad.append(f"{key}: images/{slug}/image.yaml missing")
            models = (image_docs().get(slug) or {}).get("models") or ()
            if models and not (folder / "weights.yaml").is_file():
                bad.append(f"{key}: images/{slug} runs {list(models)} but has no weights.yaml")
    if "images" in params:  # the weights workflow: a JSON list of image slugs
        listed = json.loads(params["images"])
        on_disk = sorted(p.parent.name for p in IMAGES.glob("*/weights.yaml"))
        if sorted(listed) != on_disk:
            bad.append(f"images: {listed} != the folders with a weights.yaml {on_disk}")
    assert not bad, bad


@pytest.mark.parametrize("name", [p.stem for p in WORKFLOWS if p.stem not in ("weights", "data")])
def test_workflow_templates_match_the_graph(name: str) -> None:
    """Each stage pod runs a stage of the graph, on ``<stage>_image``, with ``<stage>_model``,
    and that model's registry image is the image the workflow gives the stage."""
    doc = workflow_docs()[name]
    params = _params(doc)
    graph = graphs()["deaf" if name == "deaf" else "madbench"]
    seen, bad = set(), []
    for tname, container in _containers(doc):
        args = [str(a) for a in container.get("args") or ()]
        stage = _arg(args, "--stage")
        if stage is None:
            continue
        seen.add(stage)
        if stage not in graph.stages:
            bad.append(f"{tname}: --stage {stage} is not a stage of the graph")
            continue
        if not tname.startswith(stage.replace("_", "-") + "-"):
            bad.append(f"{tname}: template of stage {stage} is named otherwise")
        image_param = _PARAM.match(str(container.get("image", "")))
        if image_param is None or image_param.group(1) != f"{stage}_image":
            bad.append(f"{tname}: image {container.get('image')!r} is not {stage}_image")
            continue
        image = _image_slug(params.get(f"{stage}_image", ""))
        desc = next((p.get("description", "") for p in doc["spec"]["arguments"]["parameters"]
                     if p["name"] == f"{stage}_image"), "")
        if image and not desc.endswith(f"({image})"):
            bad.append(f"{stage}_image: description {desc!r} names another image than {image}")
        models = []
        for i, a in enumerate(args):
            if a == "--param" and args[i + 1].startswith("model="):
                ref = _PARAM.match(args[i + 1][len("model="):])
                if ref is None or ref.group(1) != f"{stage}_model":
                    bad.append(f"{tname}: {args[i + 1]} is not {stage}_model")
                else:
                    models += _slugs(params.get(ref.group(1), ""))
        fixed = _arg(args, "--params-json")
        if fixed:
            models += _param_models(json.loads(fixed))
        for slug in models:
            spec = REGISTRY.get(slug)
            if spec is not None and image and spec.image != image:
                bad.append(f"{stage}: model {slug} is registered on image {spec.image}, the "
                           f"workflow runs it on {image}")
    missing = set(graph.stages) - seen
    assert not missing, f"stages without a pod template: {sorted(missing)}"
    assert not bad, bad


# ---------------------------------------------------------------------------- paper models


@pytest.mark.parametrize("slug", [_gap("image_test", s) for s in _paper_models()])
def test_paper_model_runs_in_its_image_test(slug: str) -> None:
    """Its image's ``image_test`` writes a tiny checkpoint (``weights``: a builder that
    resolves) and one of the tested stages runs this model."""
    spec = REGISTRY[slug]
    doc = image_docs().get(spec.image) or {}
    test = doc.get("image_test") or {}
    assert test, f"images/{spec.image}/image.yaml has no image_test block"
    assert test.get("weights"), f"images/{spec.image}: image_test names no tiny-checkpoint builder"
    assert resolve_ref(test["weights"]) is None, resolve_ref(test["weights"])
    assert slug in _tested_models(doc), (
        f"images/{spec.image}: no tested stage runs {slug} (tested: {sorted(_tested_models(doc))})")


@pytest.mark.parametrize("slug", [_gap("adapter_tests", s) for s in _paper_models()])
def test_paper_model_has_adapter_tests(slug: str) -> None:
    """Its image lists adapter tests that exist, and one of them names the adapter class."""
    spec = REGISTRY[slug]
    tests = [ROOT / t for t in (image_docs().get(spec.image) or {}).get("adapter_tests") or ()]
    assert tests, f"images/{spec.image}/image.yaml lists no adapter_tests"
    assert all(t.is_file() for t in tests), [str(t) for t in tests if not t.is_file()]
    cls = spec.target.partition(":")[2]
    assert any(re.search(rf"\b{cls}\b", t.read_text()) for t in tests), (
        f"no adapter test of images/{spec.image} names {cls}")


# ----------------------------------------------------------------------------- lightness


def test_the_catalog_imports_no_model_library() -> None:
    """What this test imports (the registry, both graphs) pulls in no model library."""
    code = ("import sys, madbench_common.models.registry, "
            "madbench_common.benchmarks.madbench.graph, "
            "madbench_common.benchmarks.deaf.graph; "
            "print(sorted(m for m in ('torch', 'transformers', 'tensorflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
