"""Fingerprints and caches that notice every change.

A toy graph — ``source`` → ``feat_a`` (model A, image img-a) → ``combine_a``, and
``source`` → ``feat_b`` (model B, image img-b) — runs as the Argo pods do: each stage's
context made with its image reference from an images lock, skipped when its ``_SUCCESS``
marker carries the same fingerprint. The models are real registry entries whose adapters
read a pinned weights file through :func:`madbench_common.models.weights.url_file`. A weights
update, an image rebuild and an adapter (helper) change each recompute exactly the
stages that depend on them; an unchanged rerun recomputes nothing.
"""

from __future__ import annotations

import hashlib
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.core.store import RunStore, open_store
from madbench_common.models.answer_cache import ResponseCache, ResponseKey
from madbench_common.models.registry import REGISTRY, ModelSpec, load_model
from madbench_common.models.roles import OmniAnswer
from madbench_common.pipeline.argo import ImageLock
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.identity import (
    cache_identity,
    message_layout,
    model_identity,
    stage_models,
)
from madbench_common.pipeline.stage import make_context, merge_stage, read_marker, run_shard

PKG = "idtoypkg"
STAGES = textwrap.dedent('''
    from dataclasses import dataclass
    from madbench_common.core.manifest import ManifestRow, manifest
    from madbench_common.pipeline.paramspec import StageParams, param
    from madbench_common.pipeline.stage import StageImpl
    from madbench_common.models.registry import load_model

    @manifest("idtoy", 1, key="item_id")
    @dataclass(frozen=True, kw_only=True)
    class IdRow(ManifestRow):
        item_id: str
        value: int = 0

    class Source(StageImpl[IdRow]):
        def plan(self): return ["c00", "c01", "c02"]
        def run_items(self, items): return [IdRow(item_id=i, value=int(i[1:])) for i in items]

    class Predict(StageImpl[IdRow]):
        def plan(self): return [r.item_id for r in self.ctx.read_input("source", IdRow)]
        def run_items(self, items):
            model = load_model(self.ctx.params["model"])
            return [IdRow(item_id=i, value=model.predict(i)) for i in items]

    class Combine(StageImpl[IdRow]):
        @dataclass(frozen=True)
        class Params(StageParams):
            source: str = param("", doc="the stage whose values are summed")
        def plan(self): return ["all"]
        def run_items(self, items):
            rows = self.ctx.read_input(self.ctx.params["source"], IdRow)
            return [IdRow(item_id="all", value=sum(r.value for r in rows))]
''')
ADAPTER = textwrap.dedent('''
    from madbench_common.models.weights import url_file
    from {pkg}.{helper} import scale

    class Model:
        slug, version, reference = "{slug}", "1", False
        def __init__(self):
            self.weight = url_file("{file}", image="{image}").read_bytes()
        def predict(self, item):
            return scale(self.weight[0] + int(item[1:]))
''')


