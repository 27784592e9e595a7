"""Benchmark corpus: the demo clips repeated N times under distinct ids and groups."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

from madbench_common.testing.faults import write_sources

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"


def replicated_sources(dest: Path, copies: int) -> Path:
    """A sources CSV listing every demo clip ``copies`` times (new ids), the demo files
    copied once beside it (sources are confined to the CSV's folder). Ingest decodes
    identical content once per process, so its time per copy is a lower bound."""
    with open(DEMO / "sources.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    out_rows = []
    for k in range(copies):
        for row in rows:
            new = dict(row)
            new["clip_id"] = f"{row['clip_id']}_r{k}"
            new["source_group"] = f"{row['source_group']}_r{k}"
            for col in ("path", "speech_stem", "env_stem"):
                if row.get(col) and k == 0:
                    (dest / row[col]).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(DEMO / row[col], dest / row[col])
            out_rows.append(new)
    return write_sources(dest / "sources.csv", out_rows)
