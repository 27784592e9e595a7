"""The whole build graph on six demo clips, once per session (the e2e and export tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.definition import build_graph
from madbench_common.pipeline.eval_models import REFERENCE_MODELS
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.testing.faults import ONE_CONDITION, demo_sources

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"
CLIPS = ("demo_002", "demo_003", "demo_004", "demo_007", "demo_011", "demo_027")
DEMO_MODELS = [m for m in REFERENCE_MODELS if m != "ref-dnsmos"]


@pytest.fixture(scope="session")
def demo_sources_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sources CSV (the demo's licence columns) with six demo clips."""
    if not (DEMO / "sources.csv").exists():
        pytest.skip("data/demo not built")
    # the clips and stems copied beside the CSV: sources are confined to its folder
    return demo_sources(tmp_path_factory.mktemp("build") / "sources", CLIPS)


@pytest.fixture(scope="session")
def demo_build(demo_sources_csv: Path) -> RunStore:
    """The demo's plan (make demo) on six clips, every stage of the graph."""
    opts = RunOptions(store=str(demo_sources_csv.parent.parent / "store"), run_id="b", workers=2,
                      progress=False,
                      params={"ingest": {"sources": str(demo_sources_csv)},
                              # the demo's plan (make demo): 6 speech + 8 env per clip
                              "plan_components": {"targets": 1, "mismatch_prompts": 1},
                              # and its models (make demo leaves out ref-dnsmos: slow)
                              "features_references": {"models": DEMO_MODELS},
                              # one robustness condition of 14 (the tests here check the
                              # build; tests/stages/test_perturb_stage.py checks all 14)
                              "perturb": {"conditions": ONE_CONDITION}})
    LocalRunner(build_graph, opts).execute()
    return RunStore(open_store(opts.store), "b")