class Toy:
    """The toy package, images, weights root and lock of one test."""

    def __init__(self, root: Path) -> None:
        self.root, self.pkg = root, root / "src" / PKG
        self.pkg.mkdir(parents=True)
        (self.pkg / "__init__.py").write_text("")
        (self.pkg / "stages.py").write_text(STAGES)
        for name in ("a", "b"):
            self.helper(name, 2)
            (self.pkg / f"adapter_{name}.py").write_text(ADAPTER.format(
                pkg=PKG, helper=f"helper_{name}", slug=f"id-model-{name}",
                file=f"{name}.bin", image=f"img-{name}"))
            self.weights(name, bytes([10 if name == "a" else 20]) * 64)
        self.lock = {f"img-{n}": {"status": "pinned", "ref": f"r.example/img-{n}:1",
                                  "digest": f"sha256:{n * 64}"} for n in ("a", "b")}
        self.lock["reference-cpu"] = {"status": "pinned", "ref": "r.example/reference-cpu:1",
                                      "digest": f"sha256:{'e' * 64}"}  # the core stages'

    def helper(self, name: str, factor: int) -> None:
        (self.pkg / f"helper_{name}.py").write_text(f"def scale(x):\n    return x * {factor}\n")

    def weights(self, name: str, data: bytes) -> None:
        """The file in the weights root and its pin in weights.yaml (a re-pin)."""
        (self.root / "weights" / "files" / f"img-{name}").mkdir(parents=True, exist_ok=True)
        (self.root / "weights" / "files" / f"img-{name}" / f"{name}.bin").write_bytes(data)
        spec = self.root / "images" / f"img-{name}" / "weights.yaml"
        spec.parent.mkdir(parents=True, exist_ok=True)
        spec.write_text(f"image: img-{name}\nurls:\n  - name: {name}.bin\n"
                        f"    url: http://example.invalid/{name}.bin\n"
                        f"    sha256: '{hashlib.sha256(data).hexdigest()}'\n")

    def graph(self) -> Graph:
        t = f"{PKG}.stages"
        return Graph([
            Stage(name="source", role="core", target=f"{t}:Source"),
            Stage(name="feat_a", role="encoder", target=f"{t}:Predict", inputs=("source",),
                  model="id-model-a", image="img-a"),
            Stage(name="combine_a", role="core", target=f"{t}:Combine", inputs=("feat_a",),
                  params={"source": "feat_a"}),
            Stage(name="feat_b", role="encoder", target=f"{t}:Predict", inputs=("source",),
                  model="id-model-b", image="img-b"),
        ])

    def run(self, allow_unpinned: bool | None = None) -> list[str]:
        """Every stage as its pod would run it; the stages that were computed."""
        for mod in [m for m in sys.modules if m.startswith((f"{PKG}.adapter", f"{PKG}.helper"))]:
            del sys.modules[mod]  # a changed adapter is imported afresh, as in a new pod
        load_model.cache_clear()
        run, lock, graph, done = RunStore(open_store(str(self.root / "store")), "r"), \
            ImageLock(self.lock), self.graph(), []
        for stage in graph:
            ctx = make_context(run, graph, stage.name, {}, lock.ref(stage.image), 0,
                               allow_unpinned)
            marker = read_marker(run, stage.name)
            if marker is not None and marker["fingerprint"] == ctx.fingerprint:
                continue
            run_shard(ctx, 0, 1)
            merge_stage(ctx, 1)
            done.append(stage.name)
        return done


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Toy]:
    t = Toy(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    # no .pyc: an edited helper of the same size within the same second would load stale
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("MADBENCH_IMAGES_DIR", str(tmp_path / "images"))
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path / "weights"))
    for n in ("a", "b"):
        monkeypatch.setitem(REGISTRY, f"id-model-{n}", ModelSpec(
            f"id-model-{n}", "encoder", f"{PKG}.adapter_{n}:Model", False, f"img-{n}",
            f"toy model {n}"))
    yield t
    load_model.cache_clear()
    for mod in [m for m in sys.modules if m == PKG or m.startswith(f"{PKG}.")]:
        del sys.modules[mod]


def _value(toy: Toy, stage: str) -> list[int]:
    from idtoypkg.stages import IdRow  # type: ignore[import-not-found]

    run = RunStore(open_store(str(toy.root / "store")), "r")
    ctx_rows = run.get_bytes(f"{stage}/manifest.parquet")
    from madbench_common.core.manifest import read_manifest_bytes

    return [r.value for r in read_manifest_bytes(IdRow, ctx_rows, stage)]


def test_each_change_recomputes_exactly_the_stages_that_depend_on_it(toy: Toy) -> None:
    assert toy.run() == ["source", "feat_a", "combine_a", "feat_b"]
    assert toy.run() == []  # nothing changed: nothing recomputed
    assert _value(toy, "combine_a") == [(10 * 3 + 3) * 2]

    # a weights update of model A (new file, new pin): A's stage and what reads it
    toy.weights("a", bytes([11]) * 64)
    assert toy.run() == ["feat_a", "combine_a"]
    assert _value(toy, "combine_a") == [(11 * 3 + 3) * 2]

    # an image rebuild of img-b (a new digest in the lock): only the stage in that image;
    # its rows are the same, so nothing downstream would run again
    toy.lock["img-b"]["digest"] = f"sha256:{'c' * 64}"
    assert toy.run() == ["feat_b"]

    # an adapter change (a helper module model A imports): A's stage and what reads it
    toy.helper("a", 3)
    assert toy.run() == ["feat_a", "combine_a"]
    assert _value(toy, "combine_a") == [(11 * 3 + 3) * 3]
    assert toy.run() == []


def test_the_marker_records_the_models_and_the_pins_choice(toy: Toy) -> None:
    toy.run(allow_unpinned=False)  # every toy entry is pinned: allowed
    run = RunStore(open_store(str(toy.root / "store")), "r")
    marker = read_marker(run, "feat_a")
    assert marker is not None
    ident = marker["models"]["id-model-a"]
    assert ident["weights"]["urls"]["a.bin"]["sha256"] == hashlib.sha256(
        bytes([10]) * 64).hexdigest()
    assert marker["weights"] == {"allow_unpinned": False, "unpinned": []}
    assert "models" not in (read_marker(run, "combine_a") or {})


