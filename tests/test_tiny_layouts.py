"""Tiny-checkpoint builders against the release layout (static: no model library is imported).

Each image's builder (``image.yaml`` ``image_test.weights``) must write a tiny checkpoint for
every model the image registers, at the paths ``weights.yaml`` fetches the real one to
(:mod:`madbench_common.models.tiny_layout`). Here the builders' declared files are compared
with ``weights.yaml`` and ``image.yaml``; each adapter test compares what its builder really
writes with the same declaration.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from madbench_common.images import load_image
from madbench_common.models.tiny_layout import TINY_LAYOUTS, declared_problems, written_problems
from madbench_common.registry import REGISTRY
from madbench_common.weights import install_local_snapshot, load_spec

ROOT = Path(__file__).resolve().parents[1]
NO_IMAGE_TEST = {"deaf-tf5": "its stages are in the DEAF graph, which make image-test does "
                             "not run (madbench_common.imagetest builds the main graph only)"}


@pytest.mark.parametrize("image", sorted(TINY_LAYOUTS))
def test_declared_tiny_files_match_weights_yaml_and_image_yaml(image: str) -> None:
    info = load_image(image)
    builder = info.image_test.weights if info.image_test else ""
    if image not in NO_IMAGE_TEST:
        assert builder, f"images/{image}/image.yaml: image_test.weights names no builder"
    layout = TINY_LAYOUTS[image]
    assert declared_problems(image, layout, load_spec(image), info.models, builder) == []
    registered = {s.slug for s in REGISTRY.values() if s.image == image}
    assert registered <= set(layout.models), f"registered for {image} but not built: " \
        f"{sorted(registered - set(layout.models))}"


@pytest.mark.parametrize("image", sorted(TINY_LAYOUTS))
def test_builder_is_defined_in_its_module(image: str) -> None:
    module, _, func = TINY_LAYOUTS[image].builder.partition(":")
    source = ROOT / Path(*module.split(".")).with_suffix(".py")
    tree = ast.parse(source.read_text())
    assert func in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}, source


def test_a_builder_that_disagrees_with_weights_yaml_is_reported() -> None:
    layout = TINY_LAYOUTS["enc-tf5"]
    wavlm = dict(layout.hf)
    wavlm["microsoft/wavlm-base-plus"] = ("config.json", "preprocessor_config.json",
                                          "model.safetensors")
    wrong = dataclasses.replace(layout, hf=wavlm)
    problems = declared_problems("enc-tf5", wrong, load_spec("enc-tf5"))
    assert any("'pytorch_model.bin'" in p for p in problems)
    assert any("model.safetensors is not fetched" in p for p in problems)
    missing = dataclasses.replace(TINY_LAYOUTS["audio-torch"], files=("AASIST.pth",))
    assert any("BEATs_iter3_plus_AS2M.pt is only in weights.yaml" in p
               for p in declared_problems("audio-torch", missing, load_spec("audio-torch")))


def test_a_written_root_is_checked_file_by_file(tmp_path: Path) -> None:
    layout = TINY_LAYOUTS["det-xlsr-mamba"]
    src = tmp_path / "src"
    src.mkdir()
    for name in ("model.safetensors", "xlsr_mamba.arch.json", "stray.bin"):
        (src / name).write_bytes(b"x")
    install_local_snapshot(tmp_path / "root", "AustinXiao/XLSR-Mamba-LA", src)
    problems = written_problems(tmp_path / "root", "det-xlsr-mamba", layout)
    assert problems == ["det-xlsr-mamba: AustinXiao/XLSR-Mamba-LA/config.json declared but not "
                        "written", "det-xlsr-mamba: AustinXiao/XLSR-Mamba-LA/stray.bin written "
                        "but not declared"]
    install_local_snapshot(tmp_path / "bad", "AustinXiao/XLSR-Mamba-LA", src, revision="main")
    assert any("not one 40-hex commit" in p
               for p in written_problems(tmp_path / "bad", "det-xlsr-mamba", layout))
