"""Applying one robustness condition to one track: the chain, then back to the track's rate.

:func:`apply_condition` runs a
:class:`~madbench_common.benchmarks.madbench.robustness.conditions.Condition`'s steps in
order and returns audio of the input's rate and length, with a record of what each step
was asked for and what was measured.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.signal import butter, sosfiltfilt

from madbench_common.benchmarks.madbench.robustness.conditions import Condition, Step
from madbench_common.benchmarks.madbench.robustness.noise import NoiseSet, mix_at_snr
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.media.transcode import decode_encoded, encode_audio

__all__ = ["apply_condition"]

Record = dict[str, Any]


def _codec(audio: Audio, rate: Hertz, step: Step) -> tuple[Audio, Hertz, Record]:
    spec = step.codec_spec()
    encoded = encode_audio(audio, rate, spec)
    out_rate = 48000 if spec.codec == "opus" else encoded.sample_rate
    return decode_encoded(encoded, out_rate), out_rate, encoded.params()


def _bandpass(audio: Audio, rate: Hertz, step: Step) -> Audio:
    low, high = float(step.get("low")), min(float(step.get("high")), 0.45 * rate)
    sos = butter(4, [low, high], btype="bandpass", fs=rate, output="sos")
    return np.asarray(sosfiltfilt(sos, audio.astype(np.float64)), dtype=np.float32)


def _noise(audio: Audio, rate: Hertz, step: Step, noise: NoiseSet,
           key: str) -> tuple[Audio, Record]:
    entry, offset, excerpt = noise.excerpt(key, audio.size, rate)
    mixed, achieved = mix_at_snr(audio, excerpt, float(step.get("snr_db")))
    return mixed, {"noise": entry.name, "noise_file": entry.file,
                   "noise_sha256": entry.sha256, "noise_offset_s": round(offset, 4),
                   "measured_snr_db": round(achieved, 3)}


def _run_step(audio: Audio, rate: Hertz, step: Step, noise: NoiseSet | None,
              key: str) -> tuple[Audio, Hertz, Record]:
    if step.op == "codec":
        return _codec(audio, rate, step)
    if step.op == "resample":
        target = int(step.get("sample_rate"))
        return resample(audio, rate, target), target, {}
    if step.op == "bandpass":
        return _bandpass(audio, rate, step), rate, {"order": 4, "phase": "zero"}
    if noise is None:
        raise ValueError("a noise step needs a noise set")
    mixed, rec = _noise(audio, rate, step, noise, key)
    return mixed, rate, rec


def apply_condition(audio: Audio, sample_rate: Hertz, condition: Condition, *,
                    noise: NoiseSet | None = None, noise_key: str = "") -> tuple[Audio, Record]:
    """``condition`` applied to ``audio``; the result (same rate and length) and its record.

    ``noise_key`` seeds the noise excerpt (use the run seed and the clip id). The steps run
    in order on mono float audio, carrying the current sample rate from step to step (a
    codec decodes at its own output rate, a resample changes it); the result is resampled
    back to the input's rate, trimmed or zero-padded to the input's length (codec priming
    and padding; every step is aligned to within a few samples, which the tests check) and
    limited to [−1, 1] as a 16-bit file would be. The record has one entry per step: what it
    was asked for and, for codecs and noise, what was measured on its output (codec, sample
    rate, bitrate; noise file, sha256, offset, achieved SNR).
    """
    x, rate = np.asarray(audio, dtype=np.float32), sample_rate
    steps = []
    for step in condition.chain:
        x, rate, measured = _run_step(x, rate, step, noise, noise_key)
        steps.append(step.as_dict() | measured | {"rate_after": rate})
    x = resample(x, rate, sample_rate)
    length = int(x.size)
    x = np.pad(x, (0, max(0, audio.size - x.size)))[: audio.size]
    clipped = float(np.mean(np.abs(x) > 1.0))
    x = np.clip(x, -1.0, 1.0).astype(np.float32)
    return x, {"condition": condition.name, "family": condition.family, "steps": steps,
               "sample_rate": sample_rate, "length_before_fit": length,
               "length": int(audio.size), "clipped_fraction": clipped}
