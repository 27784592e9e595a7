"""End to end: demo samples → the enc-tf5 image's feature stages (tiny PE-AV, WavLM and
XLS-R, run in the enc-tf5 venv like a pod runs ``madbench stage``) → ``evaluate``.

The build graph runs here (main venv, CPU references) up to ``perturb`` on six demo
clips; each model's ``features_<slug>`` stage then runs as ``madbench stage run`` /
``stage merge`` with ``.venvs/enc-tf5``'s interpreter and tiny random checkpoints in a
weights root; ``evaluate`` (restricted to ``assemble``, ``perturb`` and that stage as
inputs) reads each. Skips (naming the command) when that venv has not been built, as in CI.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.rows import FeatureRow, SampleRow
from madbench_common.benchmarks.madbench.stages.features import shuffle_partners
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore, open_store
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.stage import make_context, merge_stage, run_shard
from madbench_common.testing.faults import demo_sources

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "data" / "demo"
VENV = ROOT / ".venvs" / "enc-tf5" / "bin" / "python"
CLIPS = ("demo_002", "demo_004", "demo_007", "demo_010", "demo_013", "demo_027")
MODELS = {"enc-tf5-pe-av-base": "features_enc_tf5_pe_av_base",
          "enc-tf5-wavlm": "features_enc_tf5_wavlm",
          "enc-tf5-xlsr": "features_enc_tf5_xlsr"}

if not VENV.exists():
    pytest.skip("run make adapter-test IMAGE=enc-tf5 first (builds .venvs/enc-tf5)",
                allow_module_level=True)


def _sources(tmp: Path) -> Path:
    return demo_sources(tmp / "sources", CLIPS)


def _venv(*args: str, env: dict[str, str]) -> str:
    proc = subprocess.run([str(VENV), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunStore:
    tmp = tmp_path_factory.mktemp("e2e")
    store = str(tmp / "store")
    # the feature stages also read perturb: run it, without conditions
    opts = RunOptions(store=store, run_id="e", workers=2, progress=False, until="perturb",
                      params={"ingest": {"sources": str(_sources(tmp))},
                              "perturb": {"conditions": []}})
    LocalRunner(build_graph, opts).execute()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "MADBENCH_WEIGHTS": str(tmp / "weights"), "TRANSFORMERS_OFFLINE": "1"}
    _venv("-c", f"from madbench_common.models.tiny.eval import tf5; tf5({str(tmp / 'weights')!r})",
          env=env)
    for slug, stage in MODELS.items():
        common = ["--stage", stage, "--store", store, "--run-id", "e", "--image",
                  "ghcr.io/madbench/enc-tf5:test", "--params-json", json.dumps({"model": slug})]
        _venv("-m", "madbench_common.cli", "stage", "run", "--shard", "0", *common, env=env)
        _venv("-m", "madbench_common.cli", "stage", "merge", *common, env=env)
    return RunStore(open_store(store), "e")


def _features(run: RunStore, stage: str) -> list[FeatureRow]:
    return read_manifest_bytes(FeatureRow, run.get_bytes(f"{stage}/manifest.parquet"))


def test_feature_manifests_have_every_mode_and_the_exact_input(run: RunStore) -> None:
    samples = [s for s in read_manifest_bytes(SampleRow, run.get_bytes(
        "assemble/manifest.parquet")) if s.ok]
    assert samples
    peav = [r for r in _features(run, MODELS["enc-tf5-pe-av-base"]) if r.ok]
    wavlm = [r for r in _features(run, MODELS["enc-tf5-wavlm"]) if r.ok]
    # shuffled A-V rows exist where two scene-consistency test clips can swap videos
    # (features.shuffle_partners: a lone test clip has no partner)
    partners = shuffle_partners(samples, np.random.default_rng(0))
    assert {(r.mode, r.pairing) for r in peav} == {("A", "paired"), ("AV", "paired")} | (
        {("AV", "shuffled")} if partners else set())
    assert {r.sample_id for r in peav if r.pairing == "shuffled"} == set(partners)
    assert {(r.mode, r.pairing) for r in wavlm} == {("A", "paired")}
    assert {r.sample_id for r in wavlm} == {s.sample_id for s in samples}
    assert all(r.audio_rate == 48000 and r.model_slug == "enc-tf5-pe-av-base" for r in peav)
    assert all(r.video_frames > 0 and r.video_size == 32 for r in peav if r.mode == "AV")
    assert all(r.audio_rate == 16000 and "mean over" in r.pooling for r in wavlm)
    xlsr = [r for r in _features(run, MODELS["enc-tf5-xlsr"]) if r.ok]
    assert {(r.mode, r.pairing) for r in xlsr} == {("A", "paired")}
    assert {r.sample_id for r in xlsr} == {s.sample_id for s in samples}
    assert all(r.audio_rate == 16000 and r.model_slug == "enc-tf5-xlsr" for r in xlsr)


def _eval_graph(stage: str) -> Graph:
    full = build_graph()
    evaluate = dataclasses.replace(full["evaluate"], inputs=("assemble", "perturb", stage))
    assemble = dataclasses.replace(full["assemble"], inputs=())  # finished already
    perturb = dataclasses.replace(full["perturb"], inputs=("assemble",))  # so did perturb
    return Graph([assemble, perturb, full[stage], evaluate])


def test_evaluate_reports_each_model_in_its_group(run: RunStore) -> None:
    for slug, stage in MODELS.items():
        graph = _eval_graph(stage)
        params = {"features_stage": stage, "n_boot": 10, "logo": False}
        ctx = make_context(run, graph, "evaluate", params, "embedded", 0)
        run_shard(ctx, 0, 1)
        merge_stage(ctx, 1)
        marker = json.loads(run.get_bytes("evaluate/_SUCCESS"))
        report = json.loads(run.get_bytes(f"{marker['prefix']}/report/report.json"))
        models = {m["slug"]: m for m in report["models"]}
        assert slug in models, sorted(models)
        assert models[slug]["group"] == REGISTRY[slug].group
        # six clips leave too few training samples per class for most heads, so the task
        # records may be empty; those present are for the modes the model has
        rows = models[slug]["tables"].get("tasks", [])
        assert {r["mode"] for r in rows} <= ({"A", "AV"} if slug == "enc-tf5-pe-av-base"
                                             else {"A"})
        group = REGISTRY[slug].group
        assert group == ("av_encoder" if slug.endswith("pe-av-base") else "audio_encoder")
