"""CPU reference environmental-audio generators: procedural, spectral, texture and STFT resynthesis.

Stand-ins for the paper's environmental-sound generators, labelled as references
(:class:`_EnvBase`). ``t2a``: a time-domain procedural synthesiser (:class:`LayeredT2A`) or
a subtractive STFT synthesiser (:class:`SpectralT2A`) of the sounds the prompt names (or
its scene's); ``v2a``: the same two driven by video motion and brightness
(:func:`video_drive`); ``a2a``: McDermott–Simoncelli-style texture resynthesis
(:class:`TextureA2A`) or phase-randomised STFT block resynthesis (:class:`StftMorphA2A`)
of the source track, nudged towards the prompt's scene.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import fft as sp_fft
from scipy.signal import butter, istft, sosfiltfilt, stft

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.media.audio import rms_dbfs
from madbench_common.media.dsp import (
    analytic_subbands,
    band_noise,
    band_profile,
    decay_train,
    erb_filterbank,
    event_onsets,
    fit_length,
    harmonic_tone,
    impose_envelope_stats,
    modulation_power,
    n_samples,
    normalise,
    resonator_bank,
    smooth_random,
)
from madbench_common.models.roles import Frames
from madbench_common.models.taxonomy import assign_label, find_sounds, load_taxonomy

__all__ = [
    "SOUND_RECIPES",
    "LayeredT2A",
    "LayeredV2A",
    "SpectralT2A",
    "SpectralV2A",
    "StftMorphA2A",
    "TextureA2A",
    "scene_sounds",
    "video_drive",
]

Array = npt.NDArray[np.floating[Any]]
_LEVEL_DBFS = -30.0
_PEAK = 0.89
_MAX_SOUNDS = 6


class _Sound(NamedTuple):
    """One synthesis layer. ``lo``/``hi``: band, fundamental/top partial, or sweep range (Hz);
    ``rate``: modulation rate or events per second; ``span``: modulation depth (bed, hum)
    or decay/on-time in seconds (events)."""

    kind: str
    lo: float
    hi: float
    rate: float
    span: float
    level: float = -6.0
    regular: bool = False


S = _Sound
SOUND_RECIPES: dict[str, tuple[_Sound, ...]] = {
    "air_conditioning": (S("bed", 80, 2000, 0.1, 0.1), S("hum", 100, 600, 0.1, 0.0, -18)),
    "appliance_hum": (S("hum", 60, 600, 0.2, 0.2, -10),),
    "applause": (S("burst", 900, 7000, 40, 0.012, -6),),
    "ball_bounce": (S("burst", 100, 1500, 0.7, 0.07),),
    "beeping": (S("tone", 1000, 3000, 0.8, 0.15, -12, True),),
    "birdsong": (S("chirp", 2500, 6500, 3.0, 0.09, -8),),
    "boat_engine": (S("hum", 22, 800, 0.3, 0.4), S("bed", 60, 900, 0.2, 0.3, -10)),
    "brakes_squeal": (S("tone", 3400, 3600, 0.1, 0.9, -14),),
    "cabin_drone": (S("bed", 40, 700, 0.05, 0.05, -3), S("hum", 95, 500, 0.05, 0.0, -16)),
    "car_engine": (S("hum", 30, 1500, 0.3, 0.3),),
    "car_horn": (S("tone", 420, 2000, 0.08, 0.5, -12),),
    "cart_rolling": (S("bed", 100, 2500, 6.0, 0.6, -10),),
    "cash_register_beep": (S("tone", 2800, 2900, 0.5, 0.12, -14),),
    "chime": (S("bell", 880, 6000, 0.1, 1.2, -10),),
    "church_bells": (S("bell", 330, 4000, 0.5, 2.5, -6, True),),
    "clock_ticking": (S("burst", 2000, 6000, 1.0, 0.006, -10, True),),
    "coffee_machine": (S("hum", 120, 3000, 0.5, 0.5, -8),),
    "dishes_clinking": (S("ring", 2000, 6000, 1.5, 0.12, -8),),
    "door_closing": (S("burst", 50, 600, 0.08, 0.2, -4),),
    "dripping": (S("ring", 800, 2500, 1.2, 0.04, -10, True),),
    "drilling": (S("hum", 90, 5000, 0.3, 0.5, -8),),
    "electrical_hum": (S("hum", 50, 1000, 0.05, 0.0, -14),),
    "fan_whir": (S("hum", 120, 1500, 0.1, 0.6, -10), S("bed", 200, 4000, 0.2, 0.1, -12)),
    "fire_crackling": (S("burst", 800, 6000, 8.0, 0.004, -6), S("bed", 60, 400, 0.5, 0.5, -12)),
    "footsteps": (S("burst", 80, 1500, 1.8, 0.05, -6, True),),
    "hair_dryer": (S("bed", 300, 7000, 0.1, 0.1, -6), S("hum", 180, 2000, 0.1, 0.3, -14)),
    "hammering": (S("burst", 200, 3000, 2.5, 0.04, -4, True), S("ring", 800, 2000, 2.5, 0.1, -12)),
    "horn": (S("tone", 180, 1200, 0.05, 1.5, -10),),
    "insects": (S("buzz", 4500, 4700, 30.0, 0.0, -14),),
    "jet_engine": (S("bed", 100, 6000, 0.05, 0.3, -4), S("tone", 3000, 3100, 0.02, 40.0, -24)),
    "keyboard_typing": (S("burst", 1500, 6000, 7.0, 0.008, -8),),
    "lawn_mower": (S("hum", 55, 4000, 0.3, 0.4, -8),),
    "leaves_rustling": (S("bed", 1500, 8000, 1.5, 0.9, -10),),
    "machinery_hum": (S("hum", 50, 2000, 0.2, 0.3, -6),
                      S("burst", 200, 2000, 2.0, 0.03, -14, True)),
    "metal_clank": (S("ring", 400, 2500, 0.5, 0.3, -6),),
    "paper_rustling": (S("burst", 1500, 7000, 1.0, 0.15, -10),),
    "phone_ringing": (S("tone", 480, 1500, 0.15, 1.0, -14, True),),
    "power_saw": (S("hum", 110, 6000, 0.3, 0.6, -6),),
    "printer": (S("hum", 40, 2000, 1.0, 0.5, -10), S("burst", 500, 4000, 3.0, 0.02, -14)),
    "rail_clatter": (S("burst", 100, 2000, 1.6, 0.05, -4, True),),
    "rain": (S("burst", 1500, 9000, 150.0, 0.004, -6), S("bed", 800, 8000, 0.3, 0.2, -10)),
    "road_traffic": (S("bed", 40, 1500, 0.15, 0.7, -3), S("bed", 500, 4000, 0.15, 0.5, -12)),
    "school_bell": (S("tone", 900, 4000, 0.03, 2.0, -14),),
    "sizzling": (S("burst", 2000, 9000, 200.0, 0.003, -12), S("bed", 3000, 9000, 0.5, 0.3, -14)),
    "splashing": (S("burst", 300, 6000, 1.2, 0.3, -6),),
    "stream_flowing": (S("bed", 300, 5000, 4.0, 0.5, -6), S("ring", 800, 3000, 25.0, 0.01, -14)),
    "thunder": (S("burst", 20, 300, 0.05, 2.5, 0),),
    "tire_noise": (S("bed", 200, 2500, 0.3, 0.4, -6),),
    "train_rumble": (S("bed", 30, 800, 0.2, 0.4, -3), S("hum", 35, 400, 0.2, 0.3, -10)),
    "ventilation": (S("bed", 100, 3000, 0.2, 0.15, -6),),
    "water_lapping": (S("burst", 100, 1200, 1.5, 0.25, -6),),
    "water_running": (S("bed", 500, 6000, 2.0, 0.3, -6),),
    "waves": (S("bed", 60, 3000, 0.08, 0.9, -3),),
    "whistle": (S("tone", 3000, 3200, 0.2, 0.5, -14),),
    "wind": (S("bed", 100, 1200, 0.25, 0.8, -3),),
}
del S


def scene_sounds(prompt: str) -> list[str]:
    """The sounds to render for ``prompt``: vocabulary sounds it names, else its scene's."""
    sounds = find_sounds(prompt)
    if not sounds:
        sounds = list(load_taxonomy().fine[assign_label(prompt)].expected_sounds)
    return sounds[:_MAX_SOUNDS]