def test_unpinned_weights_are_refused_when_pins_are_required(toy: Toy) -> None:
    spec = toy.root / "images" / "img-b" / "weights.yaml"
    spec.write_text(spec.read_text().replace(spec.read_text().split("sha256: ")[1].strip(),
                                             "unpinned"))
    with pytest.raises(ConfigError, match=r"stage feat_b: unpinned weights \(id-model-b: b.bin"):
        toy.run(allow_unpinned=False)
    assert toy.run(allow_unpinned=True) == ["feat_b"]  # source and feat_a ran before the refusal
    marker = read_marker(RunStore(open_store(str(toy.root / "store")), "r"), "feat_b")
    assert marker is not None
    assert marker["weights"] == {"allow_unpinned": True, "unpinned": ["id-model-b: b.bin"]}


def test_compound_stages_name_their_models_in_params() -> None:
    assert stage_models("ref-silero-vad+ref-pocketsphinx", {
        "vad": "qc-silero-vad", "asr": "qc-whisper", "prompt_model": "", "n": 3}) == [
        "qc-silero-vad", "qc-whisper"]
    assert stage_models("ref-resemblyzer", {"model": "qc-ecapa"}) == ["qc-ecapa"]
    assert stage_models("", {"model": ""}) == []


def test_an_av_detector_identity_covers_its_helpers_and_face_cropper(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """det-avh-align reads its weights and crops faces with ref-haar-face: an edit to the
    cropper's module changes the detector's adapter identity."""
    from madbench_common.pipeline import identity

    before = model_identity("det-avh-align")
    assert set(before["weights"]["urls"]) == {"self_large_vox_433h.pt", "AVH-Align_AV1M.pt"}
    real = identity._read

    def edited(name: str, roots: tuple[str, ...]) -> Any:
        got = real(name, roots)
        if name == "madbench_common.models.reference.face" and got is not None:
            code = {k: ("0" * 64, refs, found) for k, (_, refs, found) in got.code.items()}
            return replace(got, code=code)
        return got

    monkeypatch.setattr(identity, "_read", edited)
    after = model_identity("det-avh-align")
    assert after["adapter"] != before["adapter"] and after["weights"] == before["weights"]


class _Omni:
    slug, version = "omni-qwen25omni-tiny", "x"

    def __init__(self, system: str, dtype: str) -> None:
        self.system = system
        self.model = type("M", (), {"dtype": dtype, "parameters": lambda self: iter(())})()

    def conversation(self, prompt: str, video: bool) -> list[dict[str, Any]]:
        return [{"role": "system", "content": self.system},
                {"role": "user", "content": ["video"] * video + [prompt]}]


def test_cache_keys_change_with_dtype_layout_image_and_weights(
        toy: Toy, tmp_path: Path) -> None:
    base = cache_identity("omni-qwen25omni-tiny", "img@sha256:1", {}, _Omni("sys", "bf16"),
                          omni=True)
    assert base == cache_identity("omni-qwen25omni-tiny", "img@sha256:1", {},
                                  _Omni("sys", "bf16"), omni=True)
    for other in (_Omni("another system prompt", "bf16"), _Omni("sys", "float32")):
        assert cache_identity("omni-qwen25omni-tiny", "img@sha256:1", {}, other,
                              omni=True) != base
    assert cache_identity("omni-qwen25omni-tiny", "img@sha256:2", {}, _Omni("sys", "bf16"),
                          omni=True) != base
    assert "another system prompt" in message_layout(_Omni("another system prompt", "x"))
    # the feature cache: a re-pin of the model's weights misses
    model = object()
    before = cache_identity("id-model-a", "embedded", {}, model)
    toy.weights("a", bytes([12]) * 64)
    assert cache_identity("id-model-a", "embedded", {}, model) != before
    # the omni response cache: another identity is another entry
    cache = ResponseCache(open_store(str(tmp_path / "cache")))
    key = ResponseKey("m", "1", "img", "p", ("a",), "A", identity="x")
    cache.put(key, OmniAnswer("yes", (), "", 0.1))
    assert cache.get(key) is not None
    assert cache.get(ResponseKey("m", "1", "img", "p", ("a",), "A", identity="y")) is None


def test_identities_name_code_without_its_module_path() -> None:
    """A target is named by its attribute alone, and a model's identity holds its slug and
    the digest of its code, never a module path (a move changes nothing:
    ``test_identity_moves.py``)."""
    from madbench_common.pipeline.identity import canonical_name

    assert canonical_name("madbench_common.benchmarks.madbench.stages.ingest:IngestStage") == \
        "IngestStage"
    assert canonical_name("madbench_common.cli.deaf") == "deaf"
    ident = model_identity("ref-av-sync-det")
    assert "madbench_common" not in str(ident)
