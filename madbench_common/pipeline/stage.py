"""Running one stage shard and merging shards: the unit both backends execute.

A stage's output lives under a prefix named by its fingerprint (stage, image, model
identities, parameters, seed, schema version and the sha256 of every input manifest), so a
changed input is recomputed and an unchanged one skipped on rerun, on both backends; the
``_SUCCESS`` markers are written last. Results never depend on ``--workers``, the shard
count or the CPU count (math libraries run pinned, :mod:`~madbench_common.pipeline.threads`).
One bad item never fails a shard (:mod:`~madbench_common.pipeline.failures`); faults that
are not about the input have a per-stage budget, ``max_failed_fraction``
(:func:`check_budget`). The run layout and the budget are in the README (What a run writes).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import tempfile
import time
import typing
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import pyarrow as pa

from madbench_common.core.errors import ChecksumError, ConfigError, InputRejected, ManifestError
from madbench_common.core.manifest import (
    ManifestRow,
    Provenance,
    params_json,
    read_manifest_bytes,
    read_manifest_table,
    write_manifest_bytes,
    write_table_bytes,
)
from madbench_common.core.s3client import retries_since, retry_stats
from madbench_common.core.store import ObjectInfo, RunStore
from madbench_common.core.types import Audio, Key
from madbench_common.core.usage import peak_rss_bytes, reset_peak_rss
from madbench_common.media.audio import read_wav_bytes, wav_bytes
from madbench_common.pipeline.allocator import tune_malloc
from madbench_common.pipeline.failures import (
    BUDGET_PARAM,
    DEFAULT_MAX_FAILED_FRACTION,
    BatchOutOfMemory,
    StageFailed,
    blank_row,
    free_gpu_memory,
    is_fault,
    is_gpu_oom,
    oom_retry,
    row_failure,
    stage_failure,
)
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.identity import canonical_name, stage_identity, unpinned_weights
from madbench_common.pipeline.paramspec import (
    StageParams,
    build_params,
    declared_defaults,
    unfingerprinted,
)
from madbench_common.pipeline.threads import math_threads, pin_threads

__all__ = [
    "MapStage",
    "RejectionBudgetExceeded",
    "ShardResult",
    "StageContext",
    "StageImpl",
    "check_budget",
    "check_pins",
    "load_impl",
    "make_context",
    "merge_stage",
    "merged_manifest",
    "read_marker",
    "reason_counts",
    "rejection_budget",
    "run_shard",
    "shard_items",
    "shard_key",
    "stage_params",
]

log = logging.getLogger("madbench")
rejected_log = logging.getLogger("madbench.rejected")
"""One line per quarantined row (``madbench -v`` shows them); the runner logs one summary
line per stage and reason instead, so 100,000 missing files are not 100,000 lines."""
ROW = TypeVar("ROW", bound=ManifestRow)


@dataclass
class StageContext:
    """Everything a stage implementation may touch while running."""

    run: RunStore
    stage: Stage
    graph: Graph
    params: Mapping[str, Any]
    fingerprint: str
    image: str
    seed: int
    scratch: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))
    params_hash: str = ""
    """Hash of the parameters as the fingerprint sees them (content, not the text, of a
    parameter naming outside inputs); empty: hash ``params`` as they are."""
    models: dict[str, Any] = field(default_factory=dict)
    """slug → identity of each model the stage runs (:func:`stage_identity`)."""
    allow_unpinned: bool | None = None
    """Whether unpinned weights were allowed (``None``: not asked, a local run)."""

    @property
    def prefix(self) -> Key:
        """Where this stage writes its artifacts: ``<stage>/<fingerprint[:16]>``."""
        return f"{self.stage.name}/{self.fingerprint[:16]}"

    def key(self, *parts: str) -> Key:
        return "/".join((self.prefix, *parts))

    def has_input(self, stage_name: str) -> bool:
        """Whether an upstream stage has finished (an optional input may be absent)."""
        return read_marker(self.run, stage_name) is not None

    def read_input(self, stage_name: str, row_type: type[ROW]) -> list[ROW]:
        """Rows of an upstream stage's merged manifest, checksum-verified."""
        marker = read_marker(self.run, stage_name)
        if marker is None:
            raise ManifestError(f"{self.run.uri(stage_name)}: upstream stage has not finished")
        data = self.run.get_bytes(f"{stage_name}/manifest.parquet", marker["manifest_sha256"])
        return read_manifest_bytes(row_type, data, self.run.uri(f"{stage_name}/manifest.parquet"))

    def provenance(self, model_slug: str = "", model_version: str = "") -> Provenance:
        return Provenance(
            stage=self.stage.name,
            model_slug=model_slug or self.params.get("model", "") or self.stage.model,
            model_version=model_version,
            params_hash=self.params_hash or _params_hash(self.params),
            seed=self.seed,
        )

    def rng(self, *salt: str) -> np.random.Generator:
        """A generator seeded by the run seed, this stage and ``salt`` (e.g. a clip id)."""
        text = "/".join((str(self.seed), self.stage.name, *salt)).encode()
        return np.random.default_rng(int.from_bytes(hashlib.sha256(text).digest()[:8], "little"))

    def load_audio(self, uri: str, sha256: str) -> tuple[Audio, int]:
        """Read a WAV artifact of this run by reference (run-relative, or an absolute URI
        of this run in any store), verifying its checksum."""
        return read_wav_bytes(self.run.get_bytes(self.run.key_of(uri), sha256))

    def save_audio(self, key: Key, audio: Audio, sample_rate: int) -> ObjectInfo:
        """Write float32 WAV at ``key`` under this stage's prefix."""
        return self.run.put_bytes(self.key(key), wav_bytes(audio, sample_rate))

    @contextmanager
    def tempdir(self) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix=f"mb-{self.stage.name}-") as tmp:
            yield Path(tmp)


