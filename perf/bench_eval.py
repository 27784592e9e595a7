"""Bench: fit and score every head (all tasks × 3 protocols × A, A-V) at the paper's scale.

Synthetic but structured data: 4,134 source clips × 4 variants = 16,536 samples per
core protocol, plus 6 scene-consistency samples per clip (D-R, S-R, D-S ×
consistent/inconsistent; the pooled head H_SC^FM per mode, and its shuffled-video
scoring of the test rows), with 1,024-d features (a clip effect, low-rank shared
structure and small variant/scene signals); each protocol re-splits the clips
70/10/20. The batched
solver (madbench_common.benchmarks.madbench.eval.heads) is timed end to end (standardise, fit,
calibrate
on val, score test), then every head is fitted separately with scikit-learn
defaults (StandardScaler + LogisticRegression()) in the same run. BLAS is limited
to ``--threads`` (default 2) for both. Writes ``.bench/eval.json``.

    .venv/bin/python -m perf.bench_eval [--clips 4134] [--dim 1024] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from madbench_common.benchmarks.madbench.eval.fit import FeatureSet, run_heads, union_rows
from madbench_common.benchmarks.madbench.eval.tasks import TASKS, task_labels

__all__ = ["main"]

PROTOCOLS = ("balanced", "scene_matched", "scene_mismatched")
SC = "scene_consistency"


def _scene(n_clips: int, split: np.ndarray) -> pd.DataFrame:
    """Six scene-consistency rows per clip; consistent D-R and S-R are one mix."""
    clip = np.repeat(np.arange(n_clips), 6)
    cond = np.tile(["D-R", "D-R", "S-R", "S-R", "D-S", "D-S"], n_clips)
    consistent = np.tile([True, False] * 3, n_clips)
    mix = np.where(consistent & (cond != "D-S"), "own", np.char.add(cond, consistent.astype(str)))
    return pd.DataFrame({
        "sample_id": [f"c{c:05d}-sc-{d}-{k}" for c, d, k in zip(clip, cond, consistent,
                                                                strict=True)],
        "clip_id": [f"c{c:05d}" for c in clip], "variant": np.where(cond == "D-S", "E", "R"),
        "scene_consistent": consistent, "sc_condition": cond, "protocol": SC,
        "split": np.repeat(split, 6), "speech_generator": "", "env_generator": "",
        "audio_sha256": [f"{c}-{m}" for c, m in zip(clip, mix, strict=True)],
        "video_sha256": [f"v{c}" for c in clip]})


def make_samples(n_clips: int, seed: int) -> pd.DataFrame:
    """Samples of every protocol (same clips, protocol-specific clip splits)."""
    rng = np.random.default_rng(seed)
    clip = np.repeat(np.arange(n_clips), 4)
    variant = np.tile(list("RSEQ"), n_clips)
    consistent = np.repeat(rng.random(n_clips) < 0.5, 4) | ~np.isin(variant, ["E", "Q"])
    base = pd.DataFrame({
        "sample_id": [f"c{c:05d}-{v}" for c, v in zip(clip, variant, strict=True)],
        "clip_id": [f"c{c:05d}" for c in clip], "variant": variant,
        "scene_consistent": consistent, "sc_condition": "",
        "speech_generator": np.where(np.isin(variant, ["S", "Q"]),
                                     [f"tts{c % 5}" for c in clip], ""),
        "env_generator": np.where(np.isin(variant, ["E", "Q"]),
                                  [f"env{c % 4}" for c in clip], ""),
    })
    frames = []
    for p in (*PROTOCOLS, SC):
        split = rng.choice(["train", "val", "test"], size=n_clips, p=[0.7, 0.1, 0.2])
        frames.append(_scene(n_clips, split) if p == SC
                      else base.assign(protocol=p, split=np.repeat(split, 4)))
    return pd.concat(frames, ignore_index=True)


def make_features(samples: pd.DataFrame, dim: int, seed: int) -> FeatureSet:
    rng = np.random.default_rng(seed)
    one = samples[samples["protocol"].isin([PROTOCOLS[0], SC])]
    n, clips = len(one), one["clip_id"].str[1:].astype(int).to_numpy()
    v = one["variant"].to_numpy()
    shared = (rng.standard_normal((n, 32)) @ rng.standard_normal((32, dim))).astype(np.float32)
    x = shared + rng.standard_normal((clips.max() + 1, dim)).astype(np.float32)[clips]
    x += rng.standard_normal((n, dim)).astype(np.float32)
    x[:, :40] += 0.25 * np.isin(v, ["S", "Q"])[:, None]
    x[:, 40:80] += 0.25 * np.isin(v, ["E", "Q"])[:, None]
    av = x.copy()
    av[:, 80:90] += 0.4 * (~one["scene_consistent"].to_numpy())[:, None]
    sh = ((one["protocol"] == SC) & (one["split"] == "test")).to_numpy()
    shuffled = av[sh].copy()
    shuffled[:, 80:90] = shuffled[rng.permutation(len(shuffled)), 80:90]
    fs = FeatureSet()
    fs.add("A", "paired", one["sample_id"], x)
    fs.add("AV", "paired", one["sample_id"], av)
    fs.add("AV", "shuffled", one["sample_id"][sh], shuffled)
    return fs


def run_sklearn(samples: pd.DataFrame, fs: FeatureSet) -> tuple[float, int]:
    """Each head separately: StandardScaler + LogisticRegression() defaults, fit + score."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    start, heads = time.perf_counter(), 0
    warnings.simplefilter("ignore", ConvergenceWarning)
    for proto in (*PROTOCOLS, SC):
        frame = samples[samples["protocol"] == proto]
        parts = {s: frame[frame["split"] == s] for s in ("train", "val", "test")}
        if proto == SC:
            parts["train"] = union_rows(parts["train"])
        for mode in ("A", "AV"):
            xs = {s: fs.rows(mode, "paired", f["sample_id"]) for s, f in parts.items()}
            for task in (t for t in TASKS if TASKS[t].scene == (proto == SC)):
                mask, y = task_labels(parts["train"], task)
                model = make_pipeline(StandardScaler(), LogisticRegression())
                model.fit(xs["train"][mask], y)
                model.predict_proba(xs["val"]), model.predict_proba(xs["test"])
                heads += 1
    return time.perf_counter() - start, heads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clips", type=int, default=4134)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=".bench/eval.json")
    ap.add_argument("--no-baseline", action="store_true", help="skip the scikit-learn run")
    args = ap.parse_args()
    samples = make_samples(args.clips, args.seed)
    fs = make_features(samples, args.dim, args.seed)
    with threadpool_limits(args.threads):
        start, cpu = time.perf_counter(), time.process_time()
        groups = run_heads(samples, fs, logo=False)
        ours, ours_cpu = time.perf_counter() - start, time.process_time() - cpu
        n_heads = sum(len(g.heads) for g in groups)
        not_converged = sum(not h.converged for g in groups for h in g.heads.values())
        theirs, sk_heads = (float("nan"), 0) if args.no_baseline else run_sklearn(samples, fs)
    result = {"samples_per_protocol": args.clips * 4, "dim": args.dim, "threads": args.threads,
              "protocols": len(PROTOCOLS), "groups": len(groups), "heads": n_heads,
              "not_converged": not_converged, "seconds": round(ours, 3),
              "cpu_seconds": round(ours_cpu, 3),
              "sklearn_heads": sk_heads, "sklearn_seconds": round(theirs, 3),
              "speedup": round(theirs / ours, 2), "budget_seconds": 20.0,
              "within_budget": ours <= 20.0}
    print(f"{'':28s}{'heads':>7s}{'seconds':>10s}")
    print(f"{'batched heads (madbench)':28s}{n_heads:7d}{ours:10.2f}  (CPU {ours_cpu:.1f} s)")
    print(f"{'sklearn defaults, one by one':28s}{sk_heads:7d}{theirs:10.2f}")
    print(f"speedup ×{theirs / ours:.1f}; budget 20 s: {'ok' if ours <= 20 else 'EXCEEDED'}"
          f"; {args.clips * 4} samples × {args.dim}-d, {args.threads} threads")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
