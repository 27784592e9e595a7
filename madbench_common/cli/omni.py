"""Omni commands: ``omni sanity`` (does the model hear the audio and see the video?) and
``omni prompts`` (print the packaged prompts with their hashes)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

__all__ = ["add_commands"]

_DEMO = Path(__file__).resolve().parents[2] / "data" / "demo" / "clips"


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``omni sanity`` and ``omni prompts``."""
    omni = sub.add_parser("omni", help="zero-shot omni models: modality sanity check, prompts")
    osub = omni.add_subparsers(dest="omni_command", required=True)
    p = osub.add_parser("sanity", help="silence / noise / shuffled video must move the answers")
    p.add_argument("--model", required=True, help="registry slug of an omni model")
    p.add_argument("--media", action="append", default=[],
                   help="a video with audio (repeat; default: the first --clips demo clips)")
    p.add_argument("--clips", type=int, default=3)
    p.add_argument("--weights", default=None, help="weights root (default: $MADBENCH_WEIGHTS)")
    p.add_argument("--fps", type=float, default=2.0)
    p.add_argument("--frame-size", type=int, default=336)
    p.add_argument("--max-frames", type=int, default=32)
    p.add_argument("--tol", type=float, default=1e-6)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_sanity)
    p = osub.add_parser("prompts", help="print the packaged prompts (Markdown) with hashes")
    p.set_defaults(func=_prompts)


def _media(paths: list[str], n: int, fps: float, size: int, max_frames: int) -> list[Any]:
    from madbench_common.benchmarks.madbench.omni.ask import Media
    from madbench_common.media.audio import decode_audio
    from madbench_common.media.mux import sample_frames

    files = [Path(p) for p in paths] or sorted(_DEMO.glob("*.mp4"))[:n]
    out = []
    for path in files:
        frames, rate = sample_frames(path, fps=fps, size=size, max_frames=max_frames)
        out.append(Media(decode_audio(path, 16000), 16000,
                         frames if len(frames) else None, rate))
    return out


def _sanity(args: argparse.Namespace) -> int:
    from madbench_common.benchmarks.madbench.omni.sanity import modality_sanity, sanity_json
    from madbench_common.benchmarks.madbench.prompts import load_prompt
    from madbench_common.models.registry import load_model

    if args.weights:
        os.environ["MADBENCH_WEIGHTS"] = args.weights
    model = load_model(args.model)
    clips = _media(args.media, args.clips, args.fps, args.frame_size, args.max_frames)
    checks = modality_sanity(model, clips, load_prompt("P_bin").question("binary"),
                             load_prompt("P_SC").question("scene"), tol=args.tol)
    if args.json:
        print(sanity_json(model, checks))
    else:
        for c in checks:
            verdict = "ok" if c.passed else "FAILED"
            print(f"{c.name:<15} {c.task:<7} clips={c.clips} max|Δp|={c.max_change:.4f} "
                  f"mean={c.mean_change:.4f} texts changed={c.texts_changed}  {verdict}")
    return 0 if all(c.passed for c in checks) else 1


def _prompts(args: argparse.Namespace) -> int:
    from madbench_common.benchmarks.madbench.prompts import packaged_prompts, prompts_markdown

    print(prompts_markdown([q for f in packaged_prompts() for q in f.questions]), end="")
    return 0
