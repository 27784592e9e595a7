"""F5-TTS adapter on a tiny random ``CFM(DiT)`` + tiny Vocos, through the real loading code.

Runs in ``.venvs/tts-f5`` (``make adapter-test IMAGE=tts-f5``). The checkpoint and vocoder
are built from upstream's own classes with random weights by
:func:`madbench_common.models.adapters.f5tts.write_tiny_checkpoint` (also the image test's), written
where the real ones go in a temporary weights root, and loaded by the adapter through
:func:`madbench_common.models.weights.hf_path` and upstream's loaders; sampling is upstream's
``infer_process`` (2 Euler steps).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("f5_tts", reason="run make adapter-test IMAGE=tts-f5")


from madbench_common.benchmarks.madbench.stages.speech_gen import generate_speech
from madbench_common.models.speech_prep import GenerationFailed
from tests.models.device import DEVICE

from .speech_cases import RATE, assert_placed, demo_case
from .tiny import assert_fetch_named, tiny_root, weights_env


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    from madbench_common.models.adapters.f5tts import write_tiny_checkpoint

    with weights_env(tiny_root(tmp_path_factory, write_tiny_checkpoint)) as root:
        yield root


@pytest.fixture(scope="module")
def same(weights: Path):
    from madbench_common.models.adapters.f5tts import F5SameTTS

    return F5SameTTS(device=DEVICE, nfe_step=2)


def test_missing_weights_name_the_fix(tmp_path: Path) -> None:
    from madbench_common.models.adapters.f5tts import F5SameTTS

    assert_fetch_named(lambda: F5SameTTS(device=DEVICE), "tts-f5", tmp_path)


def test_duration_rate_and_determinism(same) -> None:
    case = demo_case("demo_002")
    kw = {"sample_rate": RATE, "duration": 2.5, "ref_audio": case.active,
          "ref_text": case.transcript, "text": case.transcript}
    a = same.generate(**kw, seed=7)
    report = same.last_report
    b = same.generate(**kw, seed=7)
    c = same.generate(**kw, seed=8)
    assert a.dtype == np.float32 and len(a) == round(2.5 * RATE)
    assert np.array_equal(a, b), "same seed must give the same audio"
    assert not np.array_equal(a, c), "another seed must give other audio"
    assert report is not None and report.model_rate == 24000
    assert report.duration_control == "model:fix_duration"
    # The model itself made (nearly) the asked length: one mel frame is 10.7 ms.
    assert report.length_correction == pytest.approx(1.0, abs=0.05)
    settings = same.last_settings
    assert settings["seed"] == 8 and settings["nfe_step"] == 2 and settings["cfg_strength"] == 2.0


def test_placed_in_speech_regions_same_and_cross(same, weights: Path) -> None:
    from madbench_common.models.adapters.f5tts import F5CrossTTS

    case, target = demo_case("demo_002"), demo_case("demo_010")
    track = generate_speech(same, source=case.speech, reference=case.speech, rate=RATE,
                            starts=case.starts, ends=case.ends, text=case.transcript, seed=3)
    assert_placed(track, case)
    cross = F5CrossTTS(device=DEVICE, nfe_step=2)
    track = generate_speech(cross, source=case.speech, reference=target.active, rate=RATE,
                            starts=case.starts, ends=case.ends, text=case.transcript, seed=3,
                            ref_text=target.transcript)
    assert_placed(track, case)


@pytest.mark.parametrize(("text", "ref_s", "why"), [
    ("   ", 3.0, "empty_text"),
    ("สวัสดีครับ", 3.0, "unsupported_characters"),
    ("Hello there.", 0.4, "reference_too_short"),
])
def test_failures_are_per_component(same, text: str, ref_s: float, why: str) -> None:
    case = demo_case("demo_002")
    with pytest.raises(GenerationFailed, match=why):
        same.generate(sample_rate=RATE, duration=2.0, ref_audio=case.active[: int(ref_s * RATE)],
                      ref_text=case.transcript, text=text, seed=0)



def test_text_that_splits_into_chunks_is_deterministic(same) -> None:
    """A 2 s reference saying 11 bytes allows upstream max_chars = 11 / 2 × 20 = 110, so
    the 3-sentence text below (~190 bytes) splits into chunks; upstream samples them in
    threads sharing one RNG. The adapter samples them serially on the calling thread:
    the same seed gives the same audio, and every chunk's sample runs on this thread."""
    import threading

    from f5_tts.infer import utils_infer as ui

    case = demo_case("demo_002")
    ref = case.active[: 2 * RATE]
    text = ("The quiet harbour woke slowly under a pale sky. Gulls circled the boats while "
            "the nets were mended on the pier. By noon the market by the water was full of "
            "voices and the smell of bread.")
    ref_text = "hello world"
    assert len(ui.chunk_text(text, max_chars=int(11 / 2.0 * 20))) > 1
    threads: list[int] = []
    sample = same._model.sample

    def spy(*args, **kwargs):
        threads.append(threading.get_ident())
        return sample(*args, **kwargs)

    same._model.sample = spy
    try:
        kw = {"sample_rate": RATE, "duration": 9.0, "ref_audio": ref, "ref_text": ref_text,
              "text": text}
        a = same.generate(**kw, seed=11)
        b = same.generate(**kw, seed=11)
    finally:
        del same._model.sample
    assert len(threads) >= 4 and set(threads) == {threading.get_ident()}
    assert np.array_equal(a, b), "same seed, chunked text: same audio"
    assert ui.ThreadPoolExecutor is not None and ui.ThreadPoolExecutor.__name__ == (
        "ThreadPoolExecutor")  # restored after the call


def test_serial_executor_runs_in_order_and_keeps_errors() -> None:
    from madbench_common.models.adapters.f5tts import SerialExecutor

    order: list[int] = []
    with SerialExecutor() as pool:
        futures = [pool.submit(order.append, i) for i in range(3)]
        bad = pool.submit(lambda: 1 / 0)
    assert order == [0, 1, 2] and all(f.done() for f in futures)
    with pytest.raises(ZeroDivisionError):
        bad.result()
