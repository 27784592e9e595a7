"""Running the DEAF graph locally: stages in another interpreter, and the API stub switch.

``--venv STAGE=PYTHON`` runs a stage's shards in a family venv (:class:`DeafRunner`);
``--stub-apis`` points the hosted-API answer stages and the LLM judge at a local
:mod:`~madbench_common.models.api_stub` server for the run (:func:`stub_apis`).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from madbench_common.core.environ import environ
from madbench_common.core.errors import ConfigError
from madbench_common.models.api_stub import STUB_KEY, stub_process
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.local import EMBEDDED_IMAGE, LocalRunner, RunOptions
from madbench_common.pipeline.preflight import Where
from madbench_common.pipeline.stage import ShardResult

__all__ = ["API_BASES", "DeafRunner", "python_of", "stub_apis"]

_REPO = Path(__file__).resolve().parents[3]
API_BASES = {"deaf-gemini-2.5-flash": "", "deaf-gemini-3-flash": "",
             "deaf-gpt-4o-audio": "/v1"}
"""Answer models served by the stub, and the path their ``base_url`` needs."""
_KEYS = ("GEMINI_API_KEY", "OPENAI_API_KEY", "JUDGE_API_KEY", "MADBENCH_API_STUB")
STUB_ENV = "env:MADBENCH_API_STUB"
"""The stub's address as a ``base_url``: stable across runs, so a rerun with the stub
keeps every fingerprint and cache key (the port changes; the parameter does not)."""


class DeafRunner(LocalRunner):
    """:class:`LocalRunner` whose ``venvs`` stages run in another Python.

    ``--venv STAGE=PYTHON``: that stage's shards run as ``PYTHON -m madbench_common.cli
    deaf stage run …`` subprocesses (the same fingerprint, store and parameters), so an
    open model whose libraries live in a family venv (``.venvs/deaf-tf5``: transformers,
    CUDA torch) runs while the rest of the graph stays in the main venv. The merge runs
    here."""

    def __init__(self, graph_factory: Callable[[], Graph], options: RunOptions,
                 venvs: dict[str, str], models: list[str]) -> None:
        super().__init__(graph_factory, options)
        for name, python in venvs.items():
            self.graph[name]  # unknown stage names fail before any work
            if not Path(python).exists():
                raise ConfigError(f"--venv {name}={python}: no such interpreter")
        self.venvs, self.models = venvs, models

    def where(self, stage: Stage) -> Where:
        return Where(python=self.venvs[stage.name]) if stage.name in self.venvs \
            else super().where(stage)

    def _run_shards(self, stage: Stage, params: Mapping[str, Any], n: int, pool: Any,
                    tick: Callable[[], None]) -> list[ShardResult]:
        if stage.name not in self.venvs:
            return super()._run_shards(stage, params, n, pool, tick)
        with ThreadPoolExecutor(max(1, self.opts.workers)) as ex:
            futures = [ex.submit(self._subprocess_shard, stage, params, i, n) for i in range(n)]
            out = []
            for fut in futures:
                out.append(fut.result())
                tick()
        return out

    def _subprocess_shard(self, stage: Stage, params: Mapping[str, Any], shard: int,
                          n: int) -> ShardResult:
        cmd = [self.venvs[stage.name], "-m", "madbench_common.cli", "deaf", "stage", "run",
               "--stage", stage.name, "--shard", str(shard), "--num-shards", str(n),
               "--store", self.opts.store, "--run-id", self.opts.run_id,
               "--image", EMBEDDED_IMAGE, "--seed", str(self.opts.seed),
               "--params-json", json.dumps(params)]
        if self.models:
            cmd += ["--models", ",".join(self.models)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p)}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            err = ConfigError if proc.returncode == 3 else RuntimeError
            raise err(f"{stage.name} shard {shard} in {self.venvs[stage.name]} exited "
                      f"{proc.returncode}:\n{proc.stderr[-3000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        return ShardResult(**result)


@contextmanager
def stub_apis(graph: Graph, params: dict[str, dict[str, Any]], judge: bool = True
              ) -> Iterator[str]:
    """Point the API answer stages (and the LLM judge) at a local stub for the block.

    ``--stub-apis``: ``base_url`` is set per stage to ``env:MADBENCH_API_STUB``, that
    variable and the key variables to the stub's, in this process and its children only.
    The stub's answers are not a model's; reports label them."""
    with stub_process() as url, environ({**{k: STUB_KEY for k in _KEYS}, STUB_ENV[4:]: url}):
        for stage in graph:
            if stage.model in API_BASES:
                p = params.setdefault(stage.name, {})
                p["model_args"] = {**p.get("model_args", {}),
                                   "base_url": STUB_ENV + API_BASES[stage.model], "rpm": 0}
        if judge and "deaf_judge" in graph.stages:
            p = params.setdefault("deaf_judge", {})
            p.setdefault("judge_base_url", f"{STUB_ENV}/v1")
            p.setdefault("judge_model_id", "stub-judge")
            p.setdefault("rpm", 0)
        yield url


def python_of(venv: str) -> str:
    """``<venv>/bin/python`` for a venv folder, or the path itself for an interpreter."""
    path = Path(venv)
    return str(path / "bin" / "python") if path.is_dir() else str(path)
