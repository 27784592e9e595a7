"""The adapter tests have one device switch (``tests/models/device.py``,
``MADBENCH_TEST_DEVICE``): no adapter test module pins a model to the CPU by a literal.

Scans every module an image lists under ``adapter_tests`` plus the helpers beside them
(``tests/models/_*.py``), so ``make adapter-test IMAGE=<slug> DEVICE=cuda`` runs all of
them on the GPU. Loading a state dict with ``map_location="cpu"`` is not a model device
and stays allowed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from madbench_common.imagefactory.images import all_images

ROOT = Path(__file__).resolve().parents[1]
SWITCH = ROOT / "tests" / "models" / "device.py"
STRAY = re.compile(r"""device\s*=\s*(["'])cpu\1"""
                   r"""|\.to\(\s*(["'])cpu\2\s*\)"""
                   r"""|torch\.device\(\s*(["'])cpu\3\s*\)""")


def adapter_test_modules() -> list[Path]:
    listed = {ROOT / t for info in all_images() for t in info.adapter_tests}
    helpers = set((ROOT / "tests" / "models").glob("_*.py")) - {ROOT / "tests/models/__init__.py"}
    return sorted(p for p in listed | helpers if p.suffix == ".py")


def stray_cpu_devices(path: Path) -> list[str]:
    """``file:line: text`` of each literal CPU device in ``path`` (comments skipped)."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.lstrip().startswith("#") and STRAY.search(line):
            name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
            out.append(f"{name}:{n}: {line.strip()}")
    return out


def test_the_scan_covers_the_adapter_tests() -> None:
    modules = adapter_test_modules()
    names = {p.relative_to(ROOT).as_posix() for p in modules}
    assert {"tests/models/test_whisper.py", "tests/models/test_qwen25omni.py",
            "tests/models/_omni.py"} <= names
    assert all(p.is_file() for p in modules), [p for p in modules if not p.is_file()]
    assert SWITCH not in modules


def test_no_adapter_test_pins_a_model_to_the_cpu() -> None:
    stray = [hit for p in adapter_test_modules() for hit in stray_cpu_devices(p)]
    assert not stray, ("take the device from tests.models.device.DEVICE "
                       "(MADBENCH_TEST_DEVICE), not a literal:\n" + "\n".join(stray))


def test_the_scan_catches_each_form(tmp_path: Path) -> None:
    bad = tmp_path / "probe.py"
    lines = ['m = Model(device="cpu")', "m = Model(device = 'cpu')", 'm.to("cpu")',
             'x = torch.device("cpu")', '# device="cpu" in a comment',
             'torch.load(p, map_location="cpu")', "m = Model(device=DEVICE)"]
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert [h.split(":")[-2] for h in stray_cpu_devices(bad)] == ["1", "2", "3", "4"]


def test_a_card_dtype_is_a_torch_float_name() -> None:
    from madbench_common.core.errors import ConfigError
    from madbench_common.models.catalog import cards, load_card

    declared = {slug: c.dtype for slug, c in cards().items() if c.dtype}
    assert declared["omni-qwen25omni"] == declared["scene-qwen25vl"] == "bfloat16"
    assert declared["qc-whisper"] == "float16" and declared["enc-imagebind"] == "float32"
    text = ("slug: x\nrole: omni\ntarget: models.adapters.x:X\nimage: x\npaper: X\n"
            "section: MADBench §4.2\ndescription: x\ndtype: {}\n")
    assert load_card(text.format("bfloat16"), "x.yaml").dtype == "bfloat16"
    with pytest.raises(ConfigError, match="dtype 'bf16' is not one of"):
        load_card(text.format("bf16"), "x.yaml")
