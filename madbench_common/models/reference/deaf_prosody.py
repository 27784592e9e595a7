"""CPU reference emotional TTS for ESC: a neutral TTS voice re-prosodised per emotion in WORLD.

The paper's ESC clips are EMIS's (three expressive, reference-prompted TTS systems;
Appendix A.2.1). Offline, each of three settings speaks the sentence with one Debian
voice ((a) flite ``slt``, (b) flite ``rms``, (c) espeak-ng ``en-us+m3``) and changes F0,
F0 range, speaking rate, level and spectral tilt in WORLD (:class:`Prosody`). The clips
are labelled as references.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.media.dsp import normalise, retime_world, world_analyse, world_synthesise
from madbench_common.models.reference.deaf_voices import SR, speak

__all__ = ["EMOTION_PROSODY", "ESC_VOICES", "Prosody", "ReferenceEmotionTTS",
           "ReferenceEmotionTTSA", "ReferenceEmotionTTSB", "ReferenceEmotionTTSC",
           "apply_prosody"]

_LEVEL_DBFS = -26.0


@dataclass(frozen=True)
class Prosody:
    """One emotion's WORLD modification, following the direction of the acoustic correlates
    in Murray & Arnott (1993, Table 1):

    =========  =======  ========  =====  ========  ===========
    emotion    F0 ×     range ×   rate   level dB  tilt dB/oct
    =========  =======  ========  =====  ========  ===========
    neutral    1.00     1.0       1.00    0         0
    angry      1.15     1.5       1.12   +6        +3
    happy      1.25     1.6       1.08   +3        +1.5
    sad        0.88     0.55      0.82   −6        −3
    =========  =======  ========  =====  ========  ===========

    F0 is scaled about the utterance's mean log F0 (range × deviation); tilt is a gain per
    octave relative to 1 kHz; sadness also gets a falling F0 declination (−8 % over the
    utterance) and slight breathiness. The magnitudes are this project's choice (the paper
    uses real expressive TTS, not a transform).
    """

    f0_scale: float = 1.0
    f0_range: float = 1.0
    rate: float = 1.0
    level_db: float = 0.0
    tilt_db: float = 0.0
    declination: float = 0.0
    breath: float = 0.0


EMOTION_PROSODY = {
    "neutral": Prosody(),
    "angry": Prosody(1.15, 1.5, 1.12, 6.0, 3.0),
    "happy": Prosody(1.25, 1.6, 1.08, 3.0, 1.5),
    "sad": Prosody(0.88, 0.55, 0.82, -6.0, -3.0, declination=-0.08, breath=0.2),
}
ESC_VOICES = {"a": ("flite", "slt"), "b": ("flite", "rms"), "c": ("espeak-ng", "en-us+m3")}
"""The three offline TTS settings: (engine, voice)."""


def _tilt(n_bins: int, tilt_db: float) -> np.ndarray:
    freqs = np.maximum(np.linspace(0, SR / 2, n_bins), 125.0)
    return np.asarray(10.0 ** (tilt_db * np.log2(freqs / 1000.0) / 10.0))  # power envelope


def apply_prosody(audio16: Audio, p: Prosody) -> Audio:
    """``audio16`` (16 kHz) re-prosodised by ``p`` in WORLD, normalised to the emotion's level."""
    if p != Prosody():
        w = world_analyse(audio16, SR)
        voiced = w.f0 > 0
        logf = np.log(np.where(voiced, w.f0, 1.0))
        mean = float(logf[voiced].mean()) if voiced.any() else 0.0
        trend = p.declination * np.linspace(0.0, 1.0, len(logf))
        f0 = np.where(voiced, np.exp(mean + np.log(p.f0_scale) + p.f0_range * (logf - mean)
                                     + trend), 0.0)
        sp = w.sp * _tilt(w.sp.shape[1], p.tilt_db)[None, :]
        freqs = np.linspace(0, SR / 2, w.ap.shape[1])
        ap = np.clip(w.ap + p.breath * (1 - w.ap) * (freqs >= 1500)[None, :], 0.0, 1.0)
        w = replace(w, f0=np.clip(f0, 50.0, 600.0) * voiced, sp=sp, ap=ap)
        audio16 = world_synthesise(retime_world(w, max(1, round(len(f0) / p.rate))))
    return normalise(audio16, _LEVEL_DBFS + p.level_db)


class ReferenceEmotionTTS:
    """EmotionalTTS reference for one ESC setting (``a``, ``b`` or ``c``)."""

    version = "1"
    reference = True

    def __init__(self, setting: str = "a") -> None:
        if setting not in ESC_VOICES:
            raise ConfigError(f"ESC setting {setting!r} not in {sorted(ESC_VOICES)}")
        self.engine, self.voice = ESC_VOICES[setting]
        self.slug = f"ref-deaf-emotion-{setting}"

    def synthesise(self, text: str, emotion: str, sample_rate: Hertz, seed: int = 0) -> Audio:
        if emotion not in EMOTION_PROSODY:
            raise ConfigError(f"{self.slug}: unknown emotion {emotion!r}")
        speech = speak(self.engine, self.voice, text)
        return resample(apply_prosody(speech, EMOTION_PROSODY[emotion]), SR, sample_rate)


class ReferenceEmotionTTSA(ReferenceEmotionTTS):
    """ESC setting a: flite ``slt``."""

    tools = ("flite",)

    def __init__(self) -> None:
        super().__init__("a")


class ReferenceEmotionTTSB(ReferenceEmotionTTS):
    """ESC setting b: flite ``rms``."""

    tools = ("flite",)

    def __init__(self) -> None:
        super().__init__("b")


class ReferenceEmotionTTSC(ReferenceEmotionTTS):
    """ESC setting c: espeak-ng ``en-us+m3``."""

    tools = ("espeak-ng",)

    def __init__(self) -> None:
        super().__init__("c")
