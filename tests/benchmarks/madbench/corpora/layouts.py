"""Tiny fixtures written in each dataset's real release layout (protocol/metadata files,
folder names, file naming), with a few faulty lines to exercise the quarantine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from tests.media.clips import make_clip

SR = 16000


def audio(fake: bool, seed: int, seconds: float = 1.0) -> np.ndarray:
    """Bona fide: amplitude-modulated noise; spoof: a buzzy harmonic tone (easy to tell)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SR)) / SR
    if fake:
        f0 = 150 + 20 * rng.random()
        x = 0.1 * sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 12))
    else:
        x = 0.1 * rng.normal(size=t.size) * (1 + np.sin(2 * np.pi * 3 * t))
    return (x + 0.005 * rng.normal(size=t.size)).astype(np.float32)


def _flac(path: Path, fake: bool, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(path, audio(fake, seed), SR, subtype="PCM_16")


def asvspoof2019_la(root: Path, per_split: dict[str, int]) -> Path:
    """``LA/`` with CM protocols and FLAC folders; one malformed line, one missing file."""
    la = root / "LA"
    proto = la / "ASVspoof2019_LA_cm_protocols"
    proto.mkdir(parents=True)
    names = {"train": ("train.trn", "T"), "dev": ("dev.trl", "D"), "eval": ("eval.trl", "E")}
    seed = 0
    for part, (suffix, letter) in names.items():
        lines = []
        for i in range(per_split[part]):
            fake, seed = i % 2 == 1, seed + 1
            name = f"LA_{letter}_{1000000 + i}"
            speaker = f"LA_{i % 5:04d}"
            lines.append(f"{speaker} {name} - {'A0' + str(1 + i % 6) if fake else '-'} "
                         f"{'spoof' if fake else 'bonafide'}")
            _flac(la / f"ASVspoof2019_LA_{part}" / "flac" / f"{name}.flac", fake, seed)
        if part == "eval":
            lines += ["LA_0001 LA_E_9999999 - A07", "LA_0001 LA_E_8888888 - - bonafide"]
        (proto / f"ASVspoof2019.LA.cm.{suffix}.txt").write_text("\n".join(lines) + "\n")
    return root


def asvspoof5(root: Path, per_split: dict[str, int], nested: bool = False) -> Path:
    """Protocols in ``ASVspoof5_protocols/``, audio in flac_T, flac_D, flac_E_eval (with
    ``nested``: ``ASVspoof5_train/flac_T`` etc., as the release's archives unpack). In eval,
    utterances come in threes: an uncoded one (``CODEC_SEED`` ``-``) and two coded copies
    of it (``CODEC_SEED`` its file name), as the release's codec conditions are made."""
    proto = root / "ASVspoof5_protocols"
    proto.mkdir(parents=True)
    files = {"train": ("ASVspoof5.train.tsv", "T", "flac_T"),
             "dev": ("ASVspoof5.dev.track_1.tsv", "D", "flac_D"),
             "eval": ("ASVspoof5.eval.track_1.tsv", "E", "flac_E_eval")}
    for part, (name, letter, folder) in files.items():
        if nested:
            folder = f"ASVspoof5_{part}/{folder}"
        lines = []
        for i in range(per_split[part]):
            fake = i % 2 == 1
            file = f"{letter}_{i:010d}"
            codec = ("C0" + str(1 + i % 9), str(1 + i % 8), f"E_{i - i % 3:010d}") if (
                part == "eval" and i % 3) else ("-", "-", "-")
            tag, attack, key = ("AC3", f"A{5 + i % 4:02d}", "spoof") if fake else (
                "-", "bonafide", "bonafide")
            lines.append(f"{letter}_{i % 7:04d} {file} {'F' if i % 3 else 'M'} "
                         f"{' '.join(codec)} {tag} {attack} {key} -")
            _flac(root / folder / f"{file}.flac", fake, 100 + i)
        if part == "train":
            lines.append("T_0001 T_9999999999 F - - - AC3 A05")  # 9 fields: malformed
        (proto / name).write_text("\n".join(lines) + "\n")
    return root


def in_the_wild(root: Path, n: int) -> Path:
    """``release_in_the_wild/meta.csv`` (file,speaker,label) and ``<i>.wav``; one bad label."""
    base = root / "release_in_the_wild"
    base.mkdir(parents=True)
    lines = ["file,speaker,label"]
    for i in range(n):
        fake = i % 2 == 1
        sf.write(base / f"{i}.wav", audio(fake, 500 + i), SR, subtype="PCM_16")
        lines.append(f"{i}.wav,Speaker {i % 9},{'spoof' if fake else 'bona-fide'}")
    lines.append(f"{n}.wav,Speaker 0,unknown")
    (base / "meta.csv").write_text("\n".join(lines) + "\n")
    return root


FAVC_TYPES = ("RealVideo-RealAudio", "RealVideo-FakeAudio", "FakeVideo-RealAudio",
              "FakeVideo-FakeAudio")


def fakeavceleb(root: Path, identities: int) -> Path:
    """``FakeAVCeleb_v1.2/meta_data.csv`` and ``<type>/<race>/<gender>/<id>/<file>.mp4``."""
    base = root / "FakeAVCeleb_v1.2"
    base.mkdir(parents=True)
    lines = ["source,target1,target2,method,category,type,race,gender,path,"]
    for k in range(identities):
        source = f"id{k:05d}"
        for kind, cat in zip(FAVC_TYPES, "ABCD"):
            fake_audio = "FakeAudio" in kind
            method = {"A": "real", "B": "rtvc", "C": "faceswap", "D": "faceswap-wav2lip"}[cat]
            file = "00109.mp4" if cat == "A" else f"00109_{k}_id9{k:04d}_{method}.mp4"
            folder = f"FakeAVCeleb/{kind}/African/men/{source}"
            target = "-" if cat == "A" else f"id9{k:04d}"
            lines.append(f"{source},{target},-,{method},{cat},{kind},African,men,{file},{folder}")
            path = base / kind / "African" / "men" / source / file
            path.parent.mkdir(parents=True, exist_ok=True)
            make_clip(path, audio(fake_audio, 900 + 4 * k + "ABCD".index(cat)), rate=SR,
                      channels=1, duration=1.0, size=(32, 32), fps=8)
    lines.append("id99999,-,-,real,A,RealVideo-RealAudio,African,men,missing.mp4,"
                 "FakeAVCeleb/RealVideo-RealAudio/African/men/id99999")
    (base / "meta_data.csv").write_text("\n".join(lines) + "\n")
    return base