def _duration_samples(duration: Seconds, sample_rate: Hertz) -> int:
    n = n_samples(duration, sample_rate)
    if n <= 0:
        raise ConfigError(f"duration must be positive, got {duration}")
    return n


def _rng(seed: int, *keys: int) -> np.random.Generator:
    return np.random.default_rng([seed & 0xFFFFFFFF, *keys])


def _gates(n: int, sr: float, s: _Sound, rng: np.random.Generator, drive: Array) -> Array:
    on = np.zeros(n)
    for p in event_onsets(n, sr, s.rate, rng, drive, s.regular):
        on[p: p + int(s.span * sr)] = 1.0
    ramp = max(int(0.01 * sr), 1)
    return np.convolve(on, np.ones(ramp) / ramp, mode="same")


def _chirps(n: int, sr: float, s: _Sound, rng: np.random.Generator, drive: Array) -> Array:
    out = np.zeros(n)
    length = int(s.span * sr)
    t = np.arange(length) / sr
    for p in event_onsets(n, sr, s.rate, rng, drive, False):
        f1, f2 = rng.uniform(s.lo, s.hi, 2)
        sweep = np.sin(2 * np.pi * (f1 * t + (f2 - f1) * t**2 / (2 * s.span)))
        seg = sweep * np.hanning(length)
        out[p: p + length] += seg[: n - p]
    return out


