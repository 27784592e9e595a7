"""Build the committed demo corpus under data/demo/ from Debian-packaged free recordings.

Real recorded speech (Asterisk voice prompts, Tux Paint spoken stamp descriptions) is mixed
with real recorded ambience (MegaGlest tileset ambiences, SuperTuxKart freesound loops) over
a slow pan across a real photograph (KDE Plasma and MATE wallpapers), encoded as H.264/AAC
mp4. The clean speech and environment stems are written at the level they were mixed at
(16 kHz mono), with ``sources.csv`` and ``ATTRIBUTION.md``.

The Debian packages are fetched with ``apt-get download`` into a temporary directory and
unpacked there with ``dpkg-deb``; nothing is installed system-wide. Video and audio encoding
use the static ffmpeg shipped by the ``imageio-ffmpeg`` wheel. The build is deterministic
(fixed seed, single-threaded bit-exact encoders).

What the corpus is made of (packages, voices, photographs, ambiences, licences) is
``scripts/demo_corpus_sources.py`` (imported from this script's folder, which Python puts
on ``sys.path``); this script fetches, mixes and encodes it.

Usage::

    python scripts/build_demo_corpus.py [--out data/demo] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import gzip
import math
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf
from demo_corpus_sources import (
    AST_DOC,
    AUDIO_FORMATS,
    PACKAGES,
    SCENES,
    SPEAKERS,
    ClipPlan,
    Prompt,
    Scene,
    Speaker,
    write_attribution,
)
from scipy.signal import resample_poly

SEED = 20240611
STEM_SR = 16000
N_CLIPS = 28
VIDEO_W, VIDEO_H, FPS = 384, 216, 12
REPO_ROOT = Path(__file__).resolve().parent.parent

# Asterisk prompt names that are tones, fragments or otherwise unsuitable.
# Editorial notes in the listings, and characters lost to a broken encoding ("pu? essere").
NOTE = re.compile(r"\([^)]*\)")
MOJIBAKE = re.compile(r"\w\?(\w|\s+[a-zà-ÿ])|\ufffd")
SKIP_PROMPT = re.compile(r"(tone|beep|silence|^a$|^an$|^at$|^vm-|^conf-|^digits|^letters)")


def die(msg: str) -> None:
    """Print an error and exit non-zero."""
    print(f"build_demo_corpus: error: {msg}", file=sys.stderr)
    raise SystemExit(1)


def ffmpeg_exe() -> str:
    """Return the static ffmpeg from the imageio-ffmpeg wheel."""
    try:
        import imageio_ffmpeg
    except ImportError:
        die("imageio-ffmpeg is not installed (pip install imageio-ffmpeg)")
    return str(imageio_ffmpeg.get_ffmpeg_exe())


def fetch_packages(dl_dir: Path, root: Path) -> dict[str, str]:
    """Download every package with apt-get and unpack the needed members; return versions."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        die(
            "apt-get/dpkg-deb not found: this script needs a Debian-based system to fetch the "
            "source packages. The built corpus is committed under data/demo/, so `make demo` "
            "does not need to run it."
        )
    dl_dir.mkdir(parents=True, exist_ok=True)
    names = sorted(PACKAGES)
    proc = subprocess.run(
        ["apt-get", "download", *names], cwd=dl_dir, capture_output=True, text=True
    )
    if proc.returncode != 0:
        die(
            "apt-get download failed (run `apt-get update` first?):\n" + proc.stderr.strip()[-2000:]
        )
    versions: dict[str, str] = {}
    for name in names:
        debs = sorted(dl_dir.glob(f"{name}_*.deb"))
        if not debs:
            die(f"apt-get download did not produce {name}_*.deb")
        deb = debs[-1]
        versions[name] = subprocess.run(
            ["dpkg-deb", "-f", str(deb), "Version"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dest = root / name
        dest.mkdir(parents=True, exist_ok=True)
        globs = PACKAGES[name]
        if globs is None:
            subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
        else:
            extract_members(deb, dest, globs)
        print(f"  unpacked {name} {versions[name]}", file=sys.stderr)
    return versions


def extract_members(deb: Path, dest: Path, globs: list[str]) -> None:
    """Stream ``dpkg-deb --fsys-tarfile`` and extract only members matching ``globs``."""
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    links: list[tuple[Path, str]] = []
    with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
        for member in tar:
            name = member.name.removeprefix("./")
            if not any(fnmatch.fnmatch(name, g) for g in globs):
                continue
            if member.issym() and "/" not in member.linkname:
                links.append((dest / name, member.linkname))
                continue
            if not member.isfile():
                continue
            src = tar.extractfile(member)
            if src is None:
                continue
            out = dest / name
            out.parent.mkdir(parents=True, exist_ok=True)
            with out.open("wb") as fh:
                shutil.copyfileobj(src, fh)
    if proc.wait() != 0:
        die(f"dpkg-deb --fsys-tarfile {deb.name} failed")
    for link, target in links:  # same-directory symlinks (wallpaper sizes): copy the target
        if (link.parent / target).is_file() and not link.exists():
            shutil.copyfile(link.parent / target, link)


def read_mono(path: Path) -> tuple[np.ndarray, int]:
    """Read an audio file as float64 mono."""
    data, sr = sf.read(str(path), dtype="float64", always_2d=True)
    return data.mean(axis=1), int(sr)


def read_multi(path: Path) -> tuple[np.ndarray, int]:
    """Read an audio file as float64 (frames, channels)."""
    data, sr = sf.read(str(path), dtype="float64", always_2d=True)
    return data, int(sr)


def resample(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    """Polyphase resampling along axis 0."""
    if sr_in == sr_out:
        return x.copy()
    g = math.gcd(sr_in, sr_out)
    return np.asarray(resample_poly(x, sr_out // g, sr_in // g, axis=0), dtype=np.float64)


def trim_silence(x: np.ndarray, sr: int, rel_db: float = -40.0) -> np.ndarray:
    """Trim leading/trailing frames quieter than ``rel_db`` below the loudest 20 ms frame."""
    hop = max(1, int(0.02 * sr))
    n = len(x) // hop
    if n < 2:
        return x
    rms = np.sqrt(np.mean(x[: n * hop].reshape(n, hop) ** 2, axis=1) + 1e-12)
    thr = rms.max() * 10 ** (rel_db / 20)
    idx = np.nonzero(rms > thr)[0]
    if idx.size == 0:
        return x
    start = max(0, (idx[0] - 2) * hop)
    end = min(len(x), (idx[-1] + 3) * hop)
    return x[start:end]


def asterisk_prompts(root: Path, spk: Speaker) -> list[Prompt]:
    """Prompts of one Asterisk voice with their transcripts from the package's listing."""
    listing = (
        root
        / spk.listing_package
        / AST_DOC
        / spk.listing_package
        / f"core-sounds-{spk.lang}.txt.gz"
    )
    texts: dict[str, str] = {}
    with gzip.open(listing, "rt", encoding="utf-8-sig") as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith(";") or ":" not in line:
                continue
            key, text = line.split(":", 1)
            text = " ".join(NOTE.sub("", text).split())  # drop "(voce alternativa ...)" notes
            if (
                MOJIBAKE.search(text)
                or "/" in key
                or SKIP_PROMPT.search(key)
                or not text
                or "[" in text
            ):
                continue
            words = [w for w in text.split() if sum(ch.isalpha() for ch in w) >= 2]
            if len(words) < 3 or key.strip()[-1].isdigit() or " ? " in text or "\ufffd" in text:
                continue  # spelled letters, single words, numbered fragments, bad encoding
            texts[key.strip()] = text
    sound_dir = root / spk.package / spk.sound_dir
    return [
        Prompt(sound_dir / f"{key}.wav", text)
        for key, text in sorted(texts.items())
        if (sound_dir / f"{key}.wav").is_file()
    ]


def tuxpaint_prompts(root: Path, spk: Speaker) -> list[Prompt]:
    """Tux Paint spoken stamp descriptions of one locale, with the locale's description text."""
    base = root / spk.package / spk.sound_dir
    out: list[Prompt] = []
    key = f"{spk.lang}.utf8="
    for ogg in sorted(base.rglob(f"*_desc_{spk.lang}.ogg")):
        txt = ogg.with_name(ogg.name.removesuffix(f"_desc_{spk.lang}.ogg") + ".txt")
        if not txt.is_file():
            continue
        for line in txt.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith(key):
                text = " ".join(line[len(key) :].split())
                if sum(ch.isalpha() for ch in text) >= 4:
                    out.append(Prompt(ogg, text))
                break
    return out


def load_prompts(root: Path, spk: Speaker) -> list[Prompt]:
    """Load and measure the usable prompts of one voice."""
    prompts = asterisk_prompts(root, spk) if spk.kind == "asterisk" else tuxpaint_prompts(root, spk)
    usable: list[Prompt] = []
    for p in prompts:
        info = sf.info(str(p.path))
        p.duration = float(info.duration)
        if 0.6 <= p.duration <= 4.5:
            usable.append(p)
    if len(usable) < 20:
        die(f"only {len(usable)} usable prompts for {spk.speaker_id}/{spk.lang}")
    return usable


def plan_clips(root: Path, rng: np.random.Generator) -> list[ClipPlan]:
    """Assign speakers to scene clips and choose prompts."""
    pools = {(s.speaker_id, s.lang): load_prompts(root, s) for s in SPEAKERS}
    slots = [sc for sc in SCENES for _ in range(sc.n_clips)]
    assert len(slots) == N_CLIPS, len(slots)
    # One voice per source group (as one person per source video): round-robin over the
    # voices by scene, so speakers and source groups form several disjoint components
    # and the grouped train/val/test split has something to split.
    order = [SPEAKERS[k % len(SPEAKERS)] for k, sc in enumerate(SCENES) for _ in range(sc.n_clips)]
    plans: list[ClipPlan] = []
    for i, (scene, spk) in enumerate(zip(slots, order, strict=True)):
        plan = ClipPlan(f"demo_{i + 1:03d}", spk, scene)
        pool = pools[(spk.speaker_id, spk.lang)]
        budget = float(rng.uniform(4.0, 9.0))
        used = 0.0
        for j in rng.permutation(len(pool)):
            p = pool[int(j)]
            if used + p.duration <= budget or not plan.prompts:
                plan.prompts.append(p)
                used += p.duration + 0.5
            if used >= budget - 0.6 or len(plan.prompts) >= 8:
                break
        plans.append(plan)
    return plans


def build_speech(plan: ClipPlan, rng: np.random.Generator, sr: int) -> np.ndarray:
    """Concatenate the clip's prompts with natural pauses, mono at ``sr``."""
    parts: list[np.ndarray] = []
    for k, p in enumerate(plan.prompts):
        x, psr = read_mono(p.path)
        x = trim_silence(x, psr)
        x = resample(x, psr, sr)
        x = x / (np.sqrt(np.mean(x**2)) + 1e-9)
        x *= 10 ** (rng.uniform(-2.0, 2.0) / 20)  # small level variation between prompts
        ramp = min(len(x) // 4, int(0.01 * sr))
        if ramp > 0:
            x[:ramp] *= np.linspace(0.0, 1.0, ramp)
            x[-ramp:] *= np.linspace(1.0, 0.0, ramp)
        if k:
            parts.append(np.zeros(int(rng.uniform(0.25, 0.8) * sr)))
        parts.append(x)
    return np.concatenate(parts)


def build_env(
    scene: Scene, root: Path, rng: np.random.Generator, sr: int, ch: int, n: int
) -> np.ndarray:
    """A random excerpt of the scene's ambience, (n, ch) at ``sr``, looped if too short."""
    x, asr = read_multi(root / scene.ambience.package / scene.ambience.path)
    x = resample(x, asr, sr)
    x = x[:, :2] if ch == 2 and x.shape[1] >= 2 else x.mean(axis=1, keepdims=True)
    if ch == 2 and x.shape[1] == 1:
        x = np.repeat(x, 2, axis=1)
    if len(x) < n + sr:
        reps = math.ceil((n + sr) / len(x)) + 1
        x = np.concatenate([x] * reps, axis=0)
    start = int(rng.integers(0, len(x) - n))
    seg = x[start : start + n].copy()
    fade = int(0.05 * sr)
    seg[:fade] *= np.linspace(0.0, 1.0, fade)[:, None]
    seg[-fade:] *= np.linspace(1.0, 0.0, fade)[:, None]
    return seg


def active_rms(x: np.ndarray, sr: int) -> float:
    """RMS over the 20 ms frames within 30 dB of the loudest frame (speech-active level)."""
    hop = int(0.02 * sr)
    n = len(x) // hop
    rms = np.sqrt(np.mean(x[: n * hop].reshape(n, hop) ** 2, axis=1) + 1e-12)
    act = rms[rms > rms.max() * 10 ** (-30 / 20)]
    return float(np.sqrt(np.mean(act**2)))


def video_filter(rng: np.random.Generator, dur: float) -> str:
    """ffmpeg filter for a slow pan (and slight zoom) across the still photograph."""
    big_w, big_h = VIDEO_W * 3, VIDEO_H * 3
    crop_w = int(big_w * rng.uniform(0.72, 0.82)) // 2 * 2
    crop_h = int(crop_w * VIDEO_H / VIDEO_W) // 2 * 2
    x0, x1 = (0.0, 1.0) if rng.random() < 0.5 else (1.0, 0.0)
    y0, y1 = float(rng.uniform(0.0, 1.0)), float(rng.uniform(0.0, 1.0))
    t = f"(t/{dur:.3f})"
    return (
        f"scale={big_w}:{big_h}:force_original_aspect_ratio=increase,crop={big_w}:{big_h},"
        f"crop=w={crop_w}:h={crop_h}:"
        f"x='(iw-ow)*({x0}+({x1}-{x0})*{t})':y='(ih-oh)*({y0:.3f}+({y1:.3f}-{y0:.3f})*{t})',"
        f"scale={VIDEO_W}:{VIDEO_H}:flags=bicubic,format=yuv420p"
    )


def encode_clip(
    ff: str, image: Path, wav: Path, out: Path, vf: str, dur: float, bitrate: str
) -> None:
    """Mux a panned still image and the mixed audio into an H.264/AAC mp4."""
    cmd = [
        ff,
        "-v",
        "error",
        "-y",
        "-loop",
        "1",
        "-framerate",
        str(FPS),
        "-t",
        f"{dur:.3f}",
        "-i",
        str(image),
        "-i",
        str(wav),
        "-map",
        "0:v:0",
        "-map",
        "1:a:0",
        "-vf",
        vf,
        "-r",
        str(FPS),
        "-c:v",
        "libx264",
        "-preset",
        "slow",
        "-crf",
        "30",
        "-profile:v",
        "high",
        "-pix_fmt",
        "yuv420p",
        "-g",
        str(FPS * 2),
        "-threads",
        "1",
        "-x264-params",
        "threads=1",
        "-c:a",
        "aac",
        "-b:a",
        bitrate,
        "-t",
        f"{dur:.3f}",
        "-map_metadata",
        "-1",
        "-fflags",
        "+bitexact",
        "-flags:v",
        "+bitexact",
        "-flags:a",
        "+bitexact",
        "-movflags",
        "+faststart",
        str(out),
    ]
    subprocess.run(cmd, check=True)


def render(
    plans: list[ClipPlan], root: Path, out_dir: Path, tmp: Path, rng: np.random.Generator
) -> list[dict[str, str]]:
    """Mix, encode and write every clip and its stems; return the sources.csv rows."""
    ff = ffmpeg_exe()
    for sub in ("clips", "stems/speech", "stems/env"):
        (out_dir / sub).mkdir(parents=True, exist_ok=True)
    fmt_order = [AUDIO_FORMATS[i] for i in rng.permutation(len(AUDIO_FORMATS))]
    rows: list[dict[str, str]] = []
    for plan, (sr, ch, bitrate) in zip(plans, fmt_order, strict=True):
        speech = build_speech(plan, rng, sr)
        lead, trail = rng.uniform(0.3, 1.5), rng.uniform(0.3, 1.5)
        n_lead, n_trail = int(lead * sr), int(trail * sr)
        n = n_lead + len(speech) + n_trail
        if n / sr > 11.9:
            die(f"{plan.clip_id}: {n / sr:.1f} s is too long")
        n = max(n, int(4.2 * sr))
        speech_full = np.zeros(n)
        speech_full[n_lead : n_lead + len(speech)] = speech
        env = build_env(plan.scene, root, rng, sr, ch, n)
        env_mono = env.mean(axis=1)
        snr_db = float(rng.uniform(5.0, 20.0))
        env_gain = (
            active_rms(speech_full, sr)
            / (np.sqrt(np.mean(env_mono**2)) + 1e-12)
            * 10 ** (-snr_db / 20)
        )
        env *= env_gain
        env_mono = env.mean(axis=1)
        # Speech sits (mostly) in the centre; a small random pan for stereo clips.
        pan = float(rng.uniform(-0.15, 0.15)) if ch == 2 else 0.0
        if ch == 2:
            gains = np.array([1.0 - pan, 1.0 + pan])
            speech_mc = speech_full[:, None] * gains[None, :]
        else:
            speech_mc = speech_full[:, None]
        mix = speech_mc + env
        peak_db = float(rng.uniform(-6.0, -1.5))
        g = 10 ** (peak_db / 20) / (np.max(np.abs(mix)) + 1e-12)
        mix *= g
        speech_mono = speech_mc.mean(axis=1) * g
        env_mono = env_mono * g
        wav = tmp / f"{plan.clip_id}.wav"
        sf.write(str(wav), mix.astype(np.float32), sr, subtype="FLOAT")
        rel_clip = f"clips/{plan.clip_id}.mp4"
        rel_sp = f"stems/speech/{plan.clip_id}.flac"
        rel_env = f"stems/env/{plan.clip_id}.flac"
        for rel, sig in ((rel_sp, speech_mono), (rel_env, env_mono)):
            y = resample(sig, sr, STEM_SR)
            sf.write(str(out_dir / rel), np.clip(y, -1.0, 1.0), STEM_SR, subtype="PCM_16")
        dur = n / sr
        img = root / plan.scene.package / plan.scene.image
        encode_clip(ff, img, wav, out_dir / rel_clip, video_filter(rng, dur), dur, bitrate)
        spk, sc = plan.speaker, plan.scene
        rows.append(
            {
                "clip_id": plan.clip_id,
                "path": rel_clip,
                "speaker": spk.speaker_id,
                "gender": spk.gender,
                "source_group": sc.group,
                "transcript": " ".join(p.text for p in plan.prompts),
                "scene_caption": sc.caption,
                "speech_stem": rel_sp,
                "env_stem": rel_env,
                "license": (
                    f"speech {spk.license}; ambience {sc.ambience.license}; "
                    f"image {sc.image_license}"
                ),
                "attribution": (
                    f"{spk.credit} [{spk.package}: "
                    + ", ".join(p.path.name for p in plan.prompts)
                    + f"]; {sc.ambience.credit} [{sc.ambience.package}: "
                    f"{Path(sc.ambience.path).name}]; {sc.image_credit} [{sc.package}]"
                ),
            }
        )
        print(
            f"  {plan.clip_id}: {dur:5.2f} s {sr} Hz x{ch} snr={snr_db:4.1f} dB "
            f"{spk.speaker_id}/{spk.lang} @ {sc.group}",
            file=sys.stderr,
        )
    return rows


CSV_COLUMNS = [
    "clip_id",
    "path",
    "speaker",
    "gender",
    "source_group",
    "transcript",
    "scene_caption",
    "speech_stem",
    "env_stem",
    "license",
    "attribution",
]


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO_ROOT / "data" / "demo")
    ap.add_argument("--workdir", type=Path, default=None, help="keep downloads here")
    ap.add_argument("--keep", action="store_true", help="do not delete the temporary workdir")
    args = ap.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="madbench-demo-"))
    try:
        print(f"fetching packages into {work}", file=sys.stderr)
        versions = fetch_packages(work / "debs", work / "root")
        rng = np.random.default_rng(SEED)
        plans = plan_clips(work / "root", rng)
        out_dir: Path = args.out
        if out_dir.exists():
            for sub in ("clips", "stems"):
                shutil.rmtree(out_dir / sub, ignore_errors=True)
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = work / "mix"
        tmp.mkdir(parents=True, exist_ok=True)
        rows = render(plans, work / "root", out_dir, tmp, rng)
        with (out_dir / "sources.csv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS, lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        write_attribution(out_dir, versions, plans)
        print(f"wrote {len(rows)} clips to {out_dir}", file=sys.stderr)
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
