"""Reference speech generators: exact length, determinism, speaker adaptation, real speech."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from madbench_common.core.errors import ConfigError
from madbench_common.media.audio import resample
from madbench_common.media.dsp import f0_log_stats, f0_track, mean_log_envelope, world_analyse
from madbench_common.models.reference import speech_gen as sg
from madbench_common.models.roles import Model
from madbench_common.models.speech_prep import GenerationFailed

pytestmark = pytest.mark.needs_tools("flite", "espeak-ng")

SR = 22050
TEXT = "Please call Stella and ask her to bring these things with her from the store."
TTS = [sg.FliteWorldSameTTS, sg.FliteWorldCrossTTS, sg.EspeakPsolaSameTTS,
       sg.EspeakPsolaCrossTTS]
VC = [sg.WorldVC, sg.PsolaCepstralVC]


def _flite(voice: str, text: str, tmp: Path) -> np.ndarray:
    out = tmp / f"{voice}.wav"
    subprocess.run(["flite", "-voice", voice, "-t", text, "-o", str(out)], check=True)
    audio, sr = sf.read(out, dtype="float32")
    return resample(audio, sr, SR)


@pytest.fixture(scope="module")
def voices(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """Real recordings of two speakers: rms (male, ~100 Hz) and slt (female, ~170 Hz)."""
    tmp = tmp_path_factory.mktemp("voices")
    text = "The quick brown fox jumps over the lazy dog near the river bank."
    return {"male": _flite("rms", text, tmp), "female": _flite("slt", text, tmp)}


def _f0(x: np.ndarray) -> float:
    return float(np.exp(f0_log_stats(f0_track(resample(x, SR, 16000), 16000))[0]))


def _envelope(x: np.ndarray) -> np.ndarray:
    p = world_analyse(resample(x, SR, 16000), 16000)
    env = mean_log_envelope(p.sp, p.f0)[:320]  # up to 5 kHz
    return env - env.mean()


def _generate(cls: type, voices: dict[str, np.ndarray], ref: str, duration: float,
              seed: int = 0) -> np.ndarray:
    gen = cls()
    if gen.branch == "vc":
        src = voices["female" if ref == "male" else "male"]
        return gen.generate(sample_rate=SR, duration=duration, ref_audio=voices[ref],
                            source_audio=src, seed=seed)
    return gen.generate(sample_rate=SR, duration=duration, ref_audio=voices[ref], text=TEXT,
                        seed=seed)


@pytest.mark.parametrize("cls", TTS + VC)
def test_contract_length_determinism_level(cls: type, voices: dict[str, np.ndarray]) -> None:
    gen = cls()
    assert isinstance(gen, Model) and gen.reference and gen.slug.startswith("ref-")
    assert gen.branch in ("tts_same", "tts_cross", "vc")
    y = _generate(cls, voices, "female", 2.3337)
    assert y.dtype == np.float32 and len(y) == round(2.3337 * SR)
    assert np.isfinite(y).all() and np.abs(y).max() <= 0.95 + 1e-6
    assert np.array_equal(y, _generate(cls, voices, "female", 2.3337))


@pytest.mark.parametrize("cls", TTS)
def test_tts_adapts_f0_to_reference(cls: type, voices: dict[str, np.ndarray]) -> None:
    low = _generate(cls, voices, "male", 3.0)
    high = _generate(cls, voices, "female", 3.0)
    for out, ref in ((low, voices["male"]), (high, voices["female"])):
        assert abs(np.log(_f0(out) / _f0(ref))) < np.log(1.15)
    assert _f0(high) > 1.4 * _f0(low)


@pytest.mark.parametrize("cls", VC)
def test_vc_moves_f0_and_envelope_towards_target(cls: type,
                                                 voices: dict[str, np.ndarray]) -> None:
    for target, source in (("female", "male"), ("male", "female")):
        y = _generate(cls, voices, target, len(voices[source]) / SR)
        tgt, src = voices[target], voices[source]
        assert abs(np.log(_f0(y) / _f0(tgt))) < 0.3 * abs(np.log(_f0(src) / _f0(tgt)))
        env_y, env_src, env_tgt = _envelope(y), _envelope(src), _envelope(tgt)
        assert np.linalg.norm(env_y - env_tgt) < np.linalg.norm(env_src - env_tgt)
        assert np.linalg.norm(env_y - env_src) > 1.0  # audibly changed


def test_outputs_are_speech_by_silero(voices: dict[str, np.ndarray]) -> None:
    torch = pytest.importorskip("torch")
    silero_vad = pytest.importorskip("silero_vad")
    model = silero_vad.load_silero_vad()
    for cls in (sg.FliteWorldCrossTTS, sg.EspeakPsolaSameTTS, sg.WorldVC, sg.PsolaCepstralVC):
        x = torch.from_numpy(resample(_generate(cls, voices, "male", 3.0), SR, 16000))
        model.reset_states()
        probs = [model(x[i: i + 512], 16000).item() for i in range(0, len(x) - 511, 512)]
        assert np.mean(np.array(probs) > 0.5) > 0.6, cls.slug


def test_branch_inputs(voices: dict[str, np.ndarray]) -> None:
    ref = voices["male"]
    with pytest.raises(ConfigError, match="source_audio"):
        sg.WorldVC().generate(sample_rate=SR, duration=1.0, ref_audio=ref)
    # data conditions are the input's fault (a rejected row), not the stage's
    with pytest.raises(GenerationFailed, match=r"empty_text: .*text is empty"):
        sg.FliteWorldCrossTTS().generate(sample_rate=SR, duration=1.0, ref_audio=ref,
                                         ref_text="only the reference transcript")
    with pytest.raises(ConfigError, match="duration"):
        sg.FliteWorldSameTTS().generate(sample_rate=SR, duration=0.0, ref_audio=ref, text="hi")
    with pytest.raises(GenerationFailed, match=r"no_voiced_frames: .*voiced"):
        sg.FliteWorldSameTTS().generate(sample_rate=SR, duration=1.0, text="hello",
                                        ref_audio=np.zeros(SR, np.float32))
    same = sg.FliteWorldSameTTS().generate(sample_rate=SR, duration=2.0, ref_audio=ref,
                                           ref_text="a re-spoken source transcript")
    assert len(same) == 2 * SR and np.abs(same).max() > 0.01


def test_cross_identity_tts_gets_the_targets_transcript_as_ref_text() -> None:
    """The reference transcript belongs to the reference audio (the target)."""
    from madbench_common.benchmarks.madbench.stages.speech_gen import generate_speech

    seen: dict[str, object] = {}

    class _Spy:
        slug, version, reference, branch = "spy", "0", True, "tts_cross"

        def generate(self, **kw: object) -> np.ndarray:
            seen.update(kw)
            return np.zeros(int(float(kw["duration"]) * 16000), np.float32)  # type: ignore[arg-type]

    src = np.ones(16000, np.float32) * 0.1
    generate_speech(_Spy(), source=src, reference=src.copy(), rate=16000, starts=(0.0,),
                    ends=(1.0,), text="source words", seed=1, ref_text="target words")
    assert seen["text"] == "source words" and seen["ref_text"] == "target words"


def test_reference_tts_reports_the_length_correction(voices: dict[str, np.ndarray]) -> None:
    """§3.3 "generation duration": flite's duration_stretch is clipped to [0.5, 2], so
    "Hello." (about 0.4 s at the natural rate) cannot reach 6 s by the model's own
    control; the final retiming does the rest, a correction far above 1.15 that
    component QC rejects. The 78-character TEXT at 4.5 s is within flite's range: the
    residual correction stays small."""
    gen = sg.FliteWorldSameTTS()
    gen.generate(sample_rate=SR, duration=6.0, ref_audio=voices["male"], text="Hello.")
    report = gen.last_report
    assert report is not None and report.target_seconds == pytest.approx(6.0)
    assert report.length_correction == pytest.approx(6.0 / report.raw_seconds)
    assert report.length_correction > 2.0
    assert gen.last_settings["duration_control"] == "model:duration_stretch+time_stretch"
    gen.generate(sample_rate=SR, duration=4.5, ref_audio=voices["male"], text=TEXT)
    assert gen.last_report is not None
    assert abs(gen.last_report.length_correction - 1.0) < 0.15


def test_reference_vc_keeps_the_source_timing(voices: dict[str, np.ndarray]) -> None:
    gen = sg.WorldVC()
    src = voices["female"]
    gen.generate(sample_rate=SR, duration=len(src) / SR, ref_audio=voices["male"],
                 source_audio=src)
    assert gen.last_report is not None
    assert gen.last_report.length_correction == pytest.approx(1.0, abs=0.01)
