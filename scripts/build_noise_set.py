"""Build the robustness noise set under madbench_common/data/noise/ from a Debian package.

The ``perturb`` stage's additive-noise conditions draw their noise from a set
that no generator uses: the demo corpus takes its ambience from ``megaglest-data`` and
``supertuxkart-data``, the reference environment generators are procedural, and DEAF's
background library (``scripts/build_deaf_envlib.py``) takes other ``lincity-ng-data``
files (sports crowd, full market, heavy traffic, trains). This set takes five further
families of ``lincity-ng-data`` recordings, none of those. For each family the listed
recordings are decoded, resampled to 16 kHz mono, joined end to end (50 ms crossfades,
repeated in order) into a ``SECONDS``-long bed, levelled to −30 dBFS RMS and written as
``<name>.flac``; ``noise.csv`` names each bed's sources, licence and sha256 and
``ATTRIBUTION.md`` carries the credits. ``tests/benchmarks/madbench/robustness`` checks that the
set stays
disjoint from the demo corpus and DEAF's library.

Packages are fetched with ``apt-get download`` into a temporary folder and unpacked there
with ``dpkg-deb``; nothing is installed. Deterministic output.

Usage::

    python scripts/build_noise_set.py [--out madbench_common/data/noise] [--workdir DIR]
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import soundfile as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_deaf_envlib import Source, bed, cli, decode, fetch, provenance, write_rows

SR = 16000
SECONDS = 12.0
LC = "usr/share/games/lincity-ng/sounds"
LC_CREDIT = "LinCity-NG sound effects (GPL-2+ / CC-BY-SA-2.0 dual licence)"


def _lc(*names: str) -> list[Source]:
    return [Source("lincity-ng-data", f"{LC}/{n}.wav", "GPL-2+", LC_CREDIT) for n in names]


FAMILIES: dict[str, tuple[str, list[Source]]] = {
    "workshop": ("light industry: machines, tools", _lc("IndustryLight1", "IndustryLight2",
                                                        "IndustryLight3")),
    "vehicles": ("vehicles on a track", _lc("DirtTrack1", "DirtTrack3")),
    "fire": ("crackling fire", _lc("Fire1", "Fire2")),
    "residential": ("residential street ambience", _lc("ResidentialHigh1", "ResidentialHigh2",
                                                       "ResidentialHigh3", "ResidentialMed1",
                                                       "ResidentialMed2")),
    "mine": ("mining machinery", _lc("OreMine1", "OreMine2", "CoalMine1")),
}


def build(out: Path, workdir: Path) -> None:
    versions = fetch(workdir, FAMILIES)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, (what, srcs) in FAMILIES.items():
        audio = bed([decode(workdir / s.package / s.member) for s in srcs], SECONDS)
        path = out / f"{name}.flac"
        sf.write(path, audio, SR, subtype="PCM_16")
        rows.append({
            "name": name, "file": path.name, "description": what,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "seconds": f"{len(audio) / SR:.3f}", **provenance(srcs, versions)})
    write_rows(out / "noise.csv", rows)
    lines = ["# Robustness noise set: attribution and licences", "",
             "Built by `scripts/build_noise_set.py` from Debian packages. Each FLAC is a "
             "derivative of the recordings listed for it (joined, resampled to 16 kHz mono, "
             "looped with crossfades and levelled to -30 dBFS) and is distributed under their "
             "terms. No MADBench generator and no demo clip uses these recordings.", "",
             "| noise | what | licence | sources | credit |", "|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['description']} | {r['licence']} | "
              f"{r['sources'].replace(';', '<br>')} | {r['attribution']} |" for r in rows]
    (out / "ATTRIBUTION.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    cli(__doc__, "madbench_common/data/noise", build)


if __name__ == "__main__":
    main()
