"""Run a model's own stage in an adapter venv: an ``assemble`` manifest of demo clips, then
``features_<slug>`` / ``scores_<slug>`` / ``omni_<slug>`` as a pod runs them (one shard and
its merge), read back as rows.

The upstream graph (ingest … assemble) needs the CPU reference models, which the adapter
venvs do not have; so the ``assemble`` output is written here as that stage writes it: one
real (``R``) sample per demo clip, its speech + environment stems mixed to the run's WAV,
the clip's MP4 as its video, a merged manifest and a ``_SUCCESS`` marker; then the real
``perturb`` stage with no robustness condition, which the feature stages also read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import SampleRow
from madbench_common.core.manifest import write_manifest_bytes
from madbench_common.core.store import RunStore, open_store
from madbench_common.media.audio import wav_bytes
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard

from .tiny import DEMO

__all__ = ["assembled_run", "run_stage"]


def _mix(clip: str) -> tuple[np.ndarray, int]:
    speech, rate = sf.read(DEMO / "stems" / "speech" / f"{clip}.flac", dtype="float32")
    env, env_rate = sf.read(DEMO / "stems" / "env" / f"{clip}.flac", dtype="float32")
    speech = speech if speech.ndim == 1 else speech.mean(axis=1)
    env = env if env.ndim == 1 else env.mean(axis=1)
    assert env_rate == rate, (clip, rate, env_rate)
    n = min(len(speech), len(env))
    return (0.7 * speech[:n] + 0.3 * env[:n]).astype(np.float32), int(rate)


def assembled_run(root: Path, clips: Sequence[int] = (2, 4), split: str = "test",
                  protocol: str = "balanced") -> RunStore:
    """A run (store under ``root``) whose ``assemble`` stage has finished on ``clips``, and
    ``perturb`` after it (no condition)."""
    run = RunStore(open_store(str(root / "store")), "adapter-test")
    rows = []
    for n in clips:
        clip = f"demo_{n:03d}"
        audio, rate = _mix(clip)
        wav = run.put_bytes(f"assemble/fixture/{clip}.wav", wav_bytes(audio, rate))
        mp4 = run.put_bytes(f"assemble/fixture/{clip}.mp4",
                            (DEMO / "clips" / f"{clip}.mp4").read_bytes())
        rows.append(SampleRow(sample_id=f"{clip}-R", clip_id=clip, variant="R",
                              protocol=protocol, split=split, audio_uri=wav.uri,
                              audio_sha256=wav.sha256, video_uri=mp4.uri,
                              video_sha256=mp4.sha256, duration=len(audio) / rate,
                              sample_rate=rate))
    info = run.put_bytes("assemble/manifest.parquet", write_manifest_bytes(SampleRow, rows))
    marker = {"stage": "assemble", "fingerprint": "adapter-test-fixture", "prefix": "assemble",
              "image": "", "manifest_sha256": info.sha256, "rows": len(rows), "rejected": 0,
              "schema": f"{SampleRow.SCHEMA_NAME}/v{SampleRow.SCHEMA_VERSION}"}
    run.put_bytes("assemble/_SUCCESS", json.dumps(marker).encode())
    # the feature stages read perturb's robustness copies too: the real stage,
    # with no condition (so no copy)
    run_stage(run, "perturb", {"conditions": []})
    return run


def run_stage(run: RunStore, stage: str, params: dict[str, Any] | None = None,
              row_type: Any = None) -> tuple[dict[str, Any], list[Any]]:
    """Run ``stage`` (one shard, then its merge); return its ``_SUCCESS`` marker and rows."""
    graph = build_graph()
    ctx = make_context(run, graph, stage, dict(params or {}), "embedded", 0)
    run_shard(ctx, 0, 1)
    marker = merge_stage(ctx, 1)
    rows = ctx.read_input(stage, row_type) if row_type is not None else []
    return marker, rows
