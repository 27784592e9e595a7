"""Every card's ``arch:`` block: where the release's own configuration is (repo, file,
commit) with the values ``madbench gpu-bench`` builds from, or why it cannot be read
offline; and the ``gpu:`` block's measured figures say how they were measured."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.models.catalog import UNAVAILABLE, cards, load_card

ROOT = Path(__file__).resolve().parents[2]
_CARD = """slug: x
role: encoder
target: models.x:X
image: x
paper: X
section: MADBench §4.2
description: x
"""
_GPU = """slot: {stages: [features_x], memory: 8Gi}
gpu:
  model: X
  params_m: 1
  step_params_m: 1
  bytes_per_param: 4
  steps: 1
  passes: 1
  frames: 1
  source: s
"""


@pytest.mark.parametrize("slug", sorted(cards()))
def test_every_card_has_an_arch_with_a_source_or_a_reason(slug: str) -> None:
    arch = cards()[slug].arch
    assert arch, f"{slug}: no arch block"
    sourced = arch.get("repo") and arch.get("file") and (
        arch.get("commit") or arch["repo"] == "self")
    assert sourced or arch.get("reason"), f"{slug}: arch has neither a source nor a reason"
    if arch.get("config") == UNAVAILABLE or not sourced:
        assert len(str(arch.get("reason", ""))) > 20, f"{slug}: say why the config is not here"
    if arch.get("repo") == "self":
        assert (ROOT / arch["file"]).is_file(), f"{slug}: {arch['file']} is not in the repo"
    elif arch.get("commit"):
        assert len(arch["commit"]) == 40 and int(arch["commit"], 16) >= 0, slug


@pytest.mark.parametrize("slug", sorted(s for s, c in cards().items() if "builder" in c.arch))
def test_arch_builders_are_functions_under_madbench_common(slug: str) -> None:
    """Read without importing (the builders import upstream packages the images hold)."""
    module, _, name = cards()[slug].arch["builder"].partition(":")
    path = ROOT / "madbench_common" / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    named = {a.arg for a in (*fn.args.args, *fn.args.kwonlyargs)}
    args = set(cards()[slug].arch.get("args") or ())
    assert fn.args.kwarg is not None or args <= named, f"{slug}: {name} must take {args - named}"


@pytest.mark.parametrize(("slug", "module", "constant"), [
    ("audio-torch-aasist", "madbench_common.models.adapters.aasist", "MODEL_CONFIG"),
    ("enc-imagebind", "madbench_common.models.adapters.imagebind", "HUGE"),
    ("enc-cavmae-sync", "madbench_common.models.adapters.cavmae_sync", "RELEASED"),
])
def test_arch_args_are_what_the_adapter_loads_the_release_with(
        slug: str, module: str, constant: str) -> None:
    assert cards()[slug].arch["args"] == getattr(importlib.import_module(module), constant)


@pytest.mark.parametrize(("arch", "message"), [
    ("arch: {repo: 'github:a/b', file: c.py}", "source .* or a reason"),
    ("arch: {config: unavailable offline}", "needs the reason"),
    ("arch: {config: maybe, reason: r}", "only ever"),
    ("arch: {reason: no code, args: {a: 1}}", "come from a source"),
    ("arch: {repo: self, file: x.py, builder: nocolon}", "module:function"),
    ("arch: {repo: self, file: x.py, colour: red}", "unknown arch key"),
])
def test_a_bad_arch_is_refused_with_the_rule(arch: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_card(_CARD + arch + "\n", "x.yaml")


def test_measured_figures_say_how_they_were_measured() -> None:
    text = _CARD + _GPU + "  status: measured\n  gpu_mem_gb: 2\n  gpu_s_per_item: 0.1\n"
    with pytest.raises(ConfigError, match="says how"):
        load_card(text, "x.yaml")
    how = "  measured: {device: NVIDIA H200, torch: '2.11', cuda: '12.8', dtype: float32,\n" \
          "             batch: 1, commit: abc, date: '2026-12-04'}\n"
    assert load_card(text + how, "x.yaml").gpu[0]["measured"]["device"] == "NVIDIA H200"
    with pytest.raises(ConfigError, match="goes with status: measured"):
        load_card(_CARD + _GPU + "  status: estimated\n" + how, "x.yaml")
