"""Seed-VC adapter on tiny random models of the real architectures, through real loading.

Runs in ``.venvs/vc-seedvc`` (``make adapter-test IMAGE=vc-seedvc``). Every part is built
from upstream's own classes with random weights and written where the real files go in a
temporary weights root (:func:`madbench_common.models.adapters.seedvc.write_tiny_checkpoint`, also
the image test's): the DiT + length regulator (seed-vc's packaged whisper-small preset
with small widths) as ``Plachta/Seed-VC`` checkpoint + config, a 1-layer ``WhisperModel``
with its feature extractor as ``openai/whisper-small``, a small ``BigVGAN`` as
``nvidia/bigvgan_v2_22khz_80band_256x`` (``config.json`` + ``bigvgan_generator.pt``) and
``CAMPPlus`` as ``funasr/campplus``. The adapter loads them through upstream's
``load_models`` and converts real demo speech with 2 diffusion steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("seed_vc", reason="run make adapter-test IMAGE=vc-seedvc")


from madbench_common.models.speech_prep import GenerationFailed
from tests.models.device import DEVICE

from .speech_cases import (
    RATE,
    assert_conversion_placed,
    assert_short_reference_fails,
    demo_case,
    seeded_conversion,
)
from .tiny import assert_fetch_named, tiny_root, weights_env


@pytest.fixture(scope="module")
def vc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from madbench_common.models.adapters.seedvc import SeedVC, write_tiny_checkpoint

    with weights_env(tiny_root(tmp_path_factory, write_tiny_checkpoint)):
        yield SeedVC(device=DEVICE, diffusion_steps=2)


def test_missing_weights_name_the_fix(tmp_path: Path) -> None:
    from madbench_common.models.adapters.seedvc import SeedVC

    assert_fetch_named(lambda: SeedVC(device=DEVICE), "vc-seedvc", tmp_path)


def test_converts_at_22k_keeping_source_timing_and_seed(vc) -> None:  # type: ignore[no-untyped-def]
    report = seeded_conversion(vc)
    assert vc.rate == 22050 and report.model_rate == 22050
    assert report.duration_control == "model:length_adjust"
    # length_adjust = 1 keeps the source's frame count; a random vocoder may add edge silence.
    assert 0.9 < report.length_correction < 1.3


def test_placed_in_speech_regions(vc) -> None:  # type: ignore[no-untyped-def]
    assert_conversion_placed(vc)


def test_short_inputs_fail_one_component(vc) -> None:  # type: ignore[no-untyped-def]
    assert_short_reference_fails(vc)
    case = demo_case("demo_002")
    with pytest.raises(GenerationFailed, match="source_too_short"):
        vc.generate(sample_rate=RATE, duration=1.0, ref_audio=case.active,
                    source_audio=np.zeros(RATE, np.float32))
