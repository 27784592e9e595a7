"""Running chosen stages with another Python: ``madbench run --python STAGE=PATH``.

A model family whose libraries cannot load beside the main environment (the omni models
need transformers 5 with torchvision) runs its stage with its own interpreter, typically
``.venvs/<slug>/bin/python`` from ``make adapter-test``. Each shard and the merge run as
``<python> -m madbench_common.cli stage run|merge …``, the commands an Argo pod runs, with
this checkout first on ``PYTHONPATH`` and the hub offline. The stage's image, and so its
fingerprint, is ``venv:<folder>``, so its outputs never mix with other runs'.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madbench_common.core.errors import ConfigError, MadbenchError
from madbench_common.pipeline.graph import Stage
from madbench_common.pipeline.stage import ShardResult

__all__ = ["InterpreterEngine", "parse_interpreters"]

_SOURCE_ROOT = Path(__file__).resolve().parents[2]
_EXIT_CONFIG = 3


def parse_interpreters(values: list[str]) -> dict[str, str]:
    """``STAGE=PATH`` items → {stage: interpreter}; the interpreter must exist."""
    out = {}
    for item in values:
        stage, eq, path = item.partition("=")
        if not eq or not stage or not path:
            raise ConfigError(f"--python {item!r}: expected STAGE=PATH")
        if not (Path(path).is_file() and os.access(path, os.X_OK)):
            raise ConfigError(f"--python {item!r}: {path} is not an executable interpreter "
                              "(make adapter-test IMAGE=<slug> builds .venvs/<slug>)")
        out[stage] = path
    return out


@dataclass
class InterpreterEngine:
    """Runs one stage's shards and merge with ``python`` in subprocesses."""

    python: str
    store: str
    run_id: str
    workers: int = 1
    engine: str = "python"

    def image_ref(self, stage: Stage) -> str:
        """``venv:<folder>``: what the stage's fingerprint and its outputs record."""
        return f"venv:{Path(self.python).absolute().parents[1].name}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(_SOURCE_ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env.update(PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)), HF_HUB_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1")
        return env

    def _run(self, stage: Stage, argv: list[str]) -> dict[str, Any]:
        cmd = [self.python, "-m", "madbench_common.cli", *argv]
        proc = subprocess.run(cmd, env=self._env(), capture_output=True, text=True,
                              check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-20:]
            kind = ConfigError if proc.returncode == _EXIT_CONFIG else MadbenchError
            raise kind(f"stage {stage.name} under {self.python} exited {proc.returncode}:\n"
                       + "\n".join(tail))
        sys.stderr.write(proc.stderr)
        result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return result

    def _args(self, stage: Stage, verb: str, params: Mapping[str, Any], seed: int,
              n: int) -> list[str]:
        return ["stage", verb, "--stage", stage.name, "--num-shards", str(n), "--store",
                self.store, "--run-id", self.run_id, "--image", self.image_ref(stage),
                "--seed", str(seed), "--params-json", json.dumps(params, sort_keys=True)]

    def run_shards(self, stage: Stage, params: Mapping[str, Any], seed: int, n: int,
                   tick: Callable[[], None]) -> list[ShardResult]:
        """Every shard of ``stage``, ``workers`` subprocesses at a time."""

        def one(shard: int) -> ShardResult:
            argv = [*self._args(stage, "run", params, seed, n), "--shard", str(shard)]
            result = ShardResult(**self._run(stage, argv))
            tick()
            return result

        with ThreadPoolExecutor(self.workers) as pool:
            return list(pool.map(one, range(n)))

    def merge(self, stage: Stage, params: Mapping[str, Any], seed: int, n: int) -> dict[str, Any]:
        """The stage's merge under ``python``; returns the ``_SUCCESS`` marker."""
        return self._run(stage, self._args(stage, "merge", params, seed, n))