def _layer(s: _Sound, n: int, sr: float, rng: np.random.Generator, drive: Array) -> Array:
    """Time-domain rendering of one layer (the layered synthesiser)."""
    if s.kind == "bed":
        mod = 1 - s.span + s.span * smooth_random(n, s.rate, sr, rng)
        return band_noise(n, int(sr), s.lo, s.hi, rng) * mod * (0.3 + 0.7 * drive)
    if s.kind == "burst":
        env = decay_train(n, event_onsets(n, sr, s.rate, rng, drive, s.regular), s.span * sr, rng)
        return band_noise(n, int(sr), s.lo, s.hi, rng) * env
    if s.kind in ("ring", "bell"):
        imp = decay_train(n, event_onsets(n, sr, s.rate, rng, drive, s.regular), 0.5, rng)
        freqs = rng.uniform(s.lo, s.hi, 3) if s.kind == "ring" else \
            s.lo * np.array([1.0, 2.0, 2.76, 5.4, 8.93])
        return resonator_bank(imp, freqs[freqs < 0.45 * sr], s.span, sr)
    if s.kind == "hum":
        noise = band_noise(n, int(sr), s.lo, s.hi, rng) * s.span
        return harmonic_tone(n, sr, s.lo, s.hi, rng) * (1 - s.span) + noise
    if s.kind == "tone":
        return harmonic_tone(n, sr, s.lo, s.hi, rng) * _gates(n, sr, s, rng, drive)
    if s.kind == "chirp":
        return _chirps(n, sr, s, rng, drive)
    pulses = np.abs(np.sin(np.pi * s.rate * np.arange(n) / sr)) ** 8
    return np.sin(2 * np.pi * s.lo * np.arange(n) / sr) * pulses * smooth_random(n, 0.2, sr, rng)