class StageImpl(ABC, Generic[ROW]):
    """A stage implementation: plan items, then turn a shard of items into rows."""

    row_type: ClassVar[type[ManifestRow]]
    """The rows it writes: the class's generic argument (``StageImpl[SampleRow]``)."""
    id_field: ClassVar[str] = ManifestRow.KEY
    """The field naming an item: the row type's :attr:`~ManifestRow.KEY`."""
    separable: ClassVar[bool] = False
    """Whether an item's rows depend on that item alone, not on the others of its shard.
    Then an item whose handling raises is quarantined alone (:meth:`quarantine_row`) and
    the shard's other items are computed one by one; otherwise the shard fails."""
    Params: ClassVar[type[StageParams]] = StageParams
    """Every parameter the implementation reads, typed, with its default, unit and paper
    section (:mod:`~madbench_common.pipeline.paramspec`). A stage's parameters are the
    defaults of its fields that are not optional, then its graph declaration's (only what
    differs for that stage), then the user's (:func:`stage_params`); the fields are every
    key ``--set`` accepts and type the values given."""
    p: StageParams
    """This shard's parameters as :attr:`Params` (``ctx.params`` is the same, as a mapping)."""
    batched: ClassVar[bool] = False
    """Whether :meth:`run_items` runs several items in one model call, so its memory grows
    with the shard: on a GPU out of memory the shard loop retries it at half the items,
    down to one (then the row is rejected, ``gpu_out_of_memory``)."""
    content_params: ClassVar[tuple[str, ...]] = ()
    """Parameters naming inputs from outside the run: the fingerprint hashes
    :meth:`content_identity` in their place."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Take :attr:`row_type` from the generic argument and :attr:`id_field` from its
        key, so a stage names its row type once; a class may still set either."""
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            arg = next(iter(typing.get_args(base)), None)
            if isinstance(arg, type) and issubclass(arg, ManifestRow) \
                    and "row_type" not in cls.__dict__:
                cls.row_type = arg
        if "row_type" in cls.__dict__ and "id_field" not in cls.__dict__:
            cls.id_field = cls.row_type.KEY

    @classmethod
    def content_identity(cls, params: Mapping[str, Any]) -> Any:
        """What the :attr:`content_params` name, as content (e.g. file sha256s)."""
        return None

    def __init__(self, ctx: StageContext) -> None:
        self.ctx = ctx
        self.p = build_params(type(self).Params, ctx.params, ctx.stage.name)
        self.item_seconds: dict[str, float] = {}
        """Wall seconds per item (MapStage fills it unless the stage did); kept in the shard
        marker, never in the manifest, whose bytes must not depend on timing."""

    @abstractmethod
    def plan(self) -> list[str]:
        """The sorted item ids this stage processes (deterministic)."""

    @abstractmethod
    def run_items(self, items: Sequence[str]) -> list[ROW]:
        """Rows for ``items`` (rejected items included, with status ``rejected``)."""

    def quarantine_row(self, item: str, exc: InputRejected) -> ROW:
        """The row of an item that failed (a :attr:`separable` stage): its id, the reason."""
        row: ROW = blank_row(self.row_type, {self.id_field: item}, exc)  # type: ignore[assignment]
        return row.with_provenance(self.ctx.provenance())


