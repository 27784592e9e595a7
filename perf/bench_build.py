"""Build-stage throughput: assembly (mix + mux + WAV) and, from a finished run, each generator.

Assembly renders the six distinct tracks of a clip (R, S, E and Q with a matched and a
mismatched environment) for every demo clip, in ``MADBENCH_BENCH_WORKERS`` processes
(default 2), from the demo's reference stems (fake components stand in as
time-reversed stems: only the signal path is measured). Throughput is rendered
audio seconds per wall second. Floor: assembly ≥ 200× real time on 2 cores.

With ``MADBENCH_BENCH_RUN=<store>:<run_id>`` of a finished build, generator throughput
(clip seconds per generator-call second, from the generator stages' shard markers) is
added per setting.
Prints JSON and writes ``.bench/build.json``.
"""

from __future__ import annotations

import csv
import json
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from madbench_common.benchmarks.madbench.stages.assemble import render_track
from madbench_common.core.store import RunStore
from madbench_common.media.audio import decode_audio, wav_bytes
from perf.results import save

REPO = Path(__file__).resolve().parents[1]

DEMO = REPO / "data" / "demo"
WORKERS = int(os.environ.get("MADBENCH_BENCH_WORKERS", "2"))
FLOORS = {"assembly_x_realtime": 200.0}
_RATE = 16000


def _clips() -> list[tuple[Path, Path, Path]]:
    with open(DEMO / "sources.csv", newline="") as fh:
        return [(DEMO / r["path"], DEMO / r["speech_stem"], DEMO / r["env_stem"])
                for r in csv.DictReader(fh)]


def _render_clip(args: tuple[Path, Path, Path, str]) -> float:
    """Render one clip's six tracks; return the rendered audio seconds."""
    video, speech_path, env_path, out_dir = args
    s_hat, e_hat = decode_audio(speech_path, _RATE), decode_audio(env_path, _RATE)
    n = min(len(s_hat), len(e_hat))
    s_hat, e_hat = s_hat[:n], e_hat[:n]
    s_fake, e_m, e_d = s_hat[::-1].copy(), e_hat[::-1].copy(), np.roll(e_hat, n // 2)
    tracks = {"R": (s_hat, e_hat), "S": (s_fake, e_hat), "Em": (s_hat, e_m),
              "Qm": (s_fake, e_m), "Ed": (s_hat, e_d), "Qd": (s_fake, e_d)}
    out = Path(out_dir)
    for tag, (speech, env) in tracks.items():
        m, _ = render_track(video, speech, env, s_hat, e_hat, _RATE,
                            out / f"{video.stem}-{tag}.mp4")
        (out / f"{video.stem}-{tag}.wav").write_bytes(wav_bytes(m.audio, _RATE))
    return len(tracks) * n / _RATE


def bench_assembly() -> dict[str, float]:
    clips = _clips()
    with tempfile.TemporaryDirectory() as tmp, ProcessPoolExecutor(WORKERS) as pool:
        jobs = [(v, s, e, tmp) for v, s, e in clips]
        list(pool.map(_render_clip, jobs[:WORKERS]))  # warm up imports and codecs
        start = time.perf_counter()
        seconds = sum(pool.map(_render_clip, jobs))
        wall = time.perf_counter() - start
    return {"clips": len(clips), "workers": WORKERS, "rendered_audio_seconds": round(seconds, 1),
            "wall_seconds": round(wall, 2), "assembly_x_realtime": round(seconds / wall, 1),
            "samples_x_realtime": round(seconds * 2 / wall, 1)}


def _item_seconds(run: RunStore, stage: str) -> dict[str, float]:
    """Per-item seconds from the shard markers of ``stage``'s finished fingerprint."""
    from madbench_common.pipeline.stage import read_marker

    marker = read_marker(run, stage)
    if marker is None:
        return {}
    out: dict[str, float] = {}
    for key in run.list(f"{stage}/{marker['fingerprint']}/shards"):
        if key.endswith("._SUCCESS"):
            out.update(json.loads(run.get_bytes(key)).get("item_seconds", {}))
    return out


def bench_generators(spec: str) -> dict[str, dict[str, float]]:
    """Per-setting generator throughput of a finished run: the component_qc manifest's
    retained components, timed by their generator stage's shard markers (the model call)."""
    from madbench_common.benchmarks.madbench.rows import ComponentRow
    from madbench_common.core.manifest import read_manifest_bytes
    from madbench_common.core.store import open_store

    store, _, run_id = spec.rpartition(":")
    run = RunStore(open_store(store), run_id)
    rows = read_manifest_bytes(ComponentRow, run.get_bytes("component_qc/manifest.parquet"))
    seconds: dict[str, dict[str, float]] = {}
    out: dict[str, dict[str, float]] = {}
    for r in rows:
        if r.setting not in seconds:
            seconds[r.setting] = _item_seconds(run, r.setting)
        gen_s = seconds[r.setting].get(r.component_id, 0.0)
        if r.ok and gen_s > 0:
            d = out.setdefault(f"{r.setting} ({r.generator})", {"audio_s": 0.0, "gen_s": 0.0})
            d["audio_s"] += r.duration
            d["gen_s"] += gen_s
    return {k: {"components_audio_seconds": round(v["audio_s"], 1),
                "x_realtime_one_core": round(v["audio_s"] / v["gen_s"], 2)}
            for k, v in sorted(out.items())}


def main() -> dict[str, object]:
    result: dict[str, object] = {"assembly": bench_assembly(), "floors": FLOORS}
    if os.environ.get("MADBENCH_BENCH_RUN"):
        result["generators"] = bench_generators(os.environ["MADBENCH_BENCH_RUN"])
    assembly = result["assembly"]
    assert isinstance(assembly, dict)
    result["pass"] = assembly["assembly_x_realtime"] >= FLOORS["assembly_x_realtime"]
    print(json.dumps(save("build", result), indent=1))
    return result


if __name__ == "__main__":
    main()
