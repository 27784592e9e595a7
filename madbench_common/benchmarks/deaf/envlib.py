"""BSC background library: DEMAND where the user has it, else the offline Debian library; mixing.

The paper mixes speech with DEMAND (Thiemann et al. 2013; Table 6), 18 environments of
16-channel recordings; :func:`library_entries` finds each environment's background in a
user's DEMAND copy or the committed offline library, and :func:`mix_at_snr` mixes.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from madbench_common.benchmarks.deaf.datasets import has_file, is_remote, read_file
from madbench_common.benchmarks.deaf.design import ENVIRONMENTS, Environment
from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.media.dsp import normalise

__all__ = ["DEFAULT_LIBRARY", "LibraryEntry", "library_entries", "load_background",
           "loop_to", "mix_at_snr"]

DEFAULT_LIBRARY = str(Path(__file__).resolve().parents[2] / "data" / "deaf_envlib")
"""The committed offline library, shipped in the package (``madbench_common/data/deaf_envlib``)
so that every image carries it: a pod has no checkout (the deaf rehearsal found
``deaf_envlib`` failing in its image when the library lived under the repository's ``data/``)."""
_PAD_S = 0.5
_FADE_S = 0.05


@dataclass(frozen=True)
class LibraryEntry:
    """Where one environment's background comes from (``path`` empty when missing)."""

    env: Environment
    source: str
    quality: str
    path: str
    files: tuple[str, ...] = ()
    licence: str = ""
    attribution: str = ""


def _demand_entries(root: str) -> list[LibraryEntry]:
    out = []
    for env in ENVIRONMENTS:
        rel = f"{env.code}/ch01.wav"
        path = f"{root.rstrip('/')}/{rel}" if is_remote(root) else str(Path(root) / rel)
        out.append(LibraryEntry(env, "demand", "recording",
                                path if has_file(root, rel) else "",
                                (f"{env.code}/ch01.wav",), "CC-BY-SA-3.0",
                                "DEMAND, Thiemann, Ito & Vincent (2013)"))
    return out


def _debian_entries(root: Path) -> list[LibraryEntry]:
    table = root / "envlib.csv"
    if not table.exists():
        raise ConfigError(f"{table}: missing; the offline library is built by "
                          "scripts/build_deaf_envlib.py (or pass demand=<DEMAND folder>)")
    with open(table, newline="", encoding="utf-8") as fh:
        rows = {r["code"]: r for r in csv.DictReader(fh)}
    out = []
    for env in ENVIRONMENTS:
        r = rows.get(env.code)
        if r is None or not r.get("file"):
            out.append(LibraryEntry(env, "debian", "missing", ""))
            continue
        out.append(LibraryEntry(env, "debian", r["quality"], str(root / r["file"]),
                                tuple(r["sources"].split(";")), r["licence"], r["attribution"]))
    return out


def library_entries(library: str = DEFAULT_LIBRARY, demand: str = "") -> list[LibraryEntry]:
    """One entry per DEMAND environment, from DEMAND if ``demand`` is set, else the library.

    With ``demand=<folder or s3:// prefix>`` channel 1 of each ``<CODE>/ch01.wav`` is read
    (the layout of DEMAND's per-environment zips; :mod:`.datasets`). Without it, the
    offline library committed under ``madbench_common/data/deaf_envlib/``: freely licensed
    real recordings from Debian packages (``scripts/build_deaf_envlib.py``), one FLAC per
    environment that has one, with ``envlib.csv`` naming each file's sources, licence and
    whether it records that environment (``recording``) or a related scene (``proxy``).
    Environments it lacks are reported missing and their clips are quarantined."""
    if demand:
        if not is_remote(demand) and not Path(demand).is_dir():
            raise ConfigError(f"{demand}: DEMAND folder not found")
        return _demand_entries(demand)
    return _debian_entries(Path(library))


def load_background(entry: LibraryEntry, sample_rate: Hertz, max_seconds: float) -> Audio:
    """The entry's background, mono at ``sample_rate``, at most ``max_seconds`` long."""
    if not entry.path:
        raise ConfigError(f"{entry.env.code}: no background in the library")
    if is_remote(entry.path):
        root, _, rel = entry.path.rpartition("/")
        source: str | io.BytesIO = io.BytesIO(read_file(root, rel))
    else:
        source = entry.path
    audio, sr = sf.read(source, dtype="float32", always_2d=True)
    x = resample(audio[:, 0], sr, sample_rate)
    return x[: int(max_seconds * sample_rate)]


def loop_to(x: Audio, n: int, sample_rate: Hertz) -> Audio:
    """``x`` repeated with short crossfades until it is ``n`` samples long."""
    if len(x) >= n:
        return np.asarray(x[:n], np.float32)
    fade = min(int(_FADE_S * sample_rate), len(x) // 4)
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    out = np.asarray(x, np.float32).copy()
    while len(out) < n:
        head = x[:fade] * ramp + out[len(out) - fade:] * ramp[::-1] if fade else x[:0]
        out = np.concatenate([out[: len(out) - fade], head, x[fade:]])
    return out[:n]


def mix_at_snr(speech: Audio, background: Audio, snr_db: float, sample_rate: Hertz,
               rng: np.random.Generator) -> Audio:
    """Speech over a background excerpt at ``snr_db`` (Appendix A.2.2 gives only the SNRs).

    The speech sits 0.5 s into a background excerpt 1 s longer than it; the background is
    scaled so that the speech's power over its own span, divided by the background's power
    over the same span, is the SNR; the mixture is normalised to −26 dBFS RMS and limited
    to a 0.95 peak. The excerpt's start is drawn from ``rng`` (the stimulus's seed); a
    background shorter than the excerpt is looped with a 50 ms crossfade."""
    pad = int(_PAD_S * sample_rate)
    n = len(speech) + 2 * pad
    bg = loop_to(background, n + len(background), sample_rate)
    start = int(rng.integers(0, max(1, len(bg) - n)))
    bg = np.asarray(bg[start: start + n], np.float64)
    p_speech = float(np.mean(np.asarray(speech, np.float64) ** 2))
    p_bg = float(np.mean(bg[pad: pad + len(speech)] ** 2))
    if p_speech <= 0 or p_bg <= 0:
        raise ConfigError("silent speech or background: SNR is undefined")
    gain = np.sqrt(p_speech / (p_bg * 10.0 ** (snr_db / 10.0)))
    mix = bg * gain
    mix[pad: pad + len(speech)] += speech
    return normalise(mix, -26.0)
