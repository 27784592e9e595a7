"""Vevo-Timbre adapter on a tiny random Vevo in the release layout, through real loading.

Runs in ``.venvs/vc-vevo`` (``make adapter-test IMAGE=vc-vevo``, Amphion on ``PYTHONPATH``).
:func:`madbench_common.models.tiny.vevo.install_tiny` (also the image test's writer) makes
every part with Amphion's own builders from its Vevo configs at small widths and saves
them where ``amphion/Vevo`` keeps them, and a small HuBERT as the weights root's
``hubert_fairseq_large_ll60k.pth``; the adapter's default constructor loads them (widths
from the snapshot's ``madbench_arch.json``) and ``inference_fm`` runs for real with 2
flow-matching steps on demo speech.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .speech_cases import (
    assert_conversion_placed,
    assert_short_reference_fails,
    seeded_conversion,
)
from .tiny import assert_fetch_named, tiny_root, weights_env

# Amphion's code imports itself as the top-level package `models`. Should another `models`
# be imported already, take the name over for the import, then give it back (Amphion's
# submodules stay cached by full name).
_AMPHION = [p for p in sys.path if (Path(p) / "models/vc/vevo/vevo_utils.py").exists()]
_OURS = sys.modules.get("models")
if _AMPHION:
    sys.path.insert(0, _AMPHION[0])
    sys.modules.pop("models", None)
try:
    vu = pytest.importorskip("models.vc.vevo.vevo_utils",
                             reason="run make adapter-test IMAGE=vc-vevo")
finally:
    if _OURS is not None:
        sys.modules["models"] = _OURS

import torch  # noqa: E402

from tests.models.device import DEVICE  # noqa: E402


@pytest.fixture(scope="module")
def vc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from madbench_common.models.adapters.vevo import VevoTimbre
    from madbench_common.models.tiny.vevo import install_tiny

    with weights_env(tiny_root(tmp_path_factory, install_tiny)):
        yield VevoTimbre(device=DEVICE, flow_matching_steps=2)


def test_tiny_widths_come_from_the_checkpoint_and_weights_from_its_files(vc) -> None:  # type: ignore[no-untyped-def]
    """The pipeline holds the files' tensors (upstream's loaders read them) at the widths
    of the checkpoint's madbench_arch.json."""
    from safetensors.torch import load_file

    from madbench_common.models.tiny.vevo import ARCH
    from madbench_common.models.weights import hf_path, url_file

    snap = hf_path("amphion/Vevo", image="vc-vevo")
    saved = load_file(str(snap / "acoustic_modeling/Vq8192ToMels/model.safetensors"))
    assert all(torch.equal(v, saved[k]) for k, v in vc._pipe.fmt_model.state_dict().items())
    hubert = torch.load(url_file("hubert_fairseq_large_ll60k.pth", image="vc-vevo"))
    loaded = {k.removeprefix("model."): v  # torchaudio's bundle wraps the model
              for k, v in vc._pipe.hubert_model.state_dict().items()}
    assert loaded.keys() == hubert.keys()
    assert all(torch.equal(v, hubert[k]) for k, v in loaded.items())
    assert len(vc._pipe.hubert_model.model.encoder.transformer.layers) == 18
    width = ARCH["hubert"]["encoder_embed_dim"]
    assert tuple(vc._pipe.hubert_feat_norm_mean.shape) == (width,)


def test_missing_weights_name_the_fix(tmp_path: Path) -> None:
    from madbench_common.models.adapters.vevo import VevoTimbre

    assert_fetch_named(lambda: VevoTimbre(device=DEVICE), "vc-vevo", tmp_path)


def test_converts_at_24k_keeping_source_timing_and_seed(vc) -> None:  # type: ignore[no-untyped-def]
    report = seeded_conversion(vc)
    assert report.model_rate == 24000 and report.duration_control == "model:source_timing"
    assert 0.9 < report.length_correction < 1.3


def test_placed_in_speech_regions(vc) -> None:  # type: ignore[no-untyped-def]
    assert_conversion_placed(vc)


def test_short_reference_fails_one_component(vc) -> None:  # type: ignore[no-untyped-def]
    assert_short_reference_fails(vc)
