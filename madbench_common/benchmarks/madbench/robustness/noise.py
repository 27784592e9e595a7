"""The noise set of the additive-noise conditions: files, checksums, seeded excerpts, SNR.

A set is a folder with a ``noise.csv`` listing each file with its sha256, sources and
licence (:func:`load_noise_set`). Every file is checked against its sha256 before use, and
every noisy row records the file, its sha256 and the excerpt's offset
(:meth:`NoiseSet.excerpt`); the SNR is over the whole clip (:func:`mix_at_snr`).
"""

from __future__ import annotations

import csv
import hashlib
import io
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np
import soundfile as sf

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample

__all__ = ["BUILTIN", "NoiseFile", "NoiseSet", "load_noise_set", "mix_at_snr"]

BUILTIN = "builtin"
_FADE_S = 0.05


@dataclass(frozen=True)
class NoiseFile:
    """One noise recording of the set."""

    name: str
    file: str
    sha256: str
    licence: str = ""
    sources: str = ""


@dataclass(frozen=True)
class NoiseSet:
    """The set's files in listing order, and where it lives."""

    root: str
    files: tuple[NoiseFile, ...]

    def read(self, entry: NoiseFile, sample_rate: Hertz) -> Audio:
        """A noise file as mono float32 at ``sample_rate``, after checking its sha256."""
        return _read(self.root, entry.file, entry.sha256, sample_rate)

    def excerpt(self, key: str, n: int, sample_rate: Hertz) -> tuple[NoiseFile, float, Audio]:
        """The seeded excerpt of ``n`` samples for ``key`` (a seed and clip id): which file,
        its start in seconds, and the samples (looped with crossfades when shorter).

        Drawn from the run seed and the clip id only, so all samples of a clip (R, S, E, Q,
        every protocol) and all SNR levels get the same noise, and a condition's samples
        differ from each other only where the clean samples do."""
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8],
                                                   "little"))
        entry = self.files[int(rng.integers(len(self.files)))]
        audio = self.read(entry, sample_rate)
        start = int(rng.integers(max(1, audio.size - n + 1))) if audio.size > n else 0
        return entry, start / sample_rate, _loop(audio[start:], n, sample_rate)


def _root(spec: str) -> Path:
    if spec == BUILTIN:
        return Path(str(resources.files("madbench_common").joinpath("data/noise")))
    return Path(spec)


@cache
def load_noise_set(spec: str = BUILTIN) -> NoiseSet:
    """The noise set named by the ``perturb`` stage's ``noise`` parameter (``builtin`` or a
    folder with a ``noise.csv``).

    The packaged set (``madbench_common/data/noise/``, built by
    ``scripts/build_noise_set.py``) holds real recordings that no generator and no demo clip
    uses. A user's ``noise.csv`` has the same columns (``name``, ``file``, ``sha256``; the
    others are optional)."""
    root = _root(spec)
    listing = root / "noise.csv"
    if not listing.is_file():
        raise ConfigError(f"noise set {spec!r}: {listing} is missing (a noise set is a folder "
                          "with noise.csv: name, file, sha256[, licence, sources])")
    with listing.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or not {"name", "file", "sha256"} <= set(rows[0]):
        raise ConfigError(f"{listing}: needs columns name, file, sha256 and at least one row")
    files = tuple(NoiseFile(r["name"], r["file"], r["sha256"], r.get("licence", ""),
                            r.get("sources", "")) for r in rows)
    return NoiseSet(str(root), files)


@cache
def _read(root: str, file: str, sha256: str, sample_rate: Hertz) -> Audio:
    path = Path(root) / file
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"noise file {path}: {exc.strerror}") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ConfigError(f"noise file {path}: sha256 differs from noise.csv (damaged or "
                          "replaced); rebuild the listing")
    audio, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    out = resample(audio.mean(axis=1), int(rate), sample_rate)
    out.flags.writeable = False
    return out


def _loop(audio: Audio, n: int, sample_rate: Hertz) -> Audio:
    """``audio`` repeated with short crossfades up to ``n`` samples."""
    if audio.size >= n:
        return np.asarray(audio[:n], dtype=np.float32)
    if audio.size < 2:
        raise ConfigError("a noise file has no samples to loop")
    fade = min(int(_FADE_S * sample_rate), audio.size // 2)
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    out = np.asarray(audio, dtype=np.float32)
    while out.size < n:
        head = audio[:fade] * ramp
        tail = out[out.size - fade:] * ramp[::-1]
        out = np.concatenate([out[:out.size - fade], tail + head, audio[fade:]])
    return out[:n]


def mix_at_snr(signal: Audio, noise: Audio, snr_db: float) -> tuple[Audio, float]:
    """``signal`` plus ``noise`` scaled to ``snr_db`` (whole-clip powers); the SNR achieved.

    The paper is silent; this is the usual whole-utterance definition:
    10·log10(P_signal / P_noise) over the whole clip equals ``snr_db``."""
    p_sig = float(np.mean(np.square(signal, dtype=np.float64)))
    p_noise = float(np.mean(np.square(noise, dtype=np.float64)))
    if p_sig == 0.0 or p_noise == 0.0:
        raise ValueError("cannot set an SNR with a silent signal or noise")
    gain = np.sqrt(p_sig / (p_noise * 10.0 ** (snr_db / 10.0)))
    scaled = noise.astype(np.float64) * gain
    achieved = 10.0 * np.log10(p_sig / float(np.mean(scaled**2)))
    return (signal + scaled).astype(np.float32), float(achieved)
