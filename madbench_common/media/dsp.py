"""Shared DSP helpers: resampling, levels, WSOLA time-stretch, speech placement, WORLD analysis.

Everything takes and returns mono float32 audio (see :data:`madbench_common.core.types.Audio`)
unless it says otherwise. WORLD (pyworld) helpers work in float64 as pyworld does.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import fft as sp_fft
from scipy.signal import lfilter
from scipy.signal.windows import hann

from madbench_common.core.compat import zip_strict
from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.media.audio import rms_dbfs

__all__ = [
    "WorldParams",
    "analytic_subbands",
    "band_noise",
    "band_profile",
    "decay_train",
    "erb_filterbank",
    "estimate_warp",
    "event_onsets",
    "f0_log_stats",
    "f0_track",
    "fit_length",
    "harmonic_tone",
    "impose_envelope_stats",
    "map_f0",
    "mean_log_envelope",
    "modulation_power",
    "n_samples",
    "normalise",
    "place_in_regions",
    "resonator_bank",
    "retime_world",
    "smooth_random",
    "time_stretch",
    "trim_silence",
    "warp_envelope",
    "world_analyse",
    "world_synthesise",
]

Array = npt.NDArray[np.floating[Any]]
_EPS = 1e-12


def _pyworld() -> Any:
    """pyworld, imported on first use: model images that only place speech need not ship it."""
    with warnings.catch_warnings():  # pyworld imports pkg_resources, which warns
        warnings.simplefilter("ignore")
        import pyworld
    return pyworld


def n_samples(duration: Seconds, sample_rate: Hertz) -> int:
    """The exact sample count for ``duration``: ``round(duration * sample_rate)``."""
    return round(duration * sample_rate)


def fit_length(audio: npt.NDArray[np.floating], n: int) -> Audio:
    """Trim or zero-pad ``audio`` to exactly ``n`` samples."""
    out = np.zeros(n, dtype=np.float32)
    m = min(n, len(audio))
    out[:m] = audio[:m]
    return out


def normalise(audio: npt.NDArray[np.floating], target_dbfs: float = -26.0,
              peak: float = 0.95) -> Audio:
    """Scale to ``target_dbfs`` RMS, then down to ``peak`` if it would clip."""
    x = np.asarray(audio, dtype=np.float64)
    level = rms_dbfs(x.astype(np.float32))
    if level <= -100.0:
        return x.astype(np.float32)
    x = x * 10.0 ** ((target_dbfs - level) / 20.0)
    top = float(np.max(np.abs(x)))
    return (x * (peak / top if top > peak else 1.0)).astype(np.float32)


def _frame_rms(x: npt.NDArray[np.floating], hop: int) -> Array:
    n = max(len(x) // hop, 1)
    frames = np.asarray(x[: n * hop], np.float64).reshape(n, -1) if len(x) >= hop else \
        np.asarray(x, np.float64)[None, :]
    return np.sqrt(np.mean(frames**2, axis=1) + _EPS)


def trim_silence(audio: Audio, sample_rate: Hertz, floor_db: float = -40.0) -> Audio:
    """Drop leading/trailing 10 ms frames more than ``floor_db`` below the loudest."""
    hop = max(sample_rate // 100, 1)
    rms = _frame_rms(audio, hop)
    active = np.flatnonzero(20 * np.log10(rms / rms.max()) > floor_db)
    if len(active) == 0:
        return np.asarray(audio, np.float32)
    return np.asarray(audio[active[0] * hop: (active[-1] + 1) * hop], np.float32)


def time_stretch(audio: Audio, n_out: int, sample_rate: Hertz) -> Audio:
    """WSOLA time-scale modification to exactly ``n_out`` samples, pitch unchanged."""
    x = np.asarray(audio, np.float64)
    win = 2 * max(int(0.015 * sample_rate), 8)
    if n_out <= 0:
        return np.zeros(0, np.float32)
    if len(x) < 2 * win or n_out < 2 * win:
        grid = np.linspace(0, max(len(x) - 1, 0), n_out)
        return np.interp(grid, np.arange(len(x)), x).astype(np.float32) if len(x) else \
            np.zeros(n_out, np.float32)
    return _wsola(x, n_out, win, max(int(0.008 * sample_rate), 1))


def _wsola(x: Array, n_out: int, win: int, tol: int) -> Audio:
    hop = win // 2
    w = hann(win, sym=False)
    xp = np.pad(x, (tol, win + tol + hop))
    y, norm = np.zeros(n_out + win), np.zeros(n_out + win)
    rate, prev = len(x) / n_out, 0
    for k, out_pos in enumerate(range(0, n_out, hop)):
        nominal = min(round(out_pos * rate), len(x) - 1)
        pos = nominal if k == 0 else _best_offset(xp, nominal, prev + hop, win, tol)
        y[out_pos: out_pos + win] += xp[pos + tol: pos + tol + win] * w
        norm[out_pos: out_pos + win] += w
        prev = pos
    return (y[:n_out] / np.maximum(norm[:n_out], 1e-3)).astype(np.float32)


def _best_offset(xp: Array, nominal: int, natural: int, win: int, tol: int) -> int:
    region = xp[nominal: nominal + 2 * tol + win]
    template = xp[natural + tol: natural + tol + win]
    if len(template) < win or len(region) < win:
        return nominal
    return nominal - tol + int(np.argmax(np.correlate(region, template, mode="valid")))


def place_in_regions(speech: Audio, starts: Sequence[Seconds], ends: Sequence[Seconds],
                     sample_rate: Hertz, total: int) -> Audio:
    """Fit ``speech`` into regions ``[starts[i], ends[i])`` (s) of a ``total``-sample track.

    Leading/trailing silence of ``speech`` is trimmed, the rest is cut at low-energy
    points in proportion to the region lengths, and each piece is WSOLA-stretched to
    its region (10 ms fades at the edges). Outside the regions the track is silent.
    """
    out = np.zeros(total, np.float32)
    spans = sorted((max(0, n_samples(s, sample_rate)), min(total, n_samples(e, sample_rate)))
                   for s, e in zip_strict(starts, ends))
    spans = [(s, e) for s, e in spans if e > s]
    core = trim_silence(speech, sample_rate) if len(speech) else speech
    if not spans or len(core) == 0:
        return out
    cuts = _split_points(core, [e - s for s, e in spans], sample_rate)
    fade = max(sample_rate // 100, 1)
    for (s, e), a, b in zip_strict(spans, cuts[:-1], cuts[1:]):
        out[s:e] = _fade_edges(time_stretch(core[a:b], e - s, sample_rate), fade)
    return out


def _split_points(x: Audio, lengths: Sequence[int], sample_rate: Hertz) -> list[int]:
    """Cut points (len(lengths) + 1 of them) near proportional positions, snapped to pauses."""
    hop = max(sample_rate // 100, 1)
    rms = _frame_rms(x, hop)
    targets = np.cumsum(lengths)[:-1] / float(sum(lengths)) * len(x)
    reach = max(int(0.2 * len(x) / len(lengths)), 1)
    cuts = [0]
    for t in targets:
        lo = max(cuts[-1] + 1, int(t) - reach)
        hi = max(min(len(x) - 1, int(t) + reach), lo + 1)
        frames = np.arange(lo // hop, min(hi // hop + 1, len(rms)))
        best = int(frames[np.argmin(rms[frames])]) * hop if len(frames) else lo
        cuts.append(int(np.clip(best, lo, len(x) - 1)))
    cuts.append(len(x))
    return cuts


def _fade_edges(x: Audio, n: int) -> Audio:
    n = min(n, len(x) // 2)
    if n > 0:
        ramp = np.linspace(0.0, 1.0, n, dtype=np.float32)
        x[:n] *= ramp
        x[-n:] *= ramp[::-1]
    return x


def band_noise(n: int, sample_rate: Hertz, lo: float, hi: float,
               rng: np.random.Generator) -> Array:
    """Gaussian noise band-limited to ``[lo, hi]`` Hz (FFT mask, 1/3-octave cosine skirts)."""
    spec = np.fft.rfft(rng.standard_normal(max(n, 2)))
    freqs = np.fft.rfftfreq(max(n, 2), 1.0 / sample_rate)
    spec *= band_profile(freqs, lo, hi)
    y = np.fft.irfft(spec, max(n, 2))[:n]
    return y / (np.std(y) + _EPS)


def band_profile(freqs: Array, lo: float, hi: float) -> Array:
    """A pass band ``[lo, hi]`` Hz with raised-cosine skirts one third of an octave wide."""
    lf = np.log2(np.maximum(freqs, 1.0))
    lo_l, hi_l = np.log2(max(lo, 1.0)), np.log2(max(hi, lo + 1.0))
    rise = np.clip((lf - lo_l) / (1 / 3) + 1, 0, 1)
    fall = np.clip((hi_l - lf) / (1 / 3) + 1, 0, 1)
    return np.asarray(np.sin(np.pi / 2 * rise) ** 2 * np.sin(np.pi / 2 * fall) ** 2)


def smooth_random(n: int, rate: float, sample_rate: float, rng: np.random.Generator) -> Array:
    """A smooth random curve in [0, 1] whose fluctuations are about ``rate`` Hz."""
    knots = max(int(n / sample_rate * rate) + 3, 3)
    values = rng.uniform(0.0, 1.0, knots)
    grid = np.linspace(0, knots - 1, n)
    return np.interp(grid, np.arange(knots), values) if rate > 0 else np.full(n, 0.5)


def event_onsets(n: int, rate_sr: float, rate: float, rng: np.random.Generator,
                 drive: Array, regular: bool) -> npt.NDArray[np.int64]:
    """Event positions (Poisson, or ``regular`` with 3% jitter) at ``rate`` per second.

    ``n`` and the result are in units of ``rate_sr`` (samples or frames per second);
    each event is kept with probability ``drive[pos]`` (``drive`` in [0, 1]).
    """
    if regular:
        period = rate_sr / rate
        pos = np.arange(rng.uniform(0, period), n, period)
        pos = pos + rng.normal(0, 0.03 * period, len(pos))
    else:
        pos = rng.uniform(0, n, rng.poisson(rate * n / rate_sr))
    pos = np.clip(pos, 0, n - 1).astype(np.int64)
    return pos[rng.uniform(0, 1, len(pos)) < drive[pos]]


def decay_train(n: int, pos: npt.NDArray[np.int64], decay_samples: float,
                rng: np.random.Generator) -> Array:
    """Random-amplitude impulses at ``pos`` through a one-pole exponential decay."""
    imp = np.zeros(n)
    np.add.at(imp, pos, rng.uniform(0.4, 1.0, len(pos)))
    a = np.exp(-1.0 / max(decay_samples, 0.5))
    return np.asarray(lfilter([1.0], [1.0, -a], imp))


def resonator_bank(imp: Array, freqs: Array, decay: float, sr: float) -> Array:
    """``imp`` through two-pole resonators at ``freqs`` (Hz), the k-th at gain 1/(k+1)."""
    r = np.exp(-1.0 / (decay * sr))
    out = np.zeros_like(imp)
    for k, f in enumerate(freqs):
        w = 2 * np.pi * f / sr
        out += lfilter([1 - r], [1, -2 * r * np.cos(w), r * r], imp) / (k + 1)
    return out


def harmonic_tone(n: int, sr: float, f0: float, fmax: float, rng: np.random.Generator) -> Array:
    """A harmonic tone at ``f0`` (1% slow vibrato), partials 1/k up to ``fmax``."""
    freq = f0 * (1 + 0.01 * (smooth_random(n, 0.5, sr, rng) - 0.5))
    phase = 2 * np.pi * np.cumsum(freq) / sr
    top = int(min(fmax, 0.45 * sr) // f0)
    return np.asarray(sum(np.sin(k * phase + rng.uniform(0, 2 * np.pi)) / k
                          for k in range(1, max(top, 1) + 1)))


def erb_filterbank(n: int, sample_rate: Hertz, n_bands: int = 30) -> Array:
    """Half-cosine filters equally spaced on the ERB scale, for an ``n``-point real FFT.

    Shape ``(n_bands, n // 2 + 1)``; the squared responses sum to one at every
    frequency, so analysis followed by synthesis with the same filters is exact.
    """
    def erb(f: Array) -> Array:
        return np.asarray(21.4 * np.log10(1 + 0.00437 * f))

    e = erb(np.fft.rfftfreq(n, 1.0 / sample_rate))
    centers = np.linspace(erb(np.array(20.0)), e[-1], n_bands)
    width = centers[1] - centers[0]
    bank = np.cos(np.clip((e[None, :] - centers[:, None]) / width, -1, 1) * np.pi / 2)
    bank[0, e < centers[0]] = 1.0
    return bank / np.sqrt(np.sum(bank**2, axis=0, keepdims=True))


def analytic_subbands(x: Array, bank: Array) -> npt.NDArray[np.complex128]:
    """Analytic signals of ``x`` filtered by each row of an FFT-domain ``bank``.

    The same as ``scipy.signal.hilbert`` of each band's real signal, taken straight
    from the band's one-sided spectrum (one inverse FFT per band instead of three FFTs).
    """
    n = len(x)
    half = sp_fft.rfft(np.asarray(x, np.float64))[None, :] * bank  # float64 as np.fft
    half[:, 1: (n + 1) // 2] *= 2.0  # positive frequencies doubled; DC and Nyquist kept
    full = np.zeros((len(bank), n), np.complex128)
    full[:, : half.shape[1]] = half
    return np.asarray(sp_fft.ifft(full, axis=1, overwrite_x=True))


_MOD_EDGES = np.array([0.0, 0.5, 1, 2, 4, 8, 16, 32, 64, 1e9])
"""Octave modulation bands (Hz) for envelope modulation spectra."""


@lru_cache(maxsize=8)
def _mod_bands(n: int, sample_rate: float) -> tuple[npt.NDArray[np.intp], Array]:
    """Modulation band of each rfft bin of an ``n``-point envelope, and the
    bin-to-band averaging matrix (``(bins, bands)``: 1 / bins-in-band where it belongs)."""
    idx = np.digitize(np.fft.rfftfreq(n, 1 / sample_rate), _MOD_EDGES) - 1
    counts = np.maximum(np.bincount(idx, minlength=len(_MOD_EDGES)), 1)
    average = np.zeros((len(idx), len(_MOD_EDGES)))
    average[np.arange(len(idx)), idx] = 1.0 / counts[idx]
    idx.flags.writeable = average.flags.writeable = False
    return idx, average


def _band_power(spec: npt.NDArray[np.complex128], n: int, sample_rate: float) -> Array:
    return np.asarray((np.abs(spec) ** 2) @ _mod_bands(n, sample_rate)[1])


def modulation_power(env: Array, sample_rate: float) -> Array:
    """Mean modulation power of an envelope in octave bands (``_MOD_EDGES``).

    ``env`` may be a stack of envelopes (``(..., n)``); the bands are the last axis.
    """
    env = np.asarray(env, np.float64)
    spec = sp_fft.rfft(env - env.mean(axis=-1, keepdims=True), axis=-1)
    return _band_power(spec, env.shape[-1], sample_rate)


def impose_envelope_stats(env: Array, quantiles: Array, mod: Array,
                          sample_rate: float) -> Array:
    """Give ``env`` the modulation power ``mod``, then the distribution ``quantiles``.

    Works on one envelope or on a stack (``env`` ``(..., n)``, ``quantiles`` ``(..., q)``,
    ``mod`` ``(..., len(_MOD_EDGES))``), each row with its own statistics.
    """
    env = np.asarray(env, np.float64)
    n = env.shape[-1]
    mean = env.mean(axis=-1, keepdims=True)
    spec = sp_fft.rfft(env - mean, axis=-1)
    idx, _ = _mod_bands(n, sample_rate)
    spec *= np.sqrt(mod / np.maximum(_band_power(spec, n, sample_rate), 1e-20))[..., idx]
    shaped = sp_fft.irfft(spec, n, axis=-1) + mean
    grid, ranks = np.linspace(0, 1, quantiles.shape[-1]), np.linspace(0.0, 1.0, n)
    values = np.stack([np.interp(ranks, grid, q)
                       for q in np.reshape(quantiles, (-1, quantiles.shape[-1]))])
    out = np.empty_like(shaped)
    np.put_along_axis(out, np.argsort(shaped, axis=-1), values.reshape(shaped.shape), axis=-1)
    return out


@dataclass(frozen=True)
class WorldParams:
    """WORLD vocoder parameters: F0 (Hz, 0 = unvoiced), spectral envelope, aperiodicity."""

    f0: Array
    sp: Array
    ap: Array
    sample_rate: Hertz
    frame_period: float = 5.0


def f0_track(audio: Array, sample_rate: Hertz, frame_period: float = 5.0) -> Array:
    """F0 contour (Hz, 0 = unvoiced) by WORLD's DIO refined with StoneMask."""
    pyworld = _pyworld()
    x = np.ascontiguousarray(audio, dtype=np.float64)
    f0, t = pyworld.dio(x, sample_rate, f0_floor=60.0, f0_ceil=500.0, frame_period=frame_period)
    return np.asarray(pyworld.stonemask(x, f0, t, sample_rate))


def world_analyse(audio: Audio, sample_rate: Hertz, frame_period: float = 5.0) -> WorldParams:
    """WORLD analysis: DIO + StoneMask F0, CheapTrick envelope, D4C aperiodicity."""
    x = np.ascontiguousarray(audio, dtype=np.float64)
    f0 = f0_track(x, sample_rate, frame_period)
    t = np.arange(len(f0)) * frame_period / 1000.0
    pyworld = _pyworld()
    sp = pyworld.cheaptrick(x, f0, t, sample_rate)
    ap = pyworld.d4c(x, f0, t, sample_rate)
    return WorldParams(f0, sp, ap, sample_rate, frame_period)


def world_synthesise(params: WorldParams) -> Audio:
    """WORLD synthesis of ``params`` (float32)."""
    y = _pyworld().synthesize(np.ascontiguousarray(params.f0), np.ascontiguousarray(params.sp),
                           np.ascontiguousarray(params.ap), params.sample_rate,
                           params.frame_period)
    return y.astype(np.float32)


def retime_world(params: WorldParams, n_frames: int) -> WorldParams:
    """Uniformly time-scale WORLD parameters to ``n_frames`` frames (pitch unchanged)."""
    n = len(params.f0)
    pos = np.linspace(0.0, n - 1.0, max(n_frames, 1))
    idx = np.arange(n)
    voiced = params.f0 > 0
    logf0 = np.log(np.where(voiced, params.f0, 1.0))
    filled = np.interp(idx, idx[voiced], logf0[voiced]) if voiced.any() else logf0
    f0 = np.where(voiced[np.rint(pos).astype(int)], np.exp(np.interp(pos, idx, filled)), 0.0)
    lo = np.floor(pos).astype(int)
    hi, frac = np.minimum(lo + 1, n - 1), (pos - lo)[:, None]
    log_sp = np.log(params.sp + _EPS)
    sp = np.exp(log_sp[lo] * (1 - frac) + log_sp[hi] * frac)
    ap = params.ap[lo] * (1 - frac) + params.ap[hi] * frac
    return replace(params, f0=f0, sp=sp, ap=np.clip(ap, 0.0, 1.0))


def f0_log_stats(f0: Array) -> tuple[float, float]:
    """Mean and standard deviation of log F0 over voiced frames (ValueError if none)."""
    voiced = np.log(f0[f0 > 0])
    if len(voiced) < 5:
        raise ValueError("fewer than 5 voiced frames: no usable F0")
    return float(voiced.mean()), float(max(voiced.std(), 1e-3))


def map_f0(f0: Array, source: tuple[float, float], target: tuple[float, float]) -> Array:
    """Gaussian log-F0 mapping from ``source`` (mean, std) statistics to ``target``'s."""
    logf = np.log(np.where(f0 > 0, f0, 1.0))
    mapped = np.exp((logf - source[0]) / source[1] * target[1] + target[0])
    return np.where(f0 > 0, np.clip(mapped, 50.0, 600.0), 0.0)


def mean_log_envelope(sp: Array, f0: Array) -> Array:
    """Average log spectral envelope over voiced frames (all frames when none are voiced)."""
    frames = sp[f0 > 0] if np.count_nonzero(f0 > 0) >= 5 else sp
    return np.asarray(np.mean(np.log(frames + _EPS), axis=0))


def warp_envelope(sp: Array, alpha: float) -> Array:
    """Linear frequency warp of envelopes: ``new(f) = old(f / alpha)`` (alpha>1 raises formants)."""
    bins = np.arange(sp.shape[1], dtype=np.float64)
    src = np.clip(bins / alpha, 0, sp.shape[1] - 1)
    log_sp = np.log(sp + _EPS)
    return np.exp(np.stack([np.interp(src, bins, row) for row in log_sp]))


def estimate_warp(source_env: Array, target_env: Array, sample_rate: Hertz,
                  alphas: Sequence[float] = tuple(np.linspace(0.8, 1.25, 46))) -> float:
    """The warp factor that best aligns the source's mean log envelope with the target's.

    The score is the correlation of the mean-removed log envelopes over 150–5000 Hz.
    """
    bins = np.arange(len(source_env))
    freqs = bins * sample_rate / (2.0 * (len(source_env) - 1))
    band = (freqs > 150) & (freqs < min(5000.0, sample_rate / 2 - 100))
    tgt = target_env[band] - target_env[band].mean()
    scores = []
    for a in alphas:
        w = np.interp(np.clip(bins / a, 0, len(bins) - 1), bins, source_env)[band]
        scores.append(float(np.dot(w - w.mean(), tgt)) / (np.linalg.norm(w - w.mean()) + _EPS))
    return float(alphas[int(np.argmax(scores))])
