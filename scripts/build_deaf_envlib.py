"""Build DEAF's offline BSC background library (package data) from Debian packages.

DEAF mixes speech with DEMAND's 18 environments (paper Appendix A.2.2, Table 6). DEMAND
cannot be downloaded here, so this builds a stand-in from freely licensed real
recordings shipped in Debian packages: for each DEMAND environment, the recordings
listed in ``SOURCES`` below are decoded, resampled to 16 kHz mono, joined end to end
(50 ms crossfades, repeated in order) into a 20 s bed, levelled to −30 dBFS RMS and
written as ``<CODE>.flac``. ``envlib.csv`` names each bed's sources, licence and quality:
``recording`` when the sources record that kind of place, ``proxy`` when they record a
related scene (a sports crowd for a sports field, an airport hall for a train station).
Environments with no suitable recording are listed with an empty file and reported
missing by the pipeline. ``ATTRIBUTION.md`` carries the credits.

Packages are fetched with ``apt-get download`` into a temporary folder and unpacked
there with ``dpkg-deb``; nothing is installed. Deterministic output.

Usage::

    python scripts/build_deaf_envlib.py [--out madbench_common/data/deaf_envlib] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
from scipy.signal import resample_poly

SR = 16000
SECONDS = 20.0
LEVEL_DBFS = -30.0
STK = "usr/share/games/supertuxkart/data/sfx"
TUX = "usr/share/tuxpaint/stamps"
LC = "usr/share/games/lincity-ng/sounds"
WES = "usr/share/games/wesnoth/1.16/data/core/sounds/ambient"
MICRO = "usr/share/games/micropolis/res/sounds"


@dataclass(frozen=True)
class Source:
    """One recording inside a Debian package."""

    package: str
    member: str
    licence: str
    credit: str


TUX_CREDIT = "Tux Paint stamps, Bill Kendrick et al."
LC_CREDIT = "LinCity-NG sound effects (GPL-2+ / CC-BY-SA-2.0 dual licence)"
STK_KOENIG = "Mike Koenig (soundbible.com); SuperTuxKart"
SOURCES: dict[str, tuple[str, list[Source]]] = {
    "DKITCHEN": ("proxy", [
        Source("tuxpaint-stamps-default", f"{TUX}/household/kettle.ogg", "GPL-2", TUX_CREDIT),
        Source("tuxpaint-stamps-default", f"{TUX}/household/dishes/glass.ogg", "GPL-2",
               TUX_CREDIT),
        Source("tuxpaint-stamps-default", f"{TUX}/household/dishes/bottle.ogg", "GPL-2",
               TUX_CREDIT)]),
    "DLIVING": ("proxy", [
        Source("tuxpaint-stamps-default", f"{TUX}/household/vacuum_cleaner.ogg", "GPL-2",
               TUX_CREDIT)]),
    "DWASHING": ("recording", [
        Source("tuxpaint-stamps-default", f"{TUX}/household/Washing-machine.ogg", "GPL-2",
               TUX_CREDIT)]),
    "NFIELD": ("proxy", [
        Source("lincity-ng-data", f"{LC}/SportsCroud{i}.wav", "GPL-2+", LC_CREDIT)
        for i in (1, 2, 3)]),
    "NPARK": ("proxy", [
        Source("wesnoth-1.16-data", f"{WES}/birds{i}.ogg", "GPL-2+",
               "The Battle for Wesnoth ambient sounds")
        for i in (1, 2, 3)]),
    "NRIVER": ("recording", [
        Source("supertuxkart-data", f"{STK}/river_loop.ogg", "CC0",
               "River recording by Adam Newns (vennaudio.com), freesound #166310; "
               "SuperTuxKart")]),
    "PRESTO": ("recording", [
        Source("supertuxkart-data", f"{STK}/lenautile_restaurant.ogg", "CC0",
               "Restaurant recording by Alcappuccino, freesound #263528; SuperTuxKart")]),
    "PSTATION": ("proxy", [
        Source("supertuxkart-data", f"{STK}/sara_airport_pa.ogg", "CC-BY-SA-4.0",
               "Airport PA by samuncle from public-domain sounds (freesound #171755); "
               "SuperTuxKart")]),
    "SPSQUARE": ("proxy", [
        Source("lincity-ng-data", f"{LC}/MarketFull1.wav", "GPL-2+", LC_CREDIT)]),
    "STRAFFIC": ("recording", [
        *(Source("lincity-ng-data", f"{LC}/TraficHigh{i}.wav", "GPL-2+", LC_CREDIT)
          for i in (1, 2, 3)),
        Source("micropolis-data", f"{MICRO}/heavytraffic.wav", "GPL-3+",
               "Micropolis, Electronic Arts Inc. and Don Hopkins")]),
    "TBUS": ("proxy", [
        Source("supertuxkart-data", f"{STK}/engine_large.ogg", "CC-BY-SA-3.0",
               "'Transfer Truck Idle and Drive' by " + STK_KOENIG + ", mixed by Marianne "
               "Gagnon with 'Compressor Motor' (pdsounds.org) and 'Car Accelerating'")]),
    "TCAR": ("proxy", [
        Source("supertuxkart-data", f"{STK}/car_revup.ogg", "CC-BY-3.0",
               "'Engine Rev Inside Car' by " + STK_KOENIG)]),
    "TMETRO": ("proxy", [
        Source("lincity-ng-data", f"{LC}/RailTrain{i}.wav", "GPL-2+", LC_CREDIT)
        for i in (1, 2, 3)]),
}
MISSING = ("OHALLWAY", "OMEETING", "OOFFICE", "PCAFETER", "SCAFE")
"""No freely licensed recording of these places was found in Debian's archive."""
ALL = ("DKITCHEN", "DLIVING", "DWASHING", "NFIELD", "NPARK", "NRIVER", "OHALLWAY",
       "OMEETING", "OOFFICE", "PCAFETER", "PRESTO", "PSTATION", "SCAFE", "SPSQUARE",
       "STRAFFIC", "TBUS", "TCAR", "TMETRO")


