"""The dataset card's loading example, run as written under ``datasets`` 3.x and ≥ 4.

``datasets`` ≥ 4 decodes the ``Audio`` feature with torchcodec, which it does not install;
the card's first example (``datasets`` 3 only) failed there. The example is run here on a
tiny folder in the export's layout (the card's own ``configs``), in an interpreter of each
major version: this one if its ``datasets`` is that version, else
``MADBENCH_DATASETS3_PYTHON`` / ``MADBENCH_DATASETS4_PYTHON``; a version with no
interpreter is skipped with a reason naming it. ``test_example_in_fresh_venvs`` (slow)
makes both interpreters itself with ``uv`` from PyPI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import soundfile as sf
import yaml

from madbench_common.benchmarks.madbench.release.card import hub_configs, loading_example
from madbench_common.benchmarks.madbench.release.export import config_name

VERSIONS = {"3": ("datasets[audio]<4", "MADBENCH_DATASETS3_PYTHON"),
            "4": ("datasets>=4", "MADBENCH_DATASETS4_PYTHON")}
"""What a fresh venv of each major gets (3.x with its Audio decoder, librosa; ≥ 4 without
torchcodec, as ``pip install datasets`` leaves it), and the variable naming one."""


def _export_folder(root: Path) -> Path:
    """Two configs in the export's layout: ``balanced`` (test) and one robustness config."""
    configs = {"balanced": {"test": 3}, config_name("balanced", "mp3_24k"): {"test": 3}}
    for config in configs:
        folder = root / config / "test"
        (folder / "audio").mkdir(parents=True)
        names = []
        for i in range(3):
            t = np.arange(16000) / 16000
            sf.write(folder / "audio" / f"s{i}.flac", (0.1 * np.sin(2 * np.pi * 220 * t * (i + 1)))
                     .astype(np.float32), 16000, format="FLAC", subtype="PCM_24")
            names.append(f"s{i}")
        pq.write_table(pa.table({
            "file_name": [f"audio/{n}.flac" for n in names],
            "video": [f"video/{n}.mp4" for n in names],
            "label": pa.array([0, 1, 1], pa.int8()),
            "sample_id": names, "protocol": ["balanced"] * 3}), folder / "metadata.parquet")
    (root / "README.md").write_text("---\n" + yaml.safe_dump({"configs": hub_configs(configs)})
                                    + "---\n# test export\n")
    return root


def _major(python: str) -> str | None:
    done = subprocess.run([python, "-c", "import datasets; print(datasets.__version__)"],
                          capture_output=True, text=True)
    return done.stdout.strip().split(".")[0] if done.returncode == 0 else None


def _interpreter(major: str) -> str | None:
    for python in (os.environ.get(VERSIONS[major][1], ""), sys.executable):
        if python and (_major(python) == major or (major == "4" and (_major(python) or "0")
                                                   >= "4")):
            return python
    return None


def _run_example(python: str, folder: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    code = loading_example("balanced", str(folder))
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp / "hf-cache"), "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([python, "-c", code], capture_output=True, text=True, env=env,
                          timeout=600)


def _has(python: str, module: str) -> bool:
    return subprocess.run([python, "-c", f"import {module}"], capture_output=True).returncode == 0


def _check(done: subprocess.CompletedProcess[str], feature: bool) -> None:
    """The first way printed the first row and its audio; with ``feature`` (the version's
    Audio decoder is installed) the second way, the decoded ``Audio`` feature, ran too."""
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["s0", "0", "(16000,)", "16000"], done.stdout
    assert (lines[1:2] != [] and lines[1].startswith("Audio feature: Audio(")) == feature, \
        done.stdout


@pytest.mark.parametrize("major", sorted(VERSIONS))
def test_card_example_runs_under_datasets(major: str, tmp_path: Path) -> None:
    python = _interpreter(major)
    if python is None:
        pytest.skip(f"no interpreter with datasets {major}.x: set {VERSIONS[major][1]} "
                    f"(or run test_example_in_fresh_venvs)")
    decoder = "librosa" if major == "3" else "torchcodec"
    _check(_run_example(python, _export_folder(tmp_path / "export"), tmp_path),
           _has(python, decoder))


def test_the_card_shows_both_ways_and_names_torchcodec() -> None:
    code = loading_example("balanced")
    assert 'load_dataset("parquet"' in code and "sf.read" in code and "torchcodec" in code
    compile(code, "card-example", "exec")  # valid Python as the card prints it


def test_robustness_configs_hold_one_protocol_each() -> None:
    """A condition's config mixed the four protocols, so `label` meant "fake" for some
    rows and "scene-inconsistent" for others."""
    names = {config_name(p, "mp3_24k") for p in ("balanced", "scene_matched",
                                                 "scene_mismatched", "scene_consistency")}
    assert len(names) == 4 and "robustness-mp3_24k-scene_consistency" in names


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_example_in_fresh_venvs(tmp_path: Path) -> None:
    """Both majors from PyPI in throwaway venvs (needs uv and the network)."""
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    if not Path(uv).exists():
        pytest.skip("uv is not installed (it makes the two throwaway venvs)")
    folder = _export_folder(tmp_path / "export")
    for major, (spec, _) in sorted(VERSIONS.items()):
        venv = tmp_path / f"datasets{major}"
        subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(venv)], check=True)
        made = subprocess.run([uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python"),
                               spec, "soundfile"], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"could not install {spec} from PyPI: {made.stderr[-300:]}")
        python = str(venv / "bin" / "python")
        assert (_major(python) or "0") >= major if major == "4" else _major(python) == major
        _check(_run_example(python, folder, tmp_path), major == "3")


def test_export_groups_a_condition_by_protocol() -> None:
    """The export's folders: one per (condition, protocol), core protocols first."""
    from types import SimpleNamespace

    from madbench_common.benchmarks.madbench.release.export import _groups

    rows = [SimpleNamespace(protocol=p, split="test", condition=c, condition_index=i,
                            sample_id=f"{p}-{c}")
            for i, c in enumerate(("mp3_24k", "noise_10db"))
            for p in ("scene_consistency", "balanced", "scene_matched")]
    groups = _groups(rows, lambda r: getattr(r, "condition", ""))  # type: ignore[arg-type]
    assert list(groups) == [(f"robustness-{c}-{p}", "test") for c in ("mp3_24k", "noise_10db")
                            for p in ("balanced", "scene_matched", "scene_consistency")]
    assert all(len({r.protocol for r in g}) == 1 for g in groups.values())
