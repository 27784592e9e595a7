"""The shard allocator settings (madbench_common.pipeline.allocator): freed tensor-sized
buffers are reused, not unmapped and faulted in again, and the switch that turns it off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.core.store import FileStore, RunStore
from madbench_common.pipeline import allocator
from madbench_common.pipeline.local import EMBEDDED_IMAGE
from madbench_common.pipeline.stage import make_context, run_shard
from tests.pipeline.toystages import toy_graph

pytestmark = pytest.mark.skipif(allocator._glibc() is None, reason="glibc only")

# 24 rounds of a 64 MiB block malloc'd, written in full and freed, as torch's CPU allocator
# does with an op's output: glibc's default maps and unmaps it each round (16,384 new pages
# a round, faulted in and zeroed by the kernel), the tuned heap keeps it
_PROBE = """
import ctypes, json, resource
from madbench_common.pipeline.allocator import tune_malloc
applied = tune_malloc()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(24):
    block = libc.malloc(64 << 20)
    ctypes.memset(block, 1, 64 << 20)
    libc.free(block)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print(json.dumps({"applied": applied, "faults": faults}))
"""


def _probe(mode: str | None) -> dict[str, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("MADBENCH_MALLOC", "GLIBC_TUNABLES")}
    if mode is not None:
        env["MADBENCH_MALLOC"] = mode
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_freed_large_buffers_are_reused_not_faulted_in_again() -> None:
    tuned, default = _probe("retain"), _probe("default")
    assert tuned["applied"] is True and default["applied"] is False
    pages = (64 << 20) // os.sysconf("SC_PAGE_SIZE")
    # glibc's own settings: every round faults its whole buffer in again
    assert default["faults"] >= 20 * pages, default
    # tuned: the first round's pages, then reuse
    assert tuned["faults"] <= 3 * pages, tuned


def test_auto_tunes_only_where_no_gpu_is_visible(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    """On a GPU node the host heap mostly holds weights on their way to the device: ``auto``
    (the default) leaves glibc as it is there; ``retain`` and ``default`` are explicit."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidiactl", "nvidia-uvm", "null"):
        (dev / name).touch()
    assert not allocator.gpu_visible(dev)  # the driver's control nodes are not a GPU
    (dev / "nvidia0").touch()
    assert allocator.gpu_visible(dev)
    (dev / "nvidia0").unlink()
    (dev / "kfd").touch()  # ROCm
    assert allocator.gpu_visible(dev)

    for gpu, mode, expected in [(False, None, True), (True, None, False), (True, "retain", True),
                                (False, "default", False), (True, "auto", False)]:
        monkeypatch.setattr(allocator, "gpu_visible", lambda gpu=gpu: gpu)
        if mode is None:
            monkeypatch.delenv("MADBENCH_MALLOC", raising=False)
        else:
            monkeypatch.setenv("MADBENCH_MALLOC", mode)
        assert allocator.wanted() is expected, (gpu, mode)


def test_unknown_mode_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MADBENCH_MALLOC", "jemalloc")
    with pytest.raises(ConfigError, match="MADBENCH_MALLOC='jemalloc'"):
        allocator.tune_malloc()


def test_every_shard_tunes_before_its_model_loads(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A shard (the unit a pod and the local runner both run) tunes the allocator before
    it loads its stage (and so its model)."""
    from madbench_common.pipeline import stage as stage_mod

    counter = tmp_path / "calls.txt"
    run = RunStore(FileStore(str(tmp_path / "store")), "r")
    ctx = make_context(run, toy_graph(), "numbers", {"counter": str(counter)},
                       EMBEDDED_IMAGE, 0)
    order: list[str] = []
    real_load = stage_mod.load_impl

    def tune() -> bool:
        order.append("tune")
        return True

    def load(target: str) -> Any:
        order.append("load")
        return real_load(target)

    monkeypatch.setattr(stage_mod, "tune_malloc", tune)
    monkeypatch.setattr(stage_mod, "load_impl", load)
    result = run_shard(ctx, 0, 2)
    assert result.items == 5 and order == ["tune", "load"]
