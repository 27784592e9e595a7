"""Synthetic samples tables and features shared by the evaluation tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from madbench_common.benchmarks.madbench.eval.fit import FeatureSet

SPLITS = ["train"] * 7 + ["val"] + ["test"] * 2


def _core_rows(n_clips: int, protocols: tuple[str, ...]) -> list[dict]:
    rows = []
    for p in protocols:
        for c in range(n_clips):
            for v in "RSEQ":
                rows.append({
                    "sample_id": f"{p}-c{c:04d}-{v}", "clip_id": f"c{c:04d}", "variant": v,
                    "speech_fake": v in "SQ", "env_fake": v in "EQ",
                    "scene_consistent": (c // 10) % 2 == 0 if v in "EQ" else True,
                    "speech_generator": f"tts{c % 3}" if v in "SQ" else "",
                    "env_generator": f"t2a{c % 2}" if v in "EQ" else "",
                    "protocol": p, "split": SPLITS[c % 10], "sc_condition": "",
                    "audio_sha256": f"a-{p}-{c}-{v}", "video_sha256": f"v-{c}"})
    return rows


def scene_rows(n_clips: int) -> list[dict]:
    """Scene-consistency samples per the SampleRow v2 contract: one row per (clip,
    condition, class); the consistent D-R and S-R rows are the same mix (clip's R)."""
    rows = []
    for c in range(n_clips):
        for cond in ("D-R", "S-R", "D-S"):
            for consistent in (True, False):
                variant = "E" if cond == "D-S" else "R"
                audio = (f"a-sc-{c}-R" if cond != "D-S" and consistent
                         else f"a-sc-{c}-{cond}-{consistent}")
                rows.append({
                    "sample_id": f"sc-c{c:04d}-{cond}-{'C' if consistent else 'I'}",
                    "clip_id": f"c{c:04d}", "variant": variant, "speech_fake": False,
                    "env_fake": variant == "E", "scene_consistent": consistent,
                    "speech_generator": "", "env_generator": "t2a0" if variant == "E" else "",
                    "protocol": "scene_consistency", "split": SPLITS[c % 10],
                    "sc_condition": cond, "audio_sha256": audio, "video_sha256": f"v-{c}"})
    return rows


def make_samples(n_clips: int = 160, protocols: tuple[str, ...] = ("balanced",),
                 scene: bool = False) -> pd.DataFrame:
    """Four variants per clip and protocol (7:1:2 clip splits), plus scene-consistency rows."""
    rows = _core_rows(n_clips, protocols) + (scene_rows(n_clips) if scene else [])
    return pd.DataFrame(rows)


def make_features(df: pd.DataFrame, d: int = 16, seed: int = 0) -> FeatureSet:
    """A and AV paired features with speech, env and scene signals; AV shuffled features
    (scene cue destroyed) for the scene-consistency test rows only."""
    rng = np.random.default_rng(seed)
    clips = df["clip_id"].str[1:].astype(int).to_numpy()
    inputs, uniq = pd.factorize(df["audio_sha256"] + "|" + df["video_sha256"])  # same mix → same x
    x = rng.normal(size=(clips.max() + 1, d))[clips] + rng.normal(size=(len(uniq), d))[inputs]
    x[:, 0] += 1.2 * df["speech_fake"].to_numpy()
    x[:, 1] += 1.2 * df["env_fake"].to_numpy()
    av = np.hstack([x, rng.normal(size=(len(uniq), 4))[inputs]])
    av[:, -1] += 1.5 * (~df["scene_consistent"].to_numpy())
    fs = FeatureSet()
    fs.add("A", "paired", df["sample_id"], x)
    fs.add("AV", "paired", df["sample_id"], av)
    sh = ((df["protocol"] == "scene_consistency") & (df["split"] == "test")).to_numpy()
    if sh.any():
        shuffled = av[sh].copy()
        shuffled[:, -1] = rng.normal(size=int(sh.sum()))
        fs.add("AV", "shuffled", df["sample_id"][sh], shuffled)
    return fs
