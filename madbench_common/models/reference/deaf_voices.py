"""CPU reference voices for DEAF: Debian's flite and espeak-ng, with a WORLD age transform.

The paper's SIC voices come from ElevenLabs (Eleven Multilingual v2; §2.1, Table 8) and
its BSC voice from Microsoft Neural TTS (en-US-GuyNeural; Appendix A.2.2). Offline, this
reference speaks with flite's voices trained on real speakers (``rms`` and ``awb`` male,
``slt`` female) and changes apparent age in WORLD (:class:`AgeTransform`); the stimuli are
labelled as references. ``narrator`` is flite ``rms`` unmodified. Deterministic: ``seed``
salts only the jitter noise.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import soundfile as sf

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.media.dsp import (
    normalise,
    retime_world,
    trim_silence,
    warp_envelope,
    world_analyse,
    world_synthesise,
)
from madbench_common.models.deaf_roles import NARRATOR

__all__ = ["AGE_TRANSFORMS", "BASE_VOICES", "AgeTransform", "ReferenceVoices", "apply_age", "speak"]

SR = 16000
LEVEL_DBFS = -26.0


def speak(engine: str, voice: str, text: str) -> Audio:
    """``text`` spoken by Debian's ``flite`` or ``espeak-ng`` voice, 16 kHz mono, trimmed."""
    if shutil.which(engine) is None:
        raise ConfigError(f"{engine} not found on PATH (apt-get install {engine})")
    with tempfile.TemporaryDirectory(prefix="deaf-tts-") as tmp:
        txt, wav = Path(tmp) / "text.txt", Path(tmp) / "out.wav"
        txt.write_text(" ".join(text.split()), encoding="utf-8")
        cmd = (["flite", "-voice", voice, "-f", str(txt), "-o", str(wav)] if engine == "flite"
               else ["espeak-ng", "-v", voice, "-f", str(txt), "-w", str(wav)])
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
        audio, sr = sf.read(wav, dtype="float32", always_2d=True)
    return trim_silence(resample(audio.mean(axis=1), sr, SR), SR)


@dataclass(frozen=True)
class AgeTransform:
    """WORLD changes that move a voice's apparent age.

    * **young**: raised F0 (×1.10) and formants (frequency warp α = 1.06, a shorter vocal
      tract), slightly faster rate (×1.08);
    * **elderly**: lowered F0 for women (×0.85; older women's F0 falls) and men (×0.95), a
      5.5 Hz vocal tremor (±4 % F0), cycle-to-cycle jitter (1.5 % smoothed noise),
      breathiness (aperiodicity raised above 1 kHz), formants lowered (α = 0.97) and a
      slower rate (×0.85).

    These are the acoustic correlates of perceived age in the voice-ageing literature, not
    a model of any real speaker.
    """

    f0_scale: float = 1.0
    formant_alpha: float = 1.0
    rate: float = 1.0
    tremor: float = 0.0
    jitter: float = 0.0
    breath: float = 0.0


AGE_TRANSFORMS = {
    "young_male": AgeTransform(f0_scale=1.10, formant_alpha=1.06, rate=1.08),
    "young_female": AgeTransform(f0_scale=1.10, formant_alpha=1.06, rate=1.08),
    "elderly_male": AgeTransform(0.95, 0.97, 0.85, tremor=0.04, jitter=0.015, breath=0.35),
    "elderly_female": AgeTransform(0.85, 0.97, 0.85, tremor=0.04, jitter=0.015, breath=0.35),
    NARRATOR: AgeTransform(),
}
BASE_VOICES = {"young_male": "awb", "elderly_male": "rms", "young_female": "slt",
               "elderly_female": "slt", NARRATOR: "rms"}


def _f0_modulation(n: int, t: AgeTransform, rng: np.random.Generator) -> np.ndarray:
    frames = np.arange(n) * 0.005
    tremor = t.tremor * np.sin(2 * np.pi * 5.5 * frames)
    noise = np.convolve(rng.standard_normal(n), np.ones(4) / 4, mode="same") * t.jitter
    return np.asarray(np.exp(tremor + noise))


def apply_age(audio16: Audio, t: AgeTransform, seed: int = 0) -> Audio:
    """``audio16`` (16 kHz) with transform ``t`` applied in WORLD."""
    if t == AgeTransform():
        return np.asarray(audio16, np.float32)
    p = world_analyse(audio16, SR)
    rng = np.random.default_rng(seed)
    f0 = np.where(p.f0 > 0, p.f0 * t.f0_scale * _f0_modulation(len(p.f0), t, rng), 0.0)
    sp = warp_envelope(p.sp, t.formant_alpha) if t.formant_alpha != 1.0 else p.sp
    freqs = np.linspace(0, SR / 2, p.ap.shape[1])
    ap = np.clip(p.ap + t.breath * (1 - p.ap) * (freqs >= 1000)[None, :], 0.0, 1.0)
    params = replace(p, f0=f0, sp=sp, ap=ap)
    params = retime_world(params, max(1, round(len(f0) / t.rate)))
    return world_synthesise(params)


class ReferenceVoices:
    """VoiceTTS reference: flite voices plus the WORLD age transform, per profile."""

    slug = "ref-deaf-voices"
    version = "1"
    reference = True
    tools = ("flite",)

    def synthesise(self, text: str, profile: str, sample_rate: Hertz, seed: int = 0) -> Audio:
        if profile not in AGE_TRANSFORMS:
            raise ConfigError(f"{self.slug}: unknown voice profile {profile!r}; known: "
                              f"{', '.join(AGE_TRANSFORMS)}")
        speech = speak("flite", BASE_VOICES[profile], text)
        out = apply_age(speech, AGE_TRANSFORMS[profile], seed)
        return normalise(resample(out, SR, sample_rate), LEVEL_DBFS)