class MapStage(StageImpl[ROW]):
    """A stage that handles each item independently; a failing item is quarantined.

    What fails one item and what fails the stage is decided by
    :func:`~madbench_common.pipeline.failures.row_failure`: a missing tool, model or
    weight (:class:`~madbench_common.core.errors.EnvironmentMissing`) is never quarantined,
    even when stage code wrapped it into :class:`InputRejected`: the shard fails and the
    CLI exits 3 with the reason, instead of "succeeding" with every row rejected.
    """

    separable = True

    @abstractmethod
    def run_item(self, item: str) -> ROW:
        """One item's row; raise :class:`InputRejected` for bad input."""

    @abstractmethod
    def rejected_row(self, item: str, exc: InputRejected) -> ROW:
        """The quarantine row for an item whose input was rejected."""

    def quarantine_row(self, item: str, exc: InputRejected) -> ROW:
        return self.rejected_row(item, exc)

    def run_items(self, items: Sequence[str]) -> list[ROW]:
        rows = []
        for item in items:
            start = time.perf_counter()
            try:
                row = self.run_item(item)
            except Exception as exc:  # sorted: a stage fault is raised again
                rejected = row_failure(exc, item)
                if rejected is not exc:
                    log.debug("%s: %s failed", self.ctx.stage.name, item, exc_info=exc)
                rejected_log.info("%s: rejected %s", self.ctx.stage.name, rejected)
                row = self.rejected_row(item, rejected)
            # a stage may record a narrower time itself (a generator: its model call only)
            self.item_seconds.setdefault(item, round(time.perf_counter() - start, 4))
            rows.append(row)
        return rows


def load_impl(target: str) -> type[StageImpl[Any]]:
    """Import ``module:Class`` lazily (the orchestrator never imports model code)."""
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module), name)
    if not (isinstance(cls, type) and issubclass(cls, StageImpl)):
        raise TypeError(f"{target} is not a StageImpl")
    return cls


def read_marker(run: RunStore, stage_name: str) -> dict[str, Any] | None:
    """The stage's ``_SUCCESS`` marker, or ``None`` if the stage has not finished.

    One read, no existence check first: a marker removed between the two (a repair
    invalidating the stage) is a stage not done, never a ``FileNotFoundError``."""
    key = f"{stage_name}/_SUCCESS"
    try:
        return _read_json(run, key)
    except FileNotFoundError:
        return None


def _read_json(run: RunStore, key: Key) -> dict[str, Any]:
    """A marker's JSON; unparsable bytes are damage (a :class:`ChecksumError` naming the key)."""
    data = run.get_bytes(key)
    try:
        marker: dict[str, Any] = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ChecksumError(f"{run.uri(key)}: marker is damaged ({exc})", key=key) from None
    return marker


def _params_hash(params: Mapping[str, Any]) -> str:
    return hashlib.sha256(params_json(params).encode()).hexdigest()[:16]


