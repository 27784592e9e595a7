"""The ``madbench taxonomy`` commands: draft a scene taxonomy from captions for review."""

from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path
from typing import Any

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``taxonomy propose``."""
    p = sub.add_parser("taxonomy", help="scene taxonomy tools")
    tsub = p.add_subparsers(dest="taxonomy_command", required=True)
    q = tsub.add_parser("propose", help="draft coarse/fine scene clusters from captions "
                        "(train and val only) for a person to review")
    src = q.add_mutually_exclusive_group(required=True)
    src.add_argument("--run-id", help="read captions from this run's scene manifest")
    src.add_argument("--captions", help="CSV with a caption column (and optional split)")
    q.add_argument("--store", default="runs", help="store of --run-id (path, file://, s3://)")
    q.add_argument("--splits", default="train,val", help="splits whose captions are used")
    q.add_argument("--fine", type=int, default=63, help="number of fine clusters")
    q.add_argument("--coarse", type=int, default=10, help="number of coarse clusters")
    q.add_argument("--out", default="taxonomy-draft", help="writes <out>.json and <out>.md")
    q.set_defaults(func=_propose)


def _rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.captions:
        from madbench_common.media.listing import allow_fields

        with open(args.captions, newline="", encoding="utf-8") as fh:
            allow_fields(os.fstat(fh.fileno()).st_size)  # a megabyte caption is one field
            rows = list(csv.DictReader(fh))
        return [{**r, "split": r.get("split") or "train"} for r in rows]
    from madbench_common.benchmarks.madbench.rows import SceneRow
    from madbench_common.core.manifest import read_manifest_bytes
    from madbench_common.core.store import RunStore, open_store
    from madbench_common.pipeline.stage import read_marker

    run = RunStore(open_store(args.store), args.run_id)
    marker = read_marker(run, "scene")
    if marker is None:
        from madbench_common.core.errors import ConfigError

        raise ConfigError(f"{run.uri('scene')}: the scene stage has not finished")
    data = run.get_bytes("scene/manifest.parquet", marker["manifest_sha256"])
    return [{"caption": r.caption, "split": r.split}
            for r in read_manifest_bytes(SceneRow, data) if r.ok]


def _propose(args: argparse.Namespace) -> int:
    from madbench_common.benchmarks.madbench.taxonomy_propose import (
        captions_for_taxonomy,
        propose_taxonomy,
        write_draft,
    )

    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    captions = captions_for_taxonomy(_rows(args), splits)
    draft = propose_taxonomy(captions, fine=args.fine, coarse=args.coarse)
    js, md = write_draft(draft, Path(args.out))
    print(f"{draft.n_captions} captions -> {len(draft.doc['fine'])} fine / "
          f"{len(draft.doc['coarse'])} coarse draft labels")
    print(f"draft: {js}\nreview sheet: {md}")
    return 0
