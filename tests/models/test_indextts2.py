"""IndexTTS2 adapter on a tiny random IndexTTS2 in the release layout, in its own venv.

Runs in ``.venvs/tts-indextts2`` (``make adapter-test IMAGE=tts-indextts2``), where the
pinned upstream package is installed. :func:`madbench_common.models.tiny.indextts2.install_tiny`
writes every file the release has (a tiny ``config.yaml`` of upstream's classes, a BPE
model trained here with sentencepiece, GPT, s2mel, statistics, emotion/speaker matrices,
w2v-BERT, the MaskGCT codec, CAM++, BigVGAN) where the real ones go; the adapter loads
them through upstream's ``IndexTTS2`` constructor and runs ``IndexTTS2.infer`` on real
demo speech. Also here: the s2mel length control against upstream's own
``InterpolateRegulator``, the duration plan, the normaliser-grammar check (the read-only
root), the loading path's failure on a missing weight, and (``test_speech_prep.py``) the
shared fit at 22.05 kHz.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("indextts.infer_v2", reason="run make adapter-test IMAGE=tts-indextts2")

import torch

from madbench_common.models.adapters.indextts2 import LengthControl, plan_frames
from madbench_common.models.speech_prep import GenerationFailed
from tests.models.device import DEVICE

from .speech_cases import RATE, demo_case
from .tiny import assert_fetch_named, tiny_root, weights_env


def test_plan_frames_uses_the_model_within_its_range_and_stretches_beyond() -> None:
    assert plan_frames(400, 430) == (430, "model:s2mel_target_length")
    assert plan_frames(400, 268) == (268, "model:s2mel_target_length")
    assert plan_frames(400, 700) == (600, "model:s2mel_target_length+time_stretch")
    assert plan_frames(400, 100) == (268, "model:s2mel_target_length+time_stretch")


def test_length_control_sets_the_target_only_after_a_gpt_call() -> None:
    """Upstream's regulator makes exactly the planned frames from GPT codes; the
    reference-prompt call before the GPT call keeps its own length."""
    from indextts.s2mel.modules.length_regulator import InterpolateRegulator

    torch.manual_seed(0)
    models = torch.nn.ModuleDict({"length_regulator": InterpolateRegulator(
        channels=16, sampling_ratios=(1, 1), in_channels=16)}).eval()
    target = round(demo_case("demo_002").duration * 22050 / 256)
    control = LengthControl(target)
    models["length_regulator"] = control.regulator(models["length_regulator"])
    gpt = control.gpt_call(lambda codes: codes)
    with torch.no_grad():
        prompt = models["length_regulator"](torch.randn(1, 120, 16), ylens=torch.LongTensor([206]),
                                            n_quantizers=3, f0=None)[0]
        codes = gpt(torch.randn(1, 150, 16))
        natural = torch.LongTensor([int(150 * 1.72)])
        speech = models["length_regulator"](codes, ylens=natural, n_quantizers=3, f0=None)[0]
    assert prompt.shape[1] == 206
    assert speech.shape[1] == target and control.log == [(258, target, "model:s2mel_target_length")]
    assert not control.armed


@pytest.mark.parametrize("cls", ["IndexTTS2SameTTS", "IndexTTS2CrossTTS"])
def test_missing_weights_name_the_fix(tmp_path: Path, cls: str) -> None:
    """Both registered settings (same- and cross-identity) load through one constructor."""
    from madbench_common.models.adapters import indextts2

    assert_fetch_named(lambda: getattr(indextts2, cls)(device=DEVICE), "tts-indextts2", tmp_path)
    assert (indextts2.IndexTTS2SameTTS.branch, indextts2.IndexTTS2CrossTTS.branch) == (
        "tts_same", "tts_cross")


@pytest.fixture(scope="module")
def tts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The real constructor on the tiny release-layout checkpoint."""
    from madbench_common.models.adapters.indextts2 import IndexTTS2SameTTS
    from madbench_common.models.tiny.indextts2 import install_tiny

    with weights_env(tiny_root(tmp_path_factory, install_tiny)):
        yield IndexTTS2SameTTS(device=DEVICE)


