"""Typed, versioned Parquet manifests: the only thing stages hand to each other.

A manifest kind is a frozen dataclass (one row) decorated with :func:`manifest`,
which derives its Arrow schema from the type hints and records a name and version
in the Parquet metadata. Reading checks both, so a stage never consumes a
manifest of the wrong kind or an older incompatible version.
"""

from __future__ import annotations

import dataclasses
import io
import json
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from madbench_common.core.compat import UNION_TYPES, row, type_hints
from madbench_common.core.errors import ManifestError

__all__ = [
    "ARTIFACT_FIELDS",
    "ManifestRow",
    "Provenance",
    "arrow_schema",
    "from_table",
    "manifest",
    "params_json",
    "read_manifest_bytes",
    "read_manifest_table",
    "rows_to_frame",
    "rows_to_table",
    "write_manifest_bytes",
    "write_table_bytes",
]

ROW = TypeVar("ROW", bound="ManifestRow")
ARTIFACT_FIELDS = ("uri", "sha256", "duration", "sample_rate")
"""Every artifact column group ``<name>_uri``, ``<name>_sha256``, … carries these."""

_META_NAME = b"madbench.schema"
_META_VERSION = b"madbench.schema_version"
_SCALARS: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
}


@dataclass(frozen=True)
class Provenance:
    """Who made an artifact: stage, model slug and version, params hash, seed."""

    stage: str
    model_slug: str
    model_version: str
    params_hash: str
    seed: int


@row
class ManifestRow:
    """Base of every manifest row: status, rejection reason and provenance columns."""

    SCHEMA_NAME: ClassVar[str] = ""
    SCHEMA_VERSION: ClassVar[int] = 0
    KEY: ClassVar[str] = "clip_id"
    """The field holding the id of the item a row belongs to: a stage writing these rows
    plans items by it, the merge sorts by it, and a quarantined item's row is keyed by it."""

    status: str = "ok"
    """``ok`` or ``rejected``; rejected rows stay in the manifest (the quarantine list)."""
    reason: str = ""
    detail: str = ""
    stage: str = ""
    model_slug: str = ""
    model_version: str = ""
    params_hash: str = ""
    seed: int = 0

    def with_provenance(self: ROW, prov: Provenance) -> ROW:
        """A copy with provenance columns filled from ``prov``."""
        return dataclasses.replace(self, **dataclasses.asdict(prov))

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def manifest(name: str, version: int, key: str = ManifestRow.KEY) -> Any:
    """Class decorator: register a row dataclass as manifest kind ``name`` v``version``
    whose item id is field ``key`` (:attr:`ManifestRow.KEY`)."""

    def wrap(cls: type[ROW]) -> type[ROW]:
        if key not in {f.name for f in dataclasses.fields(cls)}:
            raise TypeError(f"manifest {name}: key {key!r} is not a field of {cls.__name__}")
        cls.SCHEMA_NAME = name
        cls.SCHEMA_VERSION = version
        cls.KEY = key
        arrow_schema(cls)  # fail at import time on unsupported field types
        return cls

    return wrap


def _arrow_type(hint: Any) -> tuple[pa.DataType, bool]:
    origin = typing.get_origin(hint)
    if origin in UNION_TYPES:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {hint!r}")
        return _arrow_type(args[0])[0], True
    if origin in (list, tuple, Sequence):
        inner = typing.get_args(hint)[0]
        return pa.list_(_arrow_type(inner)[0]), False
    if hint in _SCALARS:
        return _SCALARS[hint], False
    raise TypeError(f"unsupported manifest field type {hint!r}")


def arrow_schema(cls: type[ManifestRow]) -> pa.Schema:
    """The Arrow schema of a row class, with its name and version as metadata."""
    hints = type_hints(cls)
    fields = []
    for f in dataclasses.fields(cls):
        dtype, nullable = _arrow_type(hints[f.name])
        fields.append(pa.field(f.name, dtype, nullable=nullable))
    meta = {_META_NAME: cls.SCHEMA_NAME.encode(), _META_VERSION: str(cls.SCHEMA_VERSION).encode()}
    return pa.schema(fields, metadata=meta)


def rows_to_table(cls: type[ROW], rows: Iterable[ROW]) -> pa.Table:
    """Rows → an Arrow table of ``cls``'s schema (type-checked by Arrow)."""
    schema = arrow_schema(cls)
    records = [dataclasses.asdict(r) for r in rows]
    for r in records:
        for key, value in r.items():
            if isinstance(value, tuple):
                r[key] = list(value)
    return pa.Table.from_pylist(records, schema=schema)


def _check_schema(cls: type[ManifestRow], schema: pa.Schema, where: str) -> None:
    meta = schema.metadata or {}
    name = meta.get(_META_NAME, b"").decode()
    version = meta.get(_META_VERSION, b"0").decode()
    if name != cls.SCHEMA_NAME or version != str(cls.SCHEMA_VERSION):
        raise ManifestError(
            f"{where}: manifest is {name or '?'} v{version}, "
            f"expected {cls.SCHEMA_NAME} v{cls.SCHEMA_VERSION}"
        )
    missing = set(arrow_schema(cls).names) - set(schema.names)
    if missing:
        raise ManifestError(f"{where}: manifest lacks columns {sorted(missing)}")


def write_manifest_bytes(cls: type[ROW], rows: Iterable[ROW]) -> bytes:
    """Serialise rows to Parquet bytes (deterministic: no timestamps, fixed options)."""
    buf = io.BytesIO()
    pq.write_table(
        rows_to_table(cls, rows), buf, compression="zstd", write_statistics=False,
        store_schema=True,
    )
    return buf.getvalue()


def read_manifest_table(cls: type[ManifestRow], data: bytes, where: str = "manifest"
                        ) -> pa.Table:
    """Parquet bytes → an Arrow table of ``cls``'s columns, checking kind and version."""
    table = pq.read_table(io.BytesIO(data))
    _check_schema(cls, table.schema, where)
    return table.select(arrow_schema(cls).names)


def write_table_bytes(cls: type[ManifestRow], table: pa.Table) -> bytes:
    """An Arrow table of ``cls``'s rows → the same bytes :func:`write_manifest_bytes` gives."""
    schema = arrow_schema(cls)
    table = table.select(schema.names).cast(schema).combine_chunks()
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", write_statistics=False, store_schema=True)
    return buf.getvalue()


def read_manifest_bytes(cls: type[ROW], data: bytes, where: str = "manifest") -> list[ROW]:
    """Parse Parquet bytes into rows of ``cls``, checking kind and version."""
    table = pq.read_table(io.BytesIO(data))
    _check_schema(cls, table.schema, where)
    return from_table(cls, table)


def from_table(cls: type[ROW], table: pa.Table) -> list[ROW]:
    """Arrow table → rows; extra columns are ignored."""
    names = [f.name for f in dataclasses.fields(cls)]
    out = []
    for record in table.select(names).to_pylist():
        for key, value in record.items():
            if isinstance(value, list):
                record[key] = tuple(value)
        out.append(cls(**record))
    return out


def rows_to_frame(cls: type[ROW], rows: Iterable[ROW]) -> pd.DataFrame:
    """Rows → a pandas DataFrame (for reports and the CLI)."""
    return rows_to_table(cls, rows).to_pandas()


def params_json(params: Mapping[str, Any]) -> str:
    """Canonical JSON for hashing parameters."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), default=str)

