"""``madbench gpu-bench``: its CPU path (tiny shapes, the CPU references) runs here so that
the code a GPU machine runs cannot rot; a CPU or tiny run never writes ``measured``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.models.catalog import load_card
from madbench_common.models.gpubench import BenchRow, write_measured

ROOT = Path(__file__).resolve().parents[2]
REFERENCES = ("ref-lfcc-stats", "ref-av-stats", "ref-modulation-det", "ref-silero-vad",
              "ref-resemblyzer", "ref-tonal-music", "ref-caption-hint", "ref-spectral-t2a")
"""One CPU reference per role the graphs run them in (encoder A and AV, detector, VAD,
speaker, tagger, scene labeller, environment generator): a few seconds in all."""
FIELDS = {"slug", "status", "reason", "seconds_per_item", "model_seconds_per_item",
          "peak_gpu_gb", "dtype", "batch",
          "device", "device_name", "torch", "cuda", "commit", "date", "items", "runs", "tiny",
          "shape", "run_seconds"}


def _gpu_bench(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "madbench_common.cli", "gpu-bench", *args],
                          cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120)


def test_the_tiny_cpu_path_times_the_references_and_skips_with_reasons(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    models = ",".join((*REFERENCES, "deaf-gemini-3-flash", "enc-tf5-wavlm"))
    done = _gpu_bench(tmp_path, "--tiny", "--device", "cpu", "--clips", "1", "--runs", "1",
                      "--models", models, "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["slug"]: r for r in json.loads(out.read_text())}
    assert set(rows) == set(models.split(","))
    for slug in REFERENCES:
        row = rows[slug]
        assert set(row) == FIELDS
        assert row["status"] == "timed" and row["reason"] == "", row
        assert row["seconds_per_item"] >= row["model_seconds_per_item"] >= 0
        assert len(row["run_seconds"]) == row["runs"] == 1
        assert row["device"] == "cpu" and row["peak_gpu_gb"] is None and row["cuda"] == ""
        assert row["tiny"] and row["shape"] == "tiny" and row["items"] == 1
        assert row["batch"] == 1 and row["dtype"] and row["torch"] and row["commit"]
        assert row["date"][:2] == "20"
    assert rows["deaf-gemini-3-flash"]["status"] == "skipped"
    assert "hosted API" in rows["deaf-gemini-3-flash"]["reason"]
    wavlm = rows["enc-tf5-wavlm"]  # the dev venv has no transformers; an image venv has
    assert wavlm["status"] in ("skipped", "timed"), wavlm
    assert wavlm["status"] == "timed" or "enc-tf5" in wavlm["reason"]
    assert all(r["status"] != "measured" for r in rows.values())


def test_write_refuses_a_cpu_or_tiny_run(tmp_path: Path) -> None:
    done = _gpu_bench(tmp_path, "--tiny", "--device", "cpu", "--write", "--models",
                      "ref-lfcc-stats")
    assert done.returncode != 0 and "only full-size CUDA measurements" in done.stderr + \
        done.stdout
    row = BenchRow(slug="enc-tf5-wavlm", status="timed", device="cpu", seconds_per_item=0.1)
    with pytest.raises(ConfigError, match="only a full-size CUDA measurement"):
        write_measured([row], tmp_path)


def test_a_cuda_measurement_is_written_into_the_card(tmp_path: Path) -> None:
    src = ROOT / "madbench_common/models/catalog/enc-tf5-wavlm.yaml"
    shutil.copy2(src, tmp_path / src.name)
    row = BenchRow(slug="enc-tf5-wavlm", status="measured", seconds_per_item=0.0331,
                   peak_gpu_gb=1.234, dtype="float32", batch=1, device="cuda",
                   device_name="NVIDIA H200", torch="2.11.0", cuda="12.8", commit="abc123",
                   date="2026-12-04", items=4, runs=3)
    assert write_measured([row], tmp_path) == ["enc-tf5-wavlm"]
    text = (tmp_path / src.name).read_text()
    assert text.startswith("# A catalog card")
    card = load_card(text, src.name)
    gpu = card.gpu[0]
    assert gpu["status"] == "measured" and gpu["gpu_s_per_item"] == 0.0331
    assert gpu["gpu_mem_gb"] == 1.3 and gpu["measured"]["device"] == "NVIDIA H200"
    assert gpu["measured"]["torch"] == "2.11.0" and gpu["measured"]["batch"] == 1
    assert card.arch == load_card(src.read_text(), src.name).arch


def test_a_batch_over_one_goes_through_the_stages_batching(tmp_path: Path) -> None:
    """gpu-bench times a stage's batch as the stage runs it: one ``embed_batch`` call per
    batch of inputs (``models.batching``), the rest of a short batch included."""
    from madbench_common.models import batching
    from madbench_common.models.gpubench import _batched, demo_items
    from madbench_common.models.registry import load_model

    model = load_model("ref-lfcc-stats")
    calls: list[int] = []

    def embed_batch(inputs: list[batching.EmbedInput]) -> list[batching.Embedding]:
        calls.append(len(inputs))
        return batching.embed_each(model, inputs)

    model.embed_batch = embed_batch
    _batched(model, "encoder", demo_items(3), batch=2)
    assert calls == [2]  # the lone third input is asked alone (embed_batch needs two)
