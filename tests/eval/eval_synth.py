"""Synthetic samples tables and features shared by the evaluation tests."""

from __future__ import annotations

import numpy as np
import pandas as pd

from madbench_common.eval.runner import FeatureSet


def make_samples(n_clips: int = 160, protocols: tuple[str, ...] = ("balanced",)) -> pd.DataFrame:
    """Four variants per clip, 7:1:2 clip splits, alternating scene consistency."""
    rows = []
    splits = ["train"] * 7 + ["val"] + ["test"] * 2
    for p in protocols:
        for c in range(n_clips):
            for v in "RSEQ":
                rows.append({
                    "sample_id": f"{p}-c{c:04d}-{v}", "clip_id": f"c{c:04d}", "variant": v,
                    "speech_fake": v in "SQ", "env_fake": v in "EQ",
                    "scene_consistent": (c // 10) % 2 == 0 if v in "EQ" else True,
                    "speech_generator": f"tts{c % 3}" if v in "SQ" else "",
                    "env_generator": f"t2a{c % 2}" if v in "EQ" else "",
                    "protocol": p, "split": splits[c % 10]})
    return pd.DataFrame(rows)


def make_features(df: pd.DataFrame, d: int = 16, seed: int = 0) -> FeatureSet:
    """A, AV paired and AV shuffled features with speech, env and scene signals."""
    rng = np.random.default_rng(seed)
    n = len(df)
    clips = df["clip_id"].str[1:].astype(int).to_numpy()
    x = rng.normal(size=(clips.max() + 1, d))[clips] + rng.normal(size=(n, d))
    x[:, 0] += 1.2 * df["speech_fake"].to_numpy()
    x[:, 1] += 1.2 * df["env_fake"].to_numpy()
    av = np.hstack([x, rng.normal(size=(n, 4))])
    av[:, -1] += 1.5 * (~df["scene_consistent"].to_numpy())
    shuffled = av.copy()
    shuffled[:, -1] = shuffled[rng.permutation(n), -1]
    fs = FeatureSet()
    fs.add("A", "paired", df["sample_id"], x)
    fs.add("AV", "paired", df["sample_id"], av)
    fs.add("AV", "shuffled", df["sample_id"], shuffled)
    return fs
