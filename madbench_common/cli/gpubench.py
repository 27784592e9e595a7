"""``madbench gpu-bench``: measure each model's GPU seconds and memory per item on the
demo clips, from its full-size architecture with random weights
(:mod:`madbench_common.models.gpubench`); ``--write`` records CUDA measurements in the
cards, ``--tiny --device cpu`` runs the same path on tiny checkpoints (the test suite's)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["add_commands"]


def _run(args: argparse.Namespace) -> int:
    from madbench_common.core.errors import ConfigError

    if args.write and (args.tiny or not args.device.startswith("cuda")):
        raise ConfigError("--write records only full-size CUDA measurements (no --tiny, "
                          "--device cuda)")
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the adapters pick CUDA wherever torch sees it
    elif args.device.startswith("cuda:"):  # the adapters load on "cuda": show them that one
        os.environ["CUDA_VISIBLE_DEVICES"] = args.device.partition(":")[2]
        args.device = "cuda"
    from madbench_common.models.gpubench import gpu_bench, rows_json, write_measured

    slugs = [s for group in args.models for s in group.split(",") if s]
    rows = gpu_bench(slugs, device=args.device, tiny=args.tiny, clips=args.clips,
                     runs=args.runs)
    for r in rows:
        if r.seconds_per_item is None:
            print(f"{r.slug:<28} {r.status:<8} {r.reason}")
            continue
        peak = "—" if r.peak_gpu_gb is None else f"{r.peak_gpu_gb:.2f} GB"
        print(f"{r.slug:<28} {r.status:<8} {r.seconds_per_item:.4f} s/item "
              f"(model {r.model_seconds_per_item or 0:.4f})  {peak:>9}  "
              f"{r.dtype} batch {r.batch} {r.shape} on {r.device_name} (torch {r.torch}"
              f"{', CUDA ' + r.cuda if r.cuda else ''})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows_json(rows), indent=1) + "\n")
    if args.write:
        measured = [r for r in rows if r.status == "measured"]
        print(f"cards updated: {', '.join(write_measured(measured)) or 'none'}")
    return 1 if any(r.status == "failed" for r in rows) else 0


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``gpu-bench``."""
    p = sub.add_parser("gpu-bench", help="per-item GPU seconds and memory of each model, "
                                         "measured on random full-size weights")
    p.add_argument("--models", action="append", default=[],
                   help="card slugs, comma-separated or repeated (default: every card)")
    p.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    p.add_argument("--tiny", action="store_true",
                   help="the image tests' tiny checkpoints instead of the full size (the CPU "
                        "path; never written)")
    p.add_argument("--write", action="store_true",
                   help="write CUDA measurements into the cards' gpu blocks (status: measured)")
    p.add_argument("--json", metavar="OUT", help="write every row as JSON to OUT")
    p.add_argument("--clips", type=int, default=4, help="demo clips per run (default 4)")
    p.add_argument("--runs", type=int, default=3, help="warm runs after one warm-up (median)")
    p.set_defaults(func=_run)
