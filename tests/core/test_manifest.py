"""Manifests: typed rows ↔ versioned Parquet, schema checks, determinism."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from madbench_common.benchmarks.madbench.rows import SourceQCRow, SourceRow, StemRow
from madbench_common.core.errors import ManifestError
from madbench_common.core.manifest import (
    Provenance,
    arrow_schema,
    read_manifest_bytes,
    read_manifest_table,
    write_manifest_bytes,
    write_table_bytes,
)


def _rows() -> list[SourceQCRow]:
    prov = Provenance("source_qc", "ref-silero-vad", "6.2", "abc", 7)
    return [
        SourceQCRow(clip_id="a", speech_starts=(0.1, 2.0), speech_ends=(1.0, 3.0),
                    fail_reasons=("clipping",), asr_coverage=None).with_provenance(prov),
        SourceQCRow(clip_id="b", eligible=True, asr_coverage=0.8, status="ok"),
    ]


def test_roundtrip_keeps_types_and_values() -> None:
    rows = _rows()
    back = read_manifest_bytes(SourceQCRow, write_manifest_bytes(SourceQCRow, rows))
    assert back == rows
    assert back[0].model_slug == "ref-silero-vad" and back[0].seed == 7


def test_bytes_are_deterministic() -> None:
    assert write_manifest_bytes(SourceQCRow, _rows()) == write_manifest_bytes(
        SourceQCRow, _rows())


def test_wrong_kind_is_refused() -> None:
    data = write_manifest_bytes(StemRow, [StemRow(clip_id="a")])
    with pytest.raises(ManifestError, match="stems v2, expected sources v1"):
        read_manifest_bytes(SourceRow, data, "x.parquet")


def test_schema_has_every_provenance_column() -> None:
    names = arrow_schema(SourceRow).names
    for col in ("stage", "model_slug", "model_version", "params_hash", "seed", "audio_uri",
                "audio_sha256", "duration", "sample_rate", "status", "reason"):
        assert col in names
    assert arrow_schema(SourceQCRow).field("speech_starts").type == pa.list_(pa.float64())
    assert arrow_schema(SourceQCRow).field("asr_coverage").nullable


def test_wrong_types_fail_loudly() -> None:
    bad = dataclasses.replace(SourceRow(clip_id="a", source_path="p"), width="wide")  # type: ignore[arg-type]
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        write_manifest_bytes(SourceRow, [bad])


def test_merging_tables_gives_the_bytes_of_merging_rows() -> None:
    """merge_stage sorts Arrow tables; the bytes must equal sorting the rows themselves."""
    rows = [dataclasses.replace(r, clip_id=f"{c}{i}") for i, c in enumerate("qzbxam")
            for r in _rows()]
    shards = [write_manifest_bytes(SourceQCRow, rows[i::3]) for i in (2, 0, 1)]
    merged = pa.concat_tables([read_manifest_table(SourceQCRow, s) for s in shards])
    by_table = write_table_bytes(SourceQCRow, merged.sort_by("clip_id"))
    by_rows = write_manifest_bytes(SourceQCRow, sorted(
        [r for s in shards for r in read_manifest_bytes(SourceQCRow, s)],
        key=lambda r: r.clip_id))
    assert by_table == by_rows
    with pytest.raises(ManifestError):
        read_manifest_table(StemRow, shards[0])