def _hashed_params(impl: type[StageImpl[Any]], params: Mapping[str, Any]) -> Mapping[str, Any]:
    """``params`` as the fingerprint sees them: what a content parameter names, not its
    text; never a field marked ``fingerprinted=False`` (the rejection budget decides pass
    or fail, the batch size how many inputs one model call takes: not what a row holds)."""
    if skip := unfingerprinted(impl.Params) & set(params):
        params = {k: v for k, v in params.items() if k not in skip}
    if not any(k in params for k in impl.content_params):
        return params
    kept = {k: v for k, v in params.items() if k not in impl.content_params}
    return {**kept, "content": impl.content_identity(params)}


def fingerprint(
    run: RunStore, graph: Graph, stage: Stage, params: Mapping[str, Any], image: str, seed: int,
    models: dict[str, Any] | None = None,
) -> str:
    """Hash of what determines a stage's output (inputs by their manifest sha256, the
    version of the manifest schema it writes, and the identity of every model it runs)."""
    return _fingerprint(run, stage, _hashed_params(load_impl(stage.target), params), image,
                        seed, params, models)


def _fingerprint(run: RunStore, stage: Stage, hashed: Mapping[str, Any], image: str,
                 seed: int, params: Mapping[str, Any], models: dict[str, Any] | None) -> str:
    upstream: dict[str, str | None] = {}
    for dep in stage.inputs:
        marker = read_marker(run, dep)
        if marker is None and dep in stage.optional_inputs:
            upstream[dep] = None  # absent (failed upstream): recomputed once it exists
            continue
        if marker is None:
            raise ManifestError(f"stage {stage.name!r} needs {dep!r}, which has not finished")
        upstream[dep] = marker["manifest_sha256"]
    # The row schema too: a schema bump must recompute the stage, never keep an older
    # manifest that the stages after it would refuse to read.
    rows = getattr(load_impl(stage.target), "row_type", None)
    schema = f"{rows.SCHEMA_NAME}/{rows.SCHEMA_VERSION}" if rows is not None else ""
    threads = math_threads()
    # The target under its canonical module name: a move of the code changes no fingerprint.
    fields: dict[str, Any] = {"stage": stage.name, "target": canonical_name(stage.target),
                              "image": image,
                              "params": hashed, "seed": seed, "inputs": upstream,
                              "schema": schema,
                              **({"math_threads": threads} if threads != 1 else {})}
    models = stage_identity(stage.model, params) if models is None else models
    if models:  # a model stage: adapter code, weights pins and dtype of each model
        fields["models"] = models
    return hashlib.sha256(params_json(fields).encode()).hexdigest()


def check_pins(stage: str, models: dict[str, Any], allow_unpinned: bool | None) -> None:
    """Refuse (exit 3) a stage whose models read unpinned weights when pins are required
    (``allow_unpinned`` False: the ``full`` workflows' default); ``None`` checks nothing."""
    loose = unpinned_weights(models)
    if loose and allow_unpinned is False:
        raise ConfigError(
            f"stage {stage}: unpinned weights ({'; '.join(loose)}); pin them where the hub is "
            "reachable (madbench weights pin --image <image>), commit weights.yaml and "
            "rebuild the images, or submit with -p allow_unpinned=true (recorded in the "
            "stage's _SUCCESS marker)")


def make_context(
    run: RunStore, graph: Graph, stage_name: str, params: Mapping[str, Any], image: str, seed: int,
    allow_unpinned: bool | None = None,
) -> StageContext:
    """Build a context whose fingerprint reflects the current inputs and models; with
    ``allow_unpinned`` False, refuse models whose weights are not pinned."""
    stage = graph[stage_name]
    merged = stage_params(stage, params)
    build_params(load_impl(stage.target).Params, merged, stage.name)  # refuse bad ones now
    models = stage_identity(stage.model, merged)
    check_pins(stage.name, models, allow_unpinned)
    hashed = _hashed_params(load_impl(stage.target), merged)
    fp = _fingerprint(run, stage, hashed, image, seed, merged, models)
    return StageContext(run, stage, graph, merged, fp, image, seed,
                        params_hash=_params_hash(hashed) if hashed is not merged else "",
                        models=models, allow_unpinned=allow_unpinned)


