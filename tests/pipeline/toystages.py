"""Toy stages for runner tests: they count their calls in a file so reruns are visible."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madbench_common.core.errors import InputRejected
from madbench_common.core.manifest import ManifestRow, manifest
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import MapStage, StageImpl


@manifest("toy", 1)
@dataclass(frozen=True, kw_only=True)
class ToyRow(ManifestRow):
    clip_id: str
    value: int = 0
    uri: str = ""
    sha256: str = ""


@dataclass(frozen=True)
class ToyParams(StageParams):
    """Every toy stage's parameters (a toy reads the ones it needs)."""

    n: int = param(0, optional=True, doc="items planned")
    counter: str = param("", optional=True, doc="file each call is logged to")
    bad: list[int] = param([], optional=True, doc="values rejected as unreadable")
    fail: dict[str, str] = param({}, optional=True, doc="item → how it fails")
    fits: int = param(2, optional=True, doc="most items one batch holds")
    oom: list[str] = param([], optional=True, doc="items out of memory even alone")
    factor: int = param(1, optional=True, doc="read by no toy: it changes the fingerprint only")


def _count(path: str, line: str) -> None:
    with open(path, "a") as fh:
        fh.write(line + "\n")


def _planned(params: Mapping[str, Any]) -> list[str]:
    """Items ``c00``, ``c01``, … (``n`` of them)."""
    return [f"c{i:02d}" for i in range(int(params["n"]))]


class _ToyMap(MapStage[ToyRow]):
    """A map stage over :func:`_planned`'s items; a rejected item keeps its reason."""

    Params = ToyParams

    def plan(self) -> list[str]:
        return _planned(self.ctx.params)

    def rejected_row(self, item: str, exc: InputRejected) -> ToyRow:
        return ToyRow(clip_id=item, status="rejected", reason=exc.reason, detail=str(exc))


class Numbers(_ToyMap):
    """Each item's value times three, stored as a file; the values in ``bad`` unreadable."""

    def run_item(self, item: str) -> ToyRow:
        _count(self.ctx.params["counter"], f"numbers {item}")
        value = int(item[1:])
        if value in self.ctx.params.get("bad", []):
            raise InputRejected(f"/data/{item}.mp4", "unreadable", "test")
        info = self.ctx.run.put_bytes(self.ctx.key(f"{item}.txt"), str(value * 3).encode())
        return ToyRow(clip_id=item, value=value * 3, uri=info.uri,
                      sha256=info.sha256).with_provenance(self.ctx.provenance("toy", "1"))


class Total(StageImpl[ToyRow]):
    Params = ToyParams

    def plan(self) -> list[str]:
        return ["all"]

    def run_items(self, items: Sequence[str]) -> list[ToyRow]:
        rows = [r for r in self.ctx.read_input("numbers", ToyRow) if r.ok]
        _count(self.ctx.params["counter"], "total")
        total = sum(int(self.ctx.run.get_bytes(self.ctx.run.key_of(r.uri), r.sha256))
                    for r in rows)
        return [ToyRow(clip_id="total", value=total)]


def toy_graph() -> Graph:
    return Graph([
        Stage(name="numbers", role="core", target="tests.pipeline.toystages:Numbers", shards=4,
              params={"n": 10}),
        Stage(name="total", role="core", target="tests.pipeline.toystages:Total",
              inputs=("numbers",)),
    ])


def calls(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


# ---------------------------------------------------------------- failing items


def _fail(how: str, item: str) -> None:
    """Raise the failure ``how`` names, as stage or model code might on one item."""
    import errno

    if how == "runtime":
        raise RuntimeError(f"model blew up on {item}")
    if how == "name":
        raise OSError(errno.ENAMETOOLONG, "File name too long", f"/store/{item * 40}.wav")
    if how == "encoding":
        b"\xe9t\xe9".decode("utf-8")
    if how == "disk":
        raise OSError(errno.ENOSPC, "No space left on device", "/store/x.wav")
    if how == "module":
        import madbench_no_such_module  # noqa: F401
    if how == "readonly":
        raise OSError(errno.EROFS, "Read-only file system", "/weights/cache")
    if how == "device":  # what torch raises on a broken kernel or a bad index on the GPU
        raise RuntimeError("CUDA error: device-side assert triggered")
    if how == "dtype":
        raise RuntimeError("expected scalar type Float but found BFloat16")
    if how == "oom":
        import torch

        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    if how == "data":  # a data reason: never counts against the rejection budget
        raise InputRejected(item, "too_long", "the clip is longer than max_duration")


class Flaky(_ToyMap):
    """Items fail as ``params["fail"]`` says (``{item: how}``)."""

    def run_item(self, item: str) -> ToyRow:
        _fail(self.ctx.params.get("fail", {}).get(item, ""), item)
        return ToyRow(clip_id=item, value=int(item[1:]))


class Batch(StageImpl[ToyRow]):
    """Loops its items itself (as the feature and omni stages do); separable."""

    Params = ToyParams
    separable = True

    def plan(self) -> list[str]:
        return _planned(self.ctx.params)

    def run_items(self, items: Sequence[str]) -> list[ToyRow]:
        out = []
        for item in items:
            _fail(self.ctx.params.get("fail", {}).get(item, ""), item)
            out.append(ToyRow(clip_id=item, value=int(item[1:])))
        return out


class Whole(Batch):
    """Like :class:`Batch`, but its rows depend on the whole shard: not separable."""

    separable = False


class Batched(Batch):
    """Runs its shard as one batch on the "GPU": out of memory above ``fits`` items, and
    on the items of ``oom`` even alone; logs each batch it is given to ``counter``."""

    batched = True

    def run_items(self, items: Sequence[str]) -> list[ToyRow]:
        if self.ctx.params.get("counter"):
            _count(self.ctx.params["counter"], ",".join(items))
        if len(items) > int(self.ctx.params.get("fits", 2)) or \
                set(items) & set(self.ctx.params.get("oom", [])):
            import torch

            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 8.00 GiB")
        return super().run_items(items)


def failing_graph() -> Graph:
    return Graph([
        Stage(name="flaky", role="core", target="tests.pipeline.toystages:Flaky", shards=2,
              params={"n": 6}),
        Stage(name="batch", role="core", target="tests.pipeline.toystages:Batch", shards=2,
              params={"n": 6}),
        Stage(name="whole", role="core", target="tests.pipeline.toystages:Whole",
              params={"n": 4}),
        Stage(name="batched", role="core", target="tests.pipeline.toystages:Batched",
              params={"n": 8}),
    ])
