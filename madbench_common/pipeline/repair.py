"""Recompute what a damaged object came from: the shard (or merge) that wrote it.

When a :class:`~madbench_common.core.errors.ChecksumError` names a key whose bytes no
longer match their sha256, :func:`invalidate` removes the markers that vouch for it, so the
next pass of either backend recomputes exactly that shard or merge (a shared cache entry is
deleted) instead of using the damaged object. :func:`manifest_intact` rebuilds a damaged
merged manifest from its shards (the merge is deterministic), so ``madbench run`` and
``madbench status`` never stop on one.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from madbench_common.core.errors import ChecksumError, ManifestError, StoreKeyError
from madbench_common.core.store import RunStore
from madbench_common.core.types import Key
from madbench_common.pipeline.graph import Stage
from madbench_common.pipeline.stage import StageContext, load_impl, merged_manifest, read_marker

__all__ = ["invalidate", "manifest_intact", "stage_done"]

log = logging.getLogger("madbench")
_SHARD = re.compile(r"^(?P<prefix>[^/]+/[^/]+)/shards/(?P<name>\d+-of-\d+)\.(parquet|_SUCCESS)$")


def invalidate(run: RunStore, key: Key) -> str:
    """Delete the markers vouching for damaged ``key``; returns what will be recomputed.

    Raises the original :class:`ChecksumError` when ``key`` belongs to nothing a
    rerun can rebuild.
    """
    if key.startswith("_cache/"):
        run.store.delete(key)
        return f"cache entry {key}"
    stage = key.split("/", 1)[0]
    if key in (f"{stage}/_SUCCESS", f"{stage}/manifest.parquet"):
        run.delete(f"{stage}/_SUCCESS")
        return f"the merge of stage {stage}"
    shard = _SHARD.match(key)
    if shard:
        return _drop_shard(run, stage, f"{shard['prefix']}/shards/{shard['name']}")
    found = _shard_of_artifact(run, key)
    if found is None:
        raise ChecksumError(f"{run.uri(key)}: damaged, and no shard of this run wrote it",
                            key=key)
    run.delete(key)
    return _drop_shard(run, stage, found)


def _drop_shard(run: RunStore, stage: str, shard_base: Key) -> str:
    run.delete(f"{shard_base}._SUCCESS")
    run.delete(f"{stage}/_SUCCESS")
    return f"shard {shard_base.rsplit('/', 1)[1]} of stage {stage}"


def _shard_of_artifact(run: RunStore, key: Key) -> Key | None:
    """``<prefix>/shards/N-of-M`` whose manifest references ``key``, or ``None``."""
    parts = key.split("/")
    if len(parts) < 3:
        return None
    prefix = "/".join(parts[:2])
    for shard in run.list(f"{prefix}/shards"):
        if not shard.endswith(".parquet"):
            continue
        try:
            table = pq.read_table(io.BytesIO(run.get_bytes(shard)))
        except (ChecksumError, OSError, pa.ArrowException):
            continue
        if _references(run, table, key):
            return shard.removesuffix(".parquet")
    return None


def _references(run: RunStore, table: pa.Table, key: Key) -> bool:
    for name in table.column_names:
        if not name.endswith("uri"):
            continue
        for ref in table.column(name).to_pylist():
            if ref and _key_or_none(run, str(ref)) == key:
                return True
    return False


def _key_or_none(run: RunStore, ref: str) -> Key | None:
    try:
        return run.key_of(ref)
    except StoreKeyError:
        return None


def manifest_intact(run: RunStore, stage: Stage, marker: dict[str, Any]) -> bool:
    """Whether ``<stage>/manifest.parquet`` matches ``marker``, after rebuilding it from the
    stage's shards if it did not (the merge is deterministic: the rebuilt bytes must have
    the recorded sha256). ``False``, with the marker removed so that the stage is merged
    again, when it cannot be rebuilt."""
    key = f"{stage.name}/manifest.parquet"
    try:
        run.get_bytes(key, marker["manifest_sha256"])
        return True
    except (ChecksumError, FileNotFoundError) as exc:
        problem = str(exc)
    impl = load_impl(stage.target)
    prefix = str(marker.get("prefix", ""))
    n = _shard_count(run, prefix)
    data = b""
    if n:
        try:
            data = merged_manifest(run, prefix, n, impl.row_type, impl.id_field)[0]
        except (ChecksumError, ManifestError, FileNotFoundError):
            data = b""
    if data and hashlib.sha256(data).hexdigest() == marker["manifest_sha256"]:
        run.put_bytes(key, data)
        log.warning("%s; rebuilt from its %d shard(s), sha256 as recorded", problem, n)
        return True
    run.delete(f"{stage.name}/_SUCCESS")
    log.warning("%s; stage %s will run again", problem, stage.name)
    return False


def stage_done(ctx: StageContext) -> bool:
    """Whether the stage finished with the current fingerprint and its merged manifest is
    intact; a damaged manifest is rebuilt from the shards (:func:`manifest_intact`)."""
    marker = read_marker(ctx.run, ctx.stage.name)
    if marker is None or marker.get("fingerprint") != ctx.fingerprint:
        return False
    return manifest_intact(ctx.run, ctx.stage, marker)


def _shard_count(run: RunStore, prefix: str) -> int:
    """``M`` of the ``NNNNN-of-MMMMM`` shard markers under ``prefix`` (0 if none)."""
    counts = {name.rsplit("-of-", 1)[1].split(".", 1)[0] for name in run.list(f"{prefix}/shards")
              if "-of-" in name} if prefix else set()
    return int(counts.pop()) if len(counts) == 1 else 0