def _mix(layers: list[tuple[Array, float]], rng: np.random.Generator) -> Array:
    out = np.zeros_like(layers[0][0])
    for x, level in layers:
        peak = float(np.percentile(np.abs(x), 99.9)) + 1e-9
        out += x / peak * 10 ** ((level + rng.uniform(-2, 2)) / 20)
    return out


def _render_layered(sounds: list[str], n: int, sr: Hertz, seed: int, drive: Array) -> Array:
    layers = []
    for i, name in enumerate(sounds):
        for j, s in enumerate(SOUND_RECIPES[name]):
            layers.append((_layer(s, n, float(sr), _rng(seed, i, j), drive), s.level))
    return _mix(layers, _rng(seed, 999))


def _stft_shape(sr: Hertz) -> tuple[int, int]:
    n_fft = int(2 ** round(np.log2(0.04 * sr)))
    return n_fft, n_fft // 4


def _peaks(freqs: Array, centres: Array, width: float) -> Array:
    return np.asarray(sum(np.exp(-0.5 * ((freqs - c) / width) ** 2) / (k + 1)
                          for k, c in enumerate(centres)))


def _template(s: _Sound, freqs: Array, sr: float, rng: np.random.Generator) -> tuple[Array, bool]:
    """Spectral template of a layer and whether it is tonal (coherent phase)."""
    width = 1.5 * (freqs[1] - freqs[0])
    if s.kind in ("bed", "burst"):
        return band_profile(freqs, s.lo, s.hi), False
    if s.kind == "ring":
        return _peaks(freqs, rng.uniform(s.lo, s.hi, 3), width), True
    if s.kind == "bell":
        return _peaks(freqs, s.lo * np.array([1.0, 2.0, 2.76, 5.4, 8.93]), width), True
    if s.kind in ("hum", "tone"):
        comb = _peaks(freqs, s.lo * np.arange(1, max(int(min(s.hi, 0.45 * sr) // s.lo), 1) + 1),
                      width)
        return comb + s.span * band_profile(freqs, s.lo, s.hi) * (s.kind == "hum"), True
    return _peaks(freqs, np.array([s.lo]), 4 * width), False


def _gains(s: _Sound, m: int, frame_rate: float, rng: np.random.Generator,
           drive: Array) -> Array:
    """Temporal gain curve of a layer at STFT frame rate."""
    if s.kind == "bed":
        mod = 1 - s.span + s.span * smooth_random(m, s.rate, frame_rate, rng)
        return mod * (0.3 + 0.7 * drive)
    if s.kind == "hum":
        return 0.9 + 0.1 * smooth_random(m, s.rate, frame_rate, rng)
    if s.kind == "tone":
        return _gates(m, frame_rate, s, rng, drive)
    if s.kind == "buzz":
        return 0.3 + 0.7 * smooth_random(m, 0.2, frame_rate, rng)
    pos = event_onsets(m, frame_rate, s.rate, rng, drive, s.regular)
    return decay_train(m, pos, s.span * frame_rate, rng)


def _chirp_tracks(s: _Sound, freqs: Array, m: int, frame_rate: float,
                  rng: np.random.Generator, drive: Array) -> Array:
    mag = np.zeros((len(freqs), m))
    frames = max(int(s.span * frame_rate), 2)
    width = 1.5 * (freqs[1] - freqs[0])
    for p in event_onsets(m, frame_rate, s.rate, rng, drive, False):
        f1, f2 = rng.uniform(s.lo, s.hi, 2)
        track = np.linspace(f1, f2, frames)
        for k, f in enumerate(track[: m - p]):
            mag[:, p + k] += np.exp(-0.5 * ((freqs - f) / width) ** 2)
    return mag


def _spectral_mags(sounds: list[str], freqs: Array, m: int, frame_rate: float, sr: Hertz,
                   seed: int, drive: Array) -> tuple[Array, Array]:
    noise, tonal = np.zeros((len(freqs), m)), np.zeros((len(freqs), m))
    for i, name in enumerate(sounds):
        for j, s in enumerate(SOUND_RECIPES[name]):
            rng = _rng(seed, i, j)
            level = 10 ** ((s.level + rng.uniform(-2, 2)) / 20)
            if s.kind == "chirp":
                tonal += level * _chirp_tracks(s, freqs, m, frame_rate, rng, drive)
                continue
            shape, is_tonal = _template(s, freqs, float(sr), rng)
            gain = _gains(s, m, frame_rate, rng, drive)
            part = np.outer(shape / (shape.max() + 1e-9), gain / (gain.max() + 1e-9)) * level
            if is_tonal:
                tonal += part
            else:
                noise += part
    return noise, tonal


def _render_spectral(sounds: list[str], n: int, sr: Hertz, seed: int,
                     drive: Array | None = None, tilt: Array | None = None) -> Array:
    n_fft, hop = _stft_shape(sr)
    m = n // hop + 2
    frame_rate = sr / hop
    freqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    d = np.ones(m) if drive is None else np.interp(np.arange(m) * hop, np.arange(n), drive)
    noise, tonal = _spectral_mags(sounds, freqs, m, frame_rate, sr, seed, d)
    rng = _rng(seed, 777)
    coherent = rng.uniform(0, 2 * np.pi, (len(freqs), 1)) + \
        2 * np.pi * np.arange(len(freqs))[:, None] * hop / n_fft * np.arange(m)[None, :]
    spec = noise * np.exp(2j * np.pi * rng.uniform(0, 1, noise.shape))
    spec += tonal * np.exp(1j * coherent)
    if tilt is not None:
        b = np.interp(np.arange(m) * hop, np.arange(n), tilt)
        spec *= (np.maximum(freqs[:, None], 50.0) / 1000.0) ** (0.6 * (b[None, :] - 0.5))
    _, y = istft(spec, sr, nperseg=n_fft, noverlap=n_fft - hop, boundary=True)
    return np.asarray(fit_length(y, n), np.float64)


def video_drive(frames: Frames, fps: float, n: int, sample_rate: Hertz) -> tuple[Array, Array]:
    """Per-sample motion drive and brightness in [0, 1] from RGB ``frames``.

    Motion is the mean absolute luma difference between consecutive frames, smoothed
    and scaled to its maximum (0.25 floor); brightness is the mean luma. Frames are
    placed at ``i / fps`` (spread evenly over the clip when ``fps`` is 0).
    """
    if frames.ndim != 4 or len(frames) == 0:
        raise ConfigError(f"video-to-audio needs frames of shape (T, H, W, 3), got {frames.shape}")
    luma = frames[..., :3].astype(np.float64) @ np.array([0.299, 0.587, 0.114]) / 255.0
    bright = luma.mean(axis=(1, 2))
    motion = np.concatenate([[0.0], np.abs(np.diff(luma, axis=0)).mean(axis=(1, 2))])
    motion = np.convolve(motion, np.ones(3) / 3, mode="same")
    motion = motion / motion.max() if motion.max() > 1e-4 else np.zeros_like(motion)
    times = np.arange(len(frames)) / fps if fps > 0 else \
        np.linspace(0, n / sample_rate, len(frames))
    t = np.arange(n) / sample_rate
    return 0.25 + 0.75 * np.interp(t, times, motion), np.interp(t, times, bright)


def _tilt_time(x: Array, bright: Array, sr: Hertz) -> Array:
    """Brightness-dependent high-shelf: the >2 kHz band is scaled by 0.4 + 1.2 · brightness."""
    sos = butter(2, min(2000.0, 0.4 * sr), btype="high", fs=sr, output="sos")
    high = sosfiltfilt(sos, x)
    return np.asarray(x - high + high * (0.4 + 1.2 * bright))


def _finish(x: Array, target_dbfs: float = _LEVEL_DBFS) -> Audio:
    return normalise(x, target_dbfs, _PEAK)


@dataclass(frozen=True)
class _Request:
    n: int
    sr: Hertz
    prompt: str
    frames: Frames | None
    fps: float
    source_env: Audio | None
    seed: int


class _EnvBase:
    """Every reference is real DSP, deterministic given ``seed``, speech-free, exactly
    ``round(duration * sample_rate)`` samples long and never clipped."""

    slug: str
    paradigm: str
    version = "1"
    reference = True

    def generate(self, *, sample_rate: Hertz, duration: Seconds, prompt: str,
                 frames: Frames | None = None, fps: float = 0.0,
                 source_env: Audio | None = None, seed: int = 0,
                 negative_prompt: str = "") -> Audio:
        """``negative_prompt`` is accepted and unused: references synthesise no speech or music."""
        n = _duration_samples(duration, sample_rate)
        return self._generate(_Request(n, sample_rate, prompt, frames, fps, source_env, seed))

    def _generate(self, r: _Request) -> Audio:
        raise NotImplementedError

    def _drive(self, r: _Request) -> tuple[Array | None, Array | None]:
        """Motion drive and brightness for v2a (``None`` for t2a)."""
        if self.paradigm != "v2a":
            return None, None
        if r.frames is None:
            raise ConfigError(f"{self.slug}: video-to-audio generation needs frames")
        return video_drive(r.frames, r.fps, r.n, r.sr)


class _Layered(_EnvBase):
    def _generate(self, r: _Request) -> Audio:
        drive, bright = self._drive(r)
        y = _render_layered(scene_sounds(r.prompt), r.n, r.sr, r.seed,
                            np.ones(r.n) if drive is None else drive)
        return _finish(y if bright is None else _tilt_time(y, bright, r.sr))


class _Spectral(_EnvBase):
    def _generate(self, r: _Request) -> Audio:
        drive, bright = self._drive(r)
        return _finish(_render_spectral(scene_sounds(r.prompt), r.n, r.sr, r.seed, drive, bright))


class LayeredT2A(_Layered):
    """Text-to-audio: time-domain procedural layering of the prompt's scene sounds."""

    slug, paradigm = "ref-layered-t2a", "t2a"


class SpectralT2A(_Spectral):
    """Text-to-audio: subtractive STFT synthesis of the prompt's scene sounds."""

    slug, paradigm = "ref-spectral-t2a", "t2a"


class LayeredV2A(_Layered):
    """Video-to-audio: layered synthesis, event density/level from motion, tilt from brightness."""

    slug, paradigm = "ref-layered-v2a", "v2a"


class SpectralV2A(_Spectral):
    """Video-to-audio: spectral synthesis with motion-driven gains and brightness tilt."""

    slug, paradigm = "ref-spectral-v2a", "v2a"


def _source(source_env: Audio | None) -> Array:
    if source_env is None or len(source_env) == 0:
        raise ConfigError("audio-to-audio generation needs source_env")
    return np.asarray(source_env, np.float64)


def _band_powers(x: Array, bank: Array) -> Array:
    p = (np.abs(np.fft.rfft(x)) ** 2) @ (bank**2).T
    return np.asarray(p / (p.sum() + 1e-20))


def _texture(src: Array, n: int, sr: Hertz, seed: int, gains: Array) -> Array:
    """Three rounds of imposing ``src``'s subband envelope statistics on noise.

    Bands are processed as one stack, and the synthesis sums the filtered bands in the
    frequency domain (one inverse FFT; the same values as summing per-band inverses).
    """
    src_sub = np.abs(analytic_subbands(src, erb_filterbank(len(src), sr)))
    quant = np.quantile(src_sub, np.linspace(0, 1, 256), axis=1).T
    mods = modulation_power(src_sub, sr)
    del src_sub
    bank = erb_filterbank(n, sr)
    x = _rng(seed, 1).standard_normal(n)
    for _ in range(3):
        sub = analytic_subbands(x, bank)
        env = np.abs(sub) + 1e-12
        new = impose_envelope_stats(env, quant, mods, sr)
        parts = new * gains[:, None] * np.real(sub / env)
        del sub, env, new
        x = sp_fft.irfft(np.sum(sp_fft.rfft(parts, axis=1) * bank, axis=0), n)
    return x


def _prompt_target(prompt: str, n: int, sr: Hertz, seed: int) -> Array:
    """A short spectral rendering of the prompt's scene, as a morph target."""
    return _render_spectral(scene_sounds(prompt), min(n, 3 * sr), sr, seed + 1)


def _level_of(src: Array) -> float:
    level = rms_dbfs(src.astype(np.float32))
    return level if np.isfinite(level) and level > -80 else _LEVEL_DBFS


class TextureA2A(_EnvBase):
    """Audio-to-audio: McDermott–Simoncelli-style texture resynthesis of the source track."""

    slug, paradigm = "ref-texture-a2a", "a2a"
    morph = 0.35

    def _generate(self, r: _Request) -> Audio:
        src, n, sr, prompt, seed = _source(r.source_env), r.n, r.sr, r.prompt, r.seed
        if rms_dbfs(src.astype(np.float32)) < -80:
            return _finish(_render_layered(scene_sounds(prompt), n, sr, seed, np.ones(n)))
        bank = erb_filterbank(len(src), sr)
        target = _prompt_target(prompt, n, sr, seed)
        ratio = _band_powers(target, erb_filterbank(len(target), sr)) / np.maximum(
            _band_powers(src, bank), 1e-12)
        gains = np.clip(ratio, 10**-2.4, 10**2.4) ** (self.morph / 2)
        return _finish(_texture(src, n, sr, seed, gains), _level_of(src))


class StftMorphA2A(_EnvBase):
    """Audio-to-audio: phase-randomised STFT block resynthesis, envelope morphed to the prompt."""

    slug, paradigm = "ref-stft-morph-a2a", "a2a"
    morph = 0.5
    block_s = 0.5

    def _generate(self, r: _Request) -> Audio:
        src, n, sr, prompt, seed = _source(r.source_env), r.n, r.sr, r.prompt, r.seed
        n_fft, hop = _stft_shape(sr)
        _, _, spec = stft(np.pad(src, (0, max(0, n_fft - len(src)))), sr, nperseg=n_fft,
                          noverlap=n_fft - hop)
        mags = self._blocks(np.abs(spec), n // hop + 2, int(self.block_s * sr / hop), seed)
        _, _, tgt = stft(_prompt_target(prompt, n, sr, seed), sr, nperseg=n_fft,
                         noverlap=n_fft - hop)
        mags *= self._morph_gain(np.abs(spec), np.abs(tgt))[:, None]
        phase = np.exp(2j * np.pi * _rng(seed, 2).uniform(0, 1, mags.shape))
        _, y = istft(mags * phase, sr, nperseg=n_fft, noverlap=n_fft - hop)
        return _finish(np.asarray(fit_length(y, n), np.float64), _level_of(src))

    @staticmethod
    def _blocks(mags: Array, m: int, block: int, seed: int) -> Array:
        rng, block = _rng(seed, 3), max(1, min(block, mags.shape[1]))
        starts = rng.integers(0, mags.shape[1] - block + 1, m // block + 1)
        return np.concatenate([mags[:, s: s + block] for s in starts], axis=1)[:, :m]

    def _morph_gain(self, src: Array, tgt: Array) -> Array:
        def envelope(m: Array) -> Array:
            log = np.log(np.mean(m**2, axis=1) + 1e-12)
            return np.convolve(log - log.mean(), np.ones(9) / 9, mode="same")

        return np.exp(self.morph / 2 * np.clip(envelope(tgt) - envelope(src), -4.1, 4.1))
