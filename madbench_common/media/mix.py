"""Mixing of benchmark variants: source-relative levels, one mix path for R, S, E and Q.

Every variant is ``speech + env`` through :func:`mix_components`. A component that
replaces a source component is RMS-normalised to the level of the one it replaces
(fake speech to ŝ's level, fake environment to ê's), so component levels stay tied
to the source clip; the separated components of the real variant are passed through
at gain 0 dB (R = ŝ + ê ≈ x). Only when the sum would exceed ``ceiling`` is one
common gain applied to the whole mix (a static peak gain, not a dynamic limiter),
so the speech-to-environment ratio is never altered; :class:`Mix` records it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from madbench_common.core.types import Audio
from madbench_common.media.audio import rms_dbfs

__all__ = ["CEILING", "Mix", "fit_track", "level_gain_db", "mix_components"]

CEILING = 0.99
"""Largest absolute sample value a mix may reach before the common gain applies."""
_SILENT_DBFS = -100.0


@dataclass(frozen=True)
class Mix:
    """A mixed variant and the gains that made it (all in dB)."""

    audio: Audio
    speech_gain_db: float
    env_gain_db: float
    common_gain_db: float
    speech_target_dbfs: float
    """Level of the source component the speech track is tied to (ŝ's RMS)."""
    env_target_dbfs: float

    def speech_level_dbfs(self, speech: Audio) -> float:
        """RMS level of ``speech`` as it sits in this mix (both gains applied)."""
        return rms_dbfs(speech) + self.speech_gain_db + self.common_gain_db

    def env_level_dbfs(self, env: Audio) -> float:
        return rms_dbfs(env) + self.env_gain_db + self.common_gain_db


def level_gain_db(component: Audio, reference: Audio) -> float:
    """Gain (dB) that brings ``component``'s RMS to ``reference``'s; 0 when either is silent."""
    have, want = rms_dbfs(component), rms_dbfs(reference)
    if have <= _SILENT_DBFS or want <= _SILENT_DBFS:
        return 0.0
    return want - have


def _db(gain: float) -> float:
    return float(10.0 ** (gain / 20.0))


def mix_components(speech: Audio, env: Audio, ref_speech: Audio, ref_env: Audio,
                   ceiling: float = CEILING) -> Mix:
    """``speech`` + ``env`` with each levelled to its source component, peak-safe.

    All four inputs must have the same length. Pass ``speech is ref_speech`` (or equal
    arrays) for an authentic component; its gain is then exactly 0 dB.
    """
    n = len(ref_speech)
    if not (len(speech) == len(env) == len(ref_env) == n):
        raise ValueError(f"component lengths differ: {len(speech)}, {len(env)}, "
                         f"{len(ref_speech)}, {len(ref_env)}")
    g_s = 0.0 if speech is ref_speech else level_gain_db(speech, ref_speech)
    g_e = 0.0 if env is ref_env else level_gain_db(env, ref_env)
    out = speech.astype(np.float64) * _db(g_s) + env.astype(np.float64) * _db(g_e)
    peak = float(np.max(np.abs(out), initial=0.0))
    common = 20.0 * np.log10(ceiling / peak) if peak > ceiling else 0.0
    audio = (out * _db(common)).astype(np.float32)
    return Mix(audio, g_s, g_e, float(common), rms_dbfs(ref_speech), rms_dbfs(ref_env))


def fit_track(track: Audio, n: int, fade: int = 160) -> Audio:
    """``track`` trimmed, or looped with ``fade``-sample crossfades, to exactly ``n`` samples.

    Used when a scene-mismatched environment is borrowed from a clip of another length.
    """
    x = np.asarray(track, np.float32)
    if len(x) >= n or len(x) == 0:
        return np.pad(x, (0, max(0, n - len(x))))[:n].astype(np.float32)
    fade = min(fade, len(x) // 4)
    out = x.copy()
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32) if fade else np.zeros(0, np.float32)
    while len(out) < n:
        if fade:
            head = x[:fade] * ramp + out[-fade:] * ramp[::-1]
            out = np.concatenate([out[:-fade], head, x[fade:]])
        else:
            out = np.concatenate([out, x])
    return out[:n]
