"""What a model image runs besides its adapter imports in the image's own environment: the
stage runner, every stage module and the manifests (``make adapter-test`` lists this for
every environment/scene image). Caught: pyarrow 26 refusing the numpy<2 families."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import madbench_common.benchmarks.madbench.stages
from madbench_common.benchmarks.madbench.rows import ComponentRow


@pytest.mark.parametrize("module", ["madbench_common.pipeline.local",
                                    "madbench_common.cli.pipeline",
                                    *(f"madbench_common.benchmarks.madbench.stages.{m.name}" for m
                                    in
                                      pkgutil.iter_modules(madbench_common.benchmarks.madbench.stages.__path__))])
def test_stage_runtime_imports(module: str) -> None:
    importlib.import_module(module)


def test_manifest_round_trip() -> None:
    from madbench_common.core.manifest import read_manifest_bytes, write_manifest_bytes

    rows = [ComponentRow(component_id="c.env_t2a_a", clip_id="c", component="env",
                         gen_seed=3, gen_settings='{"fit": "exact"}')]
    assert read_manifest_bytes(ComponentRow, write_manifest_bytes(ComponentRow, rows)) == rows
