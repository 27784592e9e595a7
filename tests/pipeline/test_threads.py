"""Math-library threads are pinned, and a count other than the default is in every
fingerprint (split's speaker embeddings differed in low-order bits
between 1 and 2 workers, whose thread counts were cores / workers)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.stage import fingerprint
from madbench_common.pipeline.threads import math_threads
from tests.pipeline.toystages import toy_graph


def test_math_threads_default_and_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MADBENCH_MATH_THREADS", raising=False)
    assert math_threads() == 1
    monkeypatch.setenv("MADBENCH_MATH_THREADS", "3")
    assert math_threads() == 3
    for bad in ("0", "-2", "two", ""):
        monkeypatch.setenv("MADBENCH_MATH_THREADS", bad)
        with pytest.raises(ConfigError, match="MADBENCH_MATH_THREADS"):
            math_threads()


def test_a_thread_count_other_than_one_changes_the_fingerprint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = RunStore(open_store(str(tmp_path)), "r")
    graph = toy_graph()
    stage = graph["numbers"]

    def fp() -> str:
        return fingerprint(run, graph, stage, {"n": 3}, "img", 0)

    monkeypatch.delenv("MADBENCH_MATH_THREADS", raising=False)
    default = fp()
    monkeypatch.setenv("MADBENCH_MATH_THREADS", "1")
    assert fp() == default  # the default is the same run as before the setting existed
    monkeypatch.setenv("MADBENCH_MATH_THREADS", "2")
    assert fp() != default


def test_pinning_reaches_torch_blas_and_openmp() -> None:
    """In a fresh interpreter (pinning is process-wide): torch loaded before and BLAS and
    OpenMP runtimes report the pinned count, whatever the machine's cores."""
    code = (
        "import torch, numpy, threadpoolctl\n"
        "from madbench_common.pipeline.threads import pin_threads\n"
        "assert pin_threads() == 2\n"
        "pools = threadpoolctl.threadpool_info()\n"
        "assert pools and all(p['num_threads'] == 2 for p in pools), pools\n"
        "assert torch.get_num_threads() == 2, torch.get_num_threads()\n"
        "import os; assert os.environ['OMP_NUM_THREADS'] == '2'\n")
    env = {**os.environ, "MADBENCH_MATH_THREADS": "2"}
    env.pop("OMP_NUM_THREADS", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