def die(msg: str) -> None:
    print(f"build_deaf_envlib: error: {msg}", file=sys.stderr)
    raise SystemExit(1)


def fetch(workdir: Path, sources: dict[str, tuple[str, list[Source]]] | None = None
          ) -> dict[str, str]:
    """apt-get download every package; extract the members used; return their versions."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        die("apt-get/dpkg-deb not found: needs a Debian system (the library is committed)")
    sources = SOURCES if sources is None else sources
    packages = sorted({s.package for _, srcs in sources.values() for s in srcs})
    proc = subprocess.run(["apt-get", "download", *packages], cwd=workdir,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        die("apt-get download failed (apt-get update first?):\n" + proc.stderr[-2000:])
    versions = {}
    for name in packages:
        deb = sorted(workdir.glob(f"{name}_*.deb"))[-1]
        versions[name] = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True,
                                        capture_output=True, text=True).stdout.strip()
        members = [f"./{s.member}" for _, srcs in sources.values() for s in srcs
                   if s.package == name]
        dest = workdir / name
        dest.mkdir(exist_ok=True)
        tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(dest), *members], stdin=tar.stdout, check=True)
        tar.wait()
    return versions


def decode(path: Path) -> np.ndarray:
    audio, sr = sf.read(path, dtype="float64", always_2d=True)
    x = audio.mean(axis=1)
    g = np.gcd(int(sr), SR)
    return np.asarray(resample_poly(x, SR // g, int(sr) // g))


def bed(parts: list[np.ndarray], seconds: float = SECONDS) -> np.ndarray:
    """The parts joined in order, repeated, with 50 ms crossfades, cut to ``seconds``."""
    n, fade = int(seconds * SR), int(0.05 * SR)
    ramp = np.linspace(0.0, 1.0, fade)
    out = np.zeros(0)
    i = 0
    while len(out) < n:
        x = parts[i % len(parts)]
        i += 1
        if len(out) >= fade and len(x) > 2 * fade:
            out[-fade:] = out[-fade:] * ramp[::-1] + x[:fade] * ramp
            x = x[fade:]
        out = np.concatenate([out, x])
    out = out[:n]
    rms = np.sqrt(np.mean(out**2))
    out *= 10 ** (LEVEL_DBFS / 20) / rms
    return np.asarray(out / max(1.0, np.abs(out).max() / 0.99), np.float32)


def build(out: Path, workdir: Path) -> None:
    versions = fetch(workdir)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for code in ALL:
        if code not in SOURCES:
            rows.append({"code": code, "file": "", "quality": "missing", "sources": "",
                         "licence": "", "attribution": ""})
            continue
        quality, srcs = SOURCES[code]
        audio = bed([decode(workdir / s.package / s.member) for s in srcs])
        sf.write(out / f"{code}.flac", audio, SR, subtype="PCM_16")
        rows.append({"code": code, "file": f"{code}.flac", "quality": quality,
                     **provenance(srcs, versions)})
    write_rows(out / "envlib.csv", rows)
    write_attribution(out, rows)


def provenance(srcs: Sequence[Source], versions: dict[str, str]) -> dict[str, str]:
    """The columns that credit a bed: its recordings (``package=version:/member``), their
    licences and their credits."""
    return {"sources": ";".join(f"{s.package}={versions[s.package]}:/{s.member}" for s in srcs),
            "licence": " AND ".join(sorted({s.licence for s in srcs})),
            "attribution": "; ".join(dict.fromkeys(s.credit for s in srcs))}


def write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    """The library's index CSV, one row a bed, in the rows' own column order."""
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def write_attribution(out: Path, rows: list[dict[str, str]]) -> None:
    lines = ["# DEAF offline background library: attribution and licences", "",
             "Built by `scripts/build_deaf_envlib.py` from Debian packages. Each FLAC is a "
             "derivative of the recordings listed for it (joined, resampled to 16 kHz mono, "
             "looped with crossfades and levelled) and is distributed under their terms. "
             "It stands in for DEMAND (Thiemann et al. 2013), which the paper uses; it is "
             "not DEMAND.", "",
             "| environment | quality | licence | sources | credit |", "|---|---|---|---|---|"]
    for r in rows:
        srcs = r["sources"].replace(";", "<br>")
        lines.append(f"| {r['code']} | {r['quality']} | {r['licence']} | {srcs} | "
                     f"{r['attribution']} |")
    (out / "ATTRIBUTION.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def cli(doc: str, out: str, build: Callable[[Path, Path], None]) -> None:
    """A builder's command line: ``--out`` (default ``out``) and ``--workdir``, where the
    packages are fetched and unpacked (a temporary folder unless given)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=out)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
        build(Path(args.out), Path(args.workdir))
    else:
        with tempfile.TemporaryDirectory(prefix=f"{Path(out).name}-") as tmp:
            build(Path(args.out), Path(tmp))


def main() -> None:
    cli(__doc__, "madbench_common/data/deaf_envlib", build)


if __name__ == "__main__":
    main()