def stage_params(stage: Stage, params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters a stage runs with: its implementation's defaults, its model, the
    graph's declaration, then ``params``.

    A stage that runs one model always has ``model`` (its default slug unless
    overridden): Argo passes it explicitly, so both backends hash the same
    parameters and give the same ``params_hash``.
    """
    model = {"model": stage.model} if stage.swappable else {}
    defaults = declared_defaults(load_impl(stage.target).Params)
    return {**defaults, **model, **stage.params, **params}


def shard_items(items: Sequence[str], shard: int, num_shards: int) -> list[str]:
    """Contiguous, balanced slice ``shard`` of ``num_shards`` (sizes differ by ≤ 1)."""
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard {shard} not in [0, {num_shards})")
    bounds = np.linspace(0, len(items), num_shards + 1).round().astype(int)
    return list(items[bounds[shard] : bounds[shard + 1]])


def shard_key(prefix: Key, shard: int, num_shards: int, ext: str) -> Key:
    """``<prefix>/shards/NNNNN-of-MMMMM.<ext>`` (``ext``: ``parquet`` or ``_SUCCESS``)."""
    return f"{prefix}/shards/{shard:05d}-of-{num_shards:05d}.{ext}"


def _shard_key(ctx: StageContext, shard: int, num_shards: int, ext: str) -> Key:
    return shard_key(ctx.prefix, shard, num_shards, ext)


@dataclass(frozen=True)
class ShardResult:
    """What running one shard did."""

    stage: str
    shard: int
    items: int
    rejected: int
    skipped: bool
    seconds: float
    peak_rss: int = 0
    """Peak resident bytes while the shard ran (see :mod:`~madbench_common.core.usage`)."""
    retries: dict[str, int] = field(default_factory=dict)
    """Transient S3 replies retried while the shard ran, by code."""


def run_shard(ctx: StageContext, shard: int, num_shards: int) -> ShardResult:
    """Run one shard unless its marker exists; write rows, then the marker.

    Whatever escapes is a :class:`~madbench_common.core.errors.MadbenchError` with the exit
    code the README gives (:func:`~madbench_common.pipeline.failures.stage_failure`).
    """
    try:
        return _run_shard(ctx, shard, num_shards)
    except Exception as exc:
        failure = stage_failure(exc, f"stage {ctx.stage.name} shard {shard + 1}/{num_shards}")
        if failure is exc:
            raise
        raise failure from exc


def _run_items(impl: StageImpl[Any], items: Sequence[str]) -> list[Any]:
    """``impl.run_items``; if an item of a :attr:`~StageImpl.separable` stage raises,
    every item again one by one, and the failing ones quarantined; a
    :attr:`~StageImpl.batched` stage out of GPU memory: each half again, down to one item."""
    retry = impl.batched and len(items) > 1
    try:
        with oom_retry(retry):
            return impl.run_items(items)
    except Exception as exc:
        if retry and (isinstance(exc, BatchOutOfMemory) or is_gpu_oom(exc)):
            half = len(items) // 2
            log.warning("%s: GPU out of memory on %d items (%s); retrying at %d and %d",
                        impl.ctx.stage.name, len(items), exc, half, len(items) - half)
            free_gpu_memory()
            return _run_items(impl, items[:half]) + _run_items(impl, items[half:])
        if not impl.separable or len(items) < 2:
            if impl.separable and items:
                return [impl.quarantine_row(items[0], row_failure(exc, items[0]))]
            raise
        row_failure(exc, "")  # a fault of the whole stage is raised here
    rows: list[Any] = []
    for item in items:
        try:
            rows += impl.run_items([item])
        except Exception as exc:
            rejected = row_failure(exc, item)
            rejected_log.info("%s: rejected %s", impl.ctx.stage.name, rejected)
            rows.append(impl.quarantine_row(item, rejected))
    return rows


def _run_shard(ctx: StageContext, shard: int, num_shards: int) -> ShardResult:
    marker = _shard_key(ctx, shard, num_shards, "_SUCCESS")
    if ctx.run.exists(marker):
        return ShardResult(ctx.stage.name, shard, 0, 0, True, 0.0)
    pin_threads()
    tune_malloc()  # before the model loads: freed tensor buffers are reused, not unmapped
    before = retry_stats()
    reset_peak_rss()
    impl = load_impl(ctx.stage.target)(ctx)
    start = time.perf_counter()
    items = shard_items(impl.plan(), shard, num_shards)
    rows = _run_items(impl, items)
    data = write_manifest_bytes(impl.row_type, rows)
    info = ctx.run.put_bytes(_shard_key(ctx, shard, num_shards, "parquet"), data)
    ctx.run.put_bytes(marker, json.dumps({"sha256": info.sha256, "rows": len(rows),
                                          "reasons": reason_counts(
                                              r.reason for r in rows if not r.ok),
                                          "item_seconds": impl.item_seconds}).encode())
    rejected = sum(not r.ok for r in rows)
    return ShardResult(ctx.stage.name, shard, len(rows), rejected, False,
                       time.perf_counter() - start, peak_rss_bytes(), retries_since(before))


def merged_manifest(run: RunStore, prefix: Key, num_shards: int,
                    row_type: type[ManifestRow], id_field: str) -> tuple[bytes, pa.Table]:
    """The merged manifest's bytes (and table) from the ``num_shards`` shards under
    ``prefix``: concatenated, stably sorted by ``id_field``."""
    tables = []
    for shard in range(num_shards):
        mark_key = shard_key(prefix, shard, num_shards, "_SUCCESS")
        try:  # one read, no existence check first (a marker may go between the two)
            mark = _read_json(run, mark_key)
        except FileNotFoundError:
            raise ManifestError(f"{run.uri(mark_key)}: shard has not finished") from None
        key = shard_key(prefix, shard, num_shards, "parquet")
        tables.append(read_manifest_table(row_type, run.get_bytes(key, mark["sha256"]),
                                          run.uri(key)))
    merged = pa.concat_tables(tables).sort_by(id_field)
    return write_table_bytes(row_type, merged), merged


class RejectionBudgetExceeded(StageFailed):
    """More of a stage's rows were rejected for faults than its budget allows (exit 3)."""


def reason_counts(reasons: Iterable[str]) -> dict[str, int]:
    """How many rows each rejection reason has, by reason."""
    return dict(sorted(Counter(reasons).items()))


def rejection_budget(stage: str, params: Mapping[str, Any]) -> float:
    """The stage's ``max_failed_fraction`` (default 0.05), checked to lie in [0, 1]."""
    value = params.get(BUDGET_PARAM, DEFAULT_MAX_FAILED_FRACTION)
    try:
        budget = float(value)
    except (TypeError, ValueError):
        budget = -1.0
    if not 0.0 <= budget <= 1.0:
        raise ConfigError(f"stage {stage}: {BUDGET_PARAM} must be a fraction in [0, 1], "
                          f"got {value!r}")
    return budget


def check_budget(stage: str, rows: int, reasons: Mapping[str, int], budget: float,
                 examples: Mapping[str, str] | None = None) -> int:
    """The number of rows rejected for a fault reason; raises
    :class:`RejectionBudgetExceeded` when it is over ``budget`` × ``rows``, with one line
    per reason and its count (data reasons listed as not counted)."""
    failed = sum(n for r, n in reasons.items() if is_fault(r))
    if failed <= budget * rows:
        return failed
    examples = examples or {}
    lines = [f"stage {stage}: {failed} of {rows} rows ({100 * failed / rows:.1f} %) rejected "
             f"for faults that are not about the input data, over its budget "
             f"{BUDGET_PARAM}={budget:g} ({int(budget * rows)} rows); fix the cause, or "
             f"raise it with --set {stage}.{BUDGET_PARAM}=… (Argo: -p stage_params=…):"]
    for reason, n in sorted(reasons.items(), key=lambda kv: (not is_fault(kv[0]), -kv[1])):
        eg = f" (e.g. {examples[reason]})" if reason in examples else ""
        lines.append(f"  {reason}: {n}{eg}" if is_fault(reason)
                     else f"  {reason}: {n} (data, not counted)")
    raise RejectionBudgetExceeded("\n".join(lines))


def merge_stage(ctx: StageContext, num_shards: int) -> dict[str, Any]:
    """Concatenate shard manifests, sort by id, write the manifest and then ``_SUCCESS``.

    The shards are merged as Arrow tables (a stable sort by the id column), never as
    Python rows: at the paper's scale (49,608 sample rows) that is ~20× faster and needs
    a seventh of the memory, and the bytes are those of sorting the rows themselves.
    """
    try:
        return _merge_stage(ctx, num_shards)
    except Exception as exc:
        failure = stage_failure(exc, f"merging stage {ctx.stage.name}")
        if failure is exc:
            raise
        raise failure from exc


def _merge_stage(ctx: StageContext, num_shards: int) -> dict[str, Any]:
    impl_cls = load_impl(ctx.stage.target)
    row_type = impl_cls.row_type
    data, merged = merged_manifest(ctx.run, ctx.prefix, num_shards, row_type,
                                   impl_cls.id_field)
    info = ctx.run.put_bytes(f"{ctx.stage.name}/manifest.parquet", data)
    statuses = merged.column("status").to_pylist()
    reasons = reason_counts(r for s, r in zip(statuses, merged.column("reason").to_pylist())
                            if s != "ok")
    budget = rejection_budget(ctx.stage.name, ctx.params)
    try:
        failed = check_budget(ctx.stage.name, merged.num_rows, reasons, budget,
                              _examples(merged, impl_cls.id_field))
    except RejectionBudgetExceeded:
        _forget_faulty_shards(ctx, num_shards)
        raise
    marker = {
        "stage": ctx.stage.name,
        "fingerprint": ctx.fingerprint,
        "prefix": ctx.prefix,
        "image": ctx.image,
        "manifest_sha256": info.sha256,
        "rows": merged.num_rows,
        "rejected": sum(s != "ok" for s in statuses),
        "reasons": reasons,
        "budget": {BUDGET_PARAM: budget, "failed": failed},
        "schema": f"{row_type.SCHEMA_NAME}/v{row_type.SCHEMA_VERSION}",
        "key": impl_cls.id_field,
    }
    if ctx.models:  # provenance of the models: identity and the pins choice
        marker["models"] = ctx.models
        marker["weights"] = {"allow_unpinned": ctx.allow_unpinned,
                             "unpinned": unpinned_weights(ctx.models)}
    ctx.run.put_bytes(f"{ctx.stage.name}/_SUCCESS", json.dumps(marker, indent=1).encode())
    return marker


def _examples(merged: pa.Table, id_field: str) -> dict[str, str]:
    """The first row of each fault reason: ``<id>: <detail>`` (for the budget message)."""
    out: dict[str, str] = {}
    details = (merged.column("detail").to_pylist() if "detail" in merged.column_names
               else [""] * merged.num_rows)
    for rid, status, reason, detail in zip(merged.column(id_field).to_pylist(),
                                           merged.column("status").to_pylist(),
                                           merged.column("reason").to_pylist(), details):
        if status != "ok" and is_fault(reason) and reason not in out:
            text = str(detail)[:160]
            out[reason] = text if text.startswith(str(rid)) else f"{rid}: {text}"
    return out


def _forget_faulty_shards(ctx: StageContext, num_shards: int) -> None:
    """Remove the markers of the shards holding fault rows, so a rerun (another node, a
    fixed image) recomputes them instead of merging the same rows again."""
    for shard in range(num_shards):
        key = _shard_key(ctx, shard, num_shards, "_SUCCESS")
        reasons = _read_json(ctx.run, key).get("reasons")
        if reasons is None or any(is_fault(r) for r in reasons):  # None: an older marker
            ctx.run.delete(key)