@pytest.mark.timeout(1800)  # three full inferences: w2v-BERT keeps the release's 17 × 1024
def test_tiny_model_runs_upstream_inference_to_the_requested_length(tts) -> None:  # type: ignore[no-untyped-def]
    """Upstream's ``IndexTTS2.infer`` (normaliser, BPE, GPT sampling, s2mel CFM, BigVGAN)
    on real demo speech; same seed, same audio; the report names the length control."""
    case, target = demo_case("demo_002"), demo_case("demo_010")
    kw = {"sample_rate": RATE, "duration": case.duration,
          "ref_audio": target.active[: int(1.5 * RATE)], "text": case.transcript}
    a = tts.generate(**kw, seed=5)
    report = tts.last_report
    assert a.dtype == np.float32 and len(a) == round(case.duration * RATE)
    assert np.isfinite(a).all() and float(np.abs(a).max()) > 0
    assert report.model_rate == 22050
    assert report.duration_control.startswith("model:s2mel_target_length")
    s = report.settings
    assert s["target_frames"] == round(case.duration * 22050 / 256)
    assert (s["s2mel_frames"], report.duration_control) == plan_frames(
        s["natural_frames"], s["target_frames"])
    assert np.array_equal(a, tts.generate(**kw, seed=5)), "same seed must give the same audio"
    assert not np.array_equal(a, tts.generate(**kw, seed=6))


def test_a_gpt_output_that_stops_at_once_is_refused_through_upstream_infer(  # type: ignore[no-untyped-def]
        tts, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPT's first token is the stop token: upstream would pass zero codes on to the
    semantic codec's convolution ("padded input size per channel: (0)", a random tiny GPT
    did so on 2 of 12 rehearsal rows); the adapter refuses it as ``no_speech_tokens``."""
    gpt = tts._tts.gpt
    real, stop = gpt.inference_speech, int(tts._tts.stop_mel_token)

    def stops_at_once(*args: object, **kwargs: object) -> object:
        codes, latent = real(*args, **kwargs)
        codes = codes.clone()
        codes[:, 0] = stop
        return codes, latent

    monkeypatch.setattr(gpt, "inference_speech", stops_at_once)
    case, target = demo_case("demo_019"), demo_case("demo_007")
    with pytest.raises(GenerationFailed, match="no_speech_tokens"):
        tts.generate(sample_rate=RATE, duration=case.duration, ref_audio=target.active,
                     text=case.transcript, seed=0)
    assert gpt.inference_speech is stops_at_once  # the adapter put back what it wrapped


def test_text_the_bpe_model_cannot_encode_is_rejected(tts) -> None:  # type: ignore[no-untyped-def]
    case = demo_case("demo_002")
    with pytest.raises(GenerationFailed, match="unsupported_characters"):
        tts.generate(sample_rate=RATE, duration=1.0, ref_audio=case.active,
                     text="Xylophone ÆØÅ ĦĲŊ")


def test_normaliser_grammars_are_checked_before_loading(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A grammar missing on a read-only root is exit 3 naming the file; where the folder is
    writable upstream builds it; the venv's grammars (built by the loads above) are whole."""
    from madbench_common.core.errors import EnvironmentMissing
    from madbench_common.models.adapters.indextts2 import (
        check_normalizer_cache,
        normalizer_grammars,
    )

    grammar = tmp_path / "indextts" / "utils" / "tagger_cache" / "zh_tn_tagger.fst"
    check_normalizer_cache([grammar])  # tmp_path is writable: upstream would build it
    monkeypatch.setattr("os.access", lambda path, mode: False)
    with pytest.raises(EnvironmentMissing, match=str(grammar)) as err:
        check_normalizer_cache([grammar])
    assert err.value.exit_code == 3 and "build-normalizer" in str(err.value)
    assert all(p.is_file() for p in normalizer_grammars())
    check_normalizer_cache()  # read-only or not, nothing is missing


def test_build_normalizer_writes_every_grammar() -> None:
    from madbench_common.models.adapters.indextts2 import _main

    assert _main(["build-normalizer"]) == 0 and _main([]) == 2
