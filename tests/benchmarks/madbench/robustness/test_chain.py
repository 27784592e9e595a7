"""Applying conditions: same length and rate, aligned, parameters recorded, noise seeded."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.robustness.chain import apply_condition
from madbench_common.benchmarks.madbench.robustness.conditions import (
    builtin_conditions,
    parse_conditions,
)
from madbench_common.benchmarks.madbench.robustness.noise import load_noise_set, mix_at_snr

SR = 16000
ROOT = Path(__file__).resolve().parents[4]
CONDS = {c.name: c for c in parse_conditions(builtin_conditions())}


def _speechy(seconds: float = 2.0, seed: int = 0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    rng = np.random.default_rng(seed)
    x = sum(np.sin(2 * np.pi * f * t) / k for k, f in enumerate((220, 660, 1800, 5200), 1))
    return (0.1 * x * (1 + np.sin(2 * np.pi * 4 * t)) + 0.003 * rng.normal(size=t.size)
            ).astype(np.float32)


@pytest.mark.parametrize("name", ["mp3_24k", "opus_12k", "telephone_g711", "resample_8k",
                                  "noise_10db"])
def test_condition_keeps_rate_length_and_alignment(name: str) -> None:
    x = _speechy()
    y, rec = apply_condition(x, SR, CONDS[name], noise=load_noise_set(), noise_key="0/c1")
    assert y.dtype == np.float32 and y.shape == x.shape and np.abs(y).max() <= 1.0
    lag = int(np.argmax(np.correlate(y[:6000], x[:6000], "full"))) - 5999
    assert lag == 0
    assert rec["condition"] == name and rec["sample_rate"] == SR
    assert [s["op"] for s in rec["steps"]] == [s.op for s in CONDS[name].chain]
    assert not np.allclose(y, x, atol=1e-4)


def test_band_limiting_conditions_remove_the_high_band() -> None:
    x = _speechy()
    for name in ("telephone_g711", "resample_8k"):
        y, _ = apply_condition(x, SR, CONDS[name])
        spec = np.abs(np.fft.rfft(y)) ** 2
        freqs = np.fft.rfftfreq(y.size, 1 / SR)
        above = spec[freqs > 4200].sum() / spec.sum()
        assert above < 1e-3  # the 5.2 kHz partial is gone: narrow band
    y, rec = apply_condition(x, SR, CONDS["telephone_g711"])
    codec = rec["steps"][2]
    assert (codec["measured_sample_rate"], codec["measured_bitrate"]) == (8000, 64000.0)


def test_noise_is_seeded_by_clip_and_shared_across_snr_levels() -> None:
    x, noise = _speechy(), load_noise_set()
    a, ra = apply_condition(x, SR, CONDS["noise_10db"], noise=noise, noise_key="0/c1")
    b, rb = apply_condition(x, SR, CONDS["noise_10db"], noise=noise, noise_key="0/c1")
    assert np.array_equal(a, b) and ra == rb
    _, r0 = apply_condition(x, SR, CONDS["noise_0db"], noise=noise, noise_key="0/c1")
    same = ("noise_file", "noise_offset_s")
    assert [ra["steps"][0][k] for k in same] == [r0["steps"][0][k] for k in same]
    assert ra["steps"][0]["measured_snr_db"] == pytest.approx(10.0, abs=1e-6)
    keys = {apply_condition(x, SR, CONDS["noise_10db"], noise=noise, noise_key=f"0/c{i}")[1]
            ["steps"][0]["noise_offset_s"] for i in range(6)}
    assert len(keys) > 1  # other clips, other excerpts


def test_mix_at_snr_hand_worked() -> None:
    sig = np.ones(100, np.float32)
    noise = np.r_[np.ones(50), -np.ones(50)].astype(np.float32) * 3
    mixed, snr = mix_at_snr(sig, noise, 20.0)
    assert snr == pytest.approx(20.0)
    assert np.mean((mixed - sig) ** 2) == pytest.approx(0.01)


def test_noise_set_is_never_used_by_generators_or_the_demo() -> None:
    """The noise recordings are disjoint from the demo corpus's and DEAF's sources, and no
    generator module reads the noise folder."""
    noise = load_noise_set()
    members = {s.split(":", 1)[1] for f in noise.files for s in f.sources.split(";")}
    assert len(noise.files) >= 4 and all(f.licence for f in noise.files)
    with open(ROOT / "madbench_common/data/deaf_envlib/envlib.csv", encoding="utf-8") as fh:
        deaf = {s.split(":", 1)[1] for r in csv.DictReader(fh) for s in r["sources"].split(";")
                if s}
    demo = (ROOT / "data/demo/ATTRIBUTION.md").read_text(encoding="utf-8")
    assert not members & deaf
    assert not any(Path(m).name in demo for m in members)
    generators = [*(ROOT / "madbench_common/models/reference").glob("*.py"),
                  *(ROOT / "madbench_common/models").glob("*.py"),
                  *(ROOT / "madbench_common/benchmarks/madbench/stages").glob("*_gen.py")]
    assert not [p for p in generators if "data/noise" in p.read_text(encoding="utf-8")]
