"""Benchmark the reference speech and environmental-audio generators on this machine.

Prints throughput per generator (seconds of audio produced per wall-clock second)
and writes ``.bench/generators.json``. Run: ``.venv/bin/python -m perf.bench_generators``.
"""

from __future__ import annotations

import json
import platform
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from madbench_common.media.audio import resample
from madbench_common.models.reference import env_gen as eg
from madbench_common.models.reference import speech_gen as sg
from madbench_common.models.taxonomy import build_prompt

__all__ = ["bench_env", "bench_speech", "main"]

SR = 16000
SECONDS = 8.0
TEXT = ("Please call Stella and ask her to bring these things with her from the store: "
        "six spoons of fresh snow peas and five thick slabs of blue cheese.")


def _flite(voice: str) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "v.wav"
        subprocess.run(["flite", "-voice", voice, "-t", TEXT, "-o", str(out)], check=True)
        audio, sr = sf.read(out, dtype="float32")
    return resample(audio, sr, SR)


def _timed(fn: Any, seconds: float, repeats: int = 2) -> dict[str, float]:
    fn()  # warm-up
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    wall = (time.perf_counter() - start) / repeats
    return {"audio_s": seconds, "wall_s": round(wall, 4), "x_realtime": round(seconds / wall, 2)}


def bench_speech() -> dict[str, dict[str, float]]:
    src, ref = _flite("rms"), _flite("slt")
    out = {}
    for cls in (sg.FliteWorldSameTTS, sg.FliteWorldCrossTTS, sg.EspeakPsolaSameTTS,
                sg.EspeakPsolaCrossTTS, sg.WorldVC, sg.PsolaCepstralVC):
        gen = cls()
        def run(gen: Any = gen) -> None:
            gen.generate(sample_rate=SR, duration=SECONDS, ref_audio=ref, text=TEXT,
                         source_audio=src)
        out[cls.slug] = _timed(run, SECONDS)
    return out


def bench_env() -> dict[str, dict[str, float]]:
    prompt = build_prompt("city_street", SECONDS).text
    src = eg.LayeredT2A().generate(sample_rate=SR, duration=SECONDS, prompt=prompt, seed=9)
    frames = np.random.default_rng(0).integers(0, 255, (int(SECONDS * 25), 90, 160, 3), np.uint8)
    out = {}
    for cls in (eg.LayeredT2A, eg.SpectralT2A, eg.LayeredV2A, eg.SpectralV2A, eg.TextureA2A,
                eg.StftMorphA2A):
        gen = cls()
        def run(gen: Any = gen) -> None:
            gen.generate(sample_rate=SR, duration=SECONDS, prompt=prompt, frames=frames,
                         fps=25.0, source_env=src)
        out[cls.slug] = _timed(run, SECONDS)
    return out


def main() -> None:
    results = {**bench_speech(), **bench_env()}
    for slug, r in results.items():
        print(f"{slug:32s} {r['x_realtime']:8.2f} x realtime ({r['wall_s']:.3f} s per "
              f"{r['audio_s']:.0f} s at {SR} Hz)")
    path = Path(".bench/generators.json")
    path.parent.mkdir(exist_ok=True)
    meta = {"sample_rate": SR, "seconds": SECONDS, "machine": platform.machine(),
            "python": platform.python_version()}
    path.write_text(json.dumps({"meta": meta, "generators": results}, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
