"""Hostile and careless inputs made here, run against one tree.

None of these inputs was used while hardening ingest (its regression tests are in
``tests/benchmarks/madbench/stages/test_hostile_sources.py``, ``tests/pipeline/test_faults.py`` and
others); they are
variations an attacker or a careless user would try next. Each attack builds a fresh
sources folder (a good clip beside the hostile row, so "the run goes on" is visible),
runs ``madbench run --until ingest`` of the tree under test in a child process with a
wall-clock limit, and reads what came out: the exit code, each row's status and reason
code, and what must not happen (a network request, outside bytes or a planted secret
in the store, a file written outside the run, a hang).

    python -m perf.attack_inputs [--tree PATH] [--out FILE] [--only NAME ...]

``--tree``: the checkout whose ``.venv/bin/python`` runs madbench (default: this one),
so the same script measures a tree before the fixes and after them. A verdict of
``held`` means the observation matched the expectation; ``FAILED`` means it did not.
The harness (the child run, its outcome, the hostile media) is ``perf/attack_harness.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import string
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from perf.attack_harness import (
    GOOD,
    GOOD2,
    GOOD3,
    LIMIT_S,
    ROOT,
    Ctx,
    Outcome,
    closed_port,
    files_under,
    http_server,
    make_av,
    make_src,
    mkv_lying_duration,
    mp4_lying_duration,
    store_contains,
    write_csv,
    written_outside_run,
)


def ingest_beside_ok(ctx: Ctx, w: Path, src: Path, *rows: dict[str, str]) -> Outcome:
    """Ingest a sources CSV in ``src`` that lists the good clip ``ok`` and then the hostile
    ``rows``: the good row shows that the bad ones fail alone."""
    return ctx.ingest(w, str(write_csv(src / "sources.csv", [
        {"clip_id": "ok", "path": "ok.mp4"}, *rows])))


# ---------------------------------------------------------------- the attacks

Result = tuple[str, bool]
"""(what was observed, whether it matched the expectation)."""


def _std(o: Outcome, clip: str, want: Callable[[str], bool], note: str = "") -> Result:
    seen = (f"rc {o.rc_text()}; ok-row {o.row('ok')}; {clip} {o.row(clip)}"
            + (f"; {note}" if note else ""))
    if o.rc not in (0,) and o.rc is not None:
        seen += f"; stderr: {o.last_error()}"
    held = o.rc == 0 and o.ok("ok") and want(o.row(clip))
    return seen, held


def _rejected(o: Outcome, clip: str) -> Callable[[str], bool]:
    return lambda _: o.quarantined(clip)


def baseline(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    o = ctx.ingest(w, str(write_csv(src / "sources.csv", [{"clip_id": "ok", "path": "ok.mp4"}])))
    return f"rc {o.rc_text()}; ok-row {o.row('ok')}; {o.seconds:.1f}s", o.rc == 0 and o.ok("ok")


def hls_http_stem(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    shutil.copy(GOOD2, src / "a.mp4")
    (src / "voice.wav").write_text(
        "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:5\n#EXTINF:5.0,\n"
        f"http://127.0.0.1:{ctx.http_port}/seg0.ts\n#EXT-X-ENDLIST\n")
    before = len(ctx.http_hits)
    o = ingest_beside_ok(
        ctx, w, src, {"clip_id": "a", "path": "a.mp4", "speech_stem": "voice.wav"})
    fetched = len(ctx.http_hits) - before
    seen, held = _std(o, "a", _rejected(o, "a"), f"HTTP requests {fetched}")
    return seen, held and fetched == 0


def hls_http_main(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    (src / "clip.mkv").write_text(
        "#EXTM3U\n#EXT-X-TARGETDURATION:5\n#EXTINF:5.0,\n"
        f"http://127.0.0.1:{ctx.http_port}/main.ts\n#EXT-X-ENDLIST\n")
    before = len(ctx.http_hits)
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "h", "path": "clip.mkv"})
    fetched = len(ctx.http_hits) - before
    seen, held = _std(o, "h", _rejected(o, "h"), f"HTTP requests {fetched}")
    return seen, held and fetched == 0


def lying_duration_mp4(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    clip = make_av(src / "liar.mp4", 40.0, extra=("-use_editlist", "0"))
    mp4_lying_duration(clip, 5.0)
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "liar", "path": "liar.mp4"})
    return _std(o, "liar", lambda r: r == "rejected/too_long")


def lying_duration_mkv(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    clip = make_av(src / "liar.mkv", 40.0)
    mkv_lying_duration(clip, 5000.0)
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "liar", "path": "liar.mkv"})
    return _std(o, "liar", lambda r: r == "rejected/too_long")


def ffconcat_row(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    outside = w / "elsewhere" / "private.mp4"
    outside.parent.mkdir()
    shutil.copy(GOOD2, outside)
    (src / "joined.mkv").write_text(
        f"ffconcat version 1.0\nfile 'ok.mp4'\nfile '{outside}'\n")
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "cat", "path": "joined.mkv"})
    return _std(o, "cat", _rejected(o, "cat"))


def csv_bom_crlf_nul(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    shutil.copy(GOOD2, src / "two.mp4")
    text = ("\ufeffclip_id,path,transcript\r\nok,ok.mp4,fine words\r\n"
            "nul,two.mp4,a NUL\x00byte\r\n")
    (src / "sources.csv").write_bytes(text.encode("utf-8"))
    o = ctx.ingest(w, str(src / "sources.csv"))
    note = "traceback" if o.traceback() else ""
    return _std(o, "nul", _rejected(o, "nul"), note)


def clip_id_traversal(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    for name in ("x1.mp4", "x2.mp4", "x3.mp4"):
        shutil.copy(GOOD2, src / name)
    csv_path = write_csv(src / "sources.csv", [
        {"clip_id": "ok", "path": "ok.mp4"},
        {"clip_id": "../../escaped", "path": "x1.mp4"},
        {"clip_id": "a/b", "path": "x2.mp4"},
        {"clip_id": "..", "path": "x3.mp4"}])
    before = files_under(w)
    o = ctx.ingest(w, str(csv_path))
    stray = written_outside_run(w, before)
    rows = "; ".join(f"{c!r} {s}/{r}" if r else f"{c!r} {s}" for c, s, r in o.rows
                     if c != "ok")
    seen = (f"rc {o.rc_text()}; ok-row {o.row('ok')}; other rows: {rows or 'none'}; "
            f"written outside run: {stray}")
    if o.rc != 0:
        seen += f"; stderr: {o.last_error()}"
    kept = [c for c, s, _ in o.rows if s == "ok" and c != "ok"]
    return seen, (o.rc == 0 and o.ok("ok") and not stray and len(o.rows) == 4
                  and not any("/" in c or c in (".", "..") for c in kept))


def symlink_loop(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    (src / "self.mp4").symlink_to("self.mp4")
    (src / "a.mp4").symlink_to("b.mp4")
    (src / "b.mp4").symlink_to("a.mp4")
    o = ingest_beside_ok(
        ctx, w, src, {"clip_id": "self", "path": "self.mp4"},
        {"clip_id": "ab", "path": "a.mp4"})
    seen, held = _std(o, "self", _rejected(o, "self"), f"ab {o.row('ab')}")
    return seen, held and o.quarantined("ab")


def zero_byte_mp4(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    (src / "empty.mp4").write_bytes(b"")
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "empty", "path": "empty.mp4"})
    return _std(o, "empty", _rejected(o, "empty"))


def s3_other_bucket_row(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    o = ingest_beside_ok(
        ctx, w, src, {"clip_id": "s3", "path": "s3://other-bucket/private/clip.mp4"})
    return _std(o, "s3", lambda r: r == "rejected/outside_sources")


def newline_file_name(ctx: Ctx, w: Path) -> Result:
    folder = w / "videos"
    folder.mkdir()
    shutil.copy(GOOD, folder / "ok.mp4")
    shutil.copy(GOOD2, folder / "bad\nname.mp4")
    o = ctx.ingest(w, str(folder))
    others = [(c, s, r) for c, s, r in o.rows if c != "ok"]
    seen = f"rc {o.rc_text()}; ok-row {o.row('ok')}; other rows {others}"
    if o.rc != 0:
        seen += f"; stderr: {o.last_error()}"
    held = o.rc == 0 and o.ok("ok") and len(others) == 1 and "\n" not in others[0][0]
    return seen, held


def proc_environ(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    key = "sk-proj-" + "".join(random.Random(19).choices(string.ascii_letters, k=40))
    (src / "env.mp4").symlink_to("/proc/self/environ")
    o = ctx.ingest(w, str(write_csv(src / "sources.csv", [
        {"clip_id": "ok", "path": "ok.mp4"},
        {"clip_id": "abs", "path": "/proc/self/environ"},
        {"clip_id": "link", "path": "env.mp4"}])), env={"OPENAI_API_KEY": key})
    leaked = store_contains(w, key.encode())
    seen, held = _std(o, "abs", lambda r: r == "rejected/outside_sources",
                      f"link {o.row('link')}; planted key in store: {leaked}")
    return seen, held and o.row("link") == "rejected/outside_sources" and not leaked


def dev_zero_link(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    (src / "zero.mp4").symlink_to("/dev/zero")
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "zero", "path": "zero.mp4"})
    seen, held = _std(o, "zero", _rejected(o, "zero"), f"{o.seconds:.0f}s")
    return seen, held


def fifo_stem(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    shutil.copy(GOOD2, src / "a.mp4")
    os.mkfifo(src / "pipe.flac")
    o = ingest_beside_ok(
        ctx, w, src, {"clip_id": "a", "path": "a.mp4", "speech_stem": "pipe.flac"})
    return _std(o, "a", _rejected(o, "a"), f"{o.seconds:.0f}s")


def dir_link_component(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    outside = w / "outside"
    outside.mkdir()
    shutil.copy(GOOD2, outside / "x.mp4")
    (src / "d").symlink_to(outside)
    (src / "sub").mkdir()
    o = ingest_beside_ok(
        ctx, w, src, {"clip_id": "dlink", "path": "d/x.mp4"},
        {"clip_id": "norm", "path": "sub/../../outside/x.mp4"})
    seen, held = _std(o, "dlink", lambda r: r == "rejected/outside_sources",
                      f"norm {o.row('norm')}")
    return seen, held and o.row("norm") == "rejected/outside_sources"


def csv_as_media(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "me", "path": "sources.csv"})
    return _std(o, "me", _rejected(o, "me"))


def video_only_stem(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    shutil.copy(GOOD2, src / "a.mp4")
    make_av(src / "amb.mp4", 5.0, audio=False)
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "a", "path": "a.mp4", "env_stem": "amb.mp4"})
    return _std(o, "a", _rejected(o, "a"))


def duplicate_clip_id(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    shutil.copy(GOOD2, src / "two.mp4")
    shutil.copy(GOOD3, src / "three.mp4")
    o = ingest_beside_ok(
        ctx, w, src, {"clip_id": "dup", "path": "two.mp4"},
        {"clip_id": "dup", "path": "three.mp4"})
    rows = "; ".join(f"{c!r} {s}/{r}" if r else f"{c!r} {s}" for c, s, r in o.rows)
    seen = f"rc {o.rc_text()}; rows: {rows}"
    dup = o.row("dup").split(",")
    return seen, (o.rc == 0 and o.ok("ok") and "rejected/duplicate_clip_id" in dup
                  and dup.count("ok") <= 1)


def utf16_csv(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    (src / "sources.csv").write_bytes("clip_id,path\nok,ok.mp4\n".encode("utf-16"))
    o = ctx.ingest(w, str(src / "sources.csv"))
    named = "sources.csv" in o.stderr
    seen = (f"rc {o.rc_text()}; rows {o.rows}; traceback {o.traceback()}; "
            f"error: {o.last_error()}")
    return seen, o.rc in (0, 3) and not o.traceback() and (o.rc == 0 or named)


def many_rows_one_file(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    one = ctx.ingest(w, str(write_csv(src / "one.csv", [{"clip_id": "ok", "path": "ok.mp4"}])),
                     run_id="one")
    o = ctx.ingest(w, str(write_csv(src / "sources.csv", [
        {"clip_id": f"c{i:03d}", "path": "ok.mp4"} for i in range(300)])))
    good = sum(s == "ok" for _, s, _ in o.rows)
    seen = (f"rc {o.rc_text()}; {good}/300 ok; 300 rows {o.seconds:.1f}s vs 1 row "
            f"{one.seconds:.1f}s")
    return seen, o.rc == 0 and good == 300 and o.seconds < 2 * one.seconds + 5


def edited_csv_and_other_path(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    csv_path = write_csv(src / "sources.csv", [{"clip_id": "ok", "path": "ok.mp4",
                                           "transcript": "first words"}])
    ctx.ingest(w, str(csv_path))
    write_csv(csv_path, [{"clip_id": "ok", "path": "ok.mp4", "transcript": "second words"}])
    ctx.ingest(w, str(csv_path))
    import pyarrow.parquet as pq

    manifest = w / "store" / "a" / "ingest" / "manifest.parquet"
    text = pq.read_table(manifest, columns=["transcript"]).to_pylist()[0]["transcript"]
    marker = w / "store" / "a" / "ingest" / "_SUCCESS"
    stamp = marker.stat().st_mtime_ns
    o = ctx.ingest(w, "src/../src/sources.csv", cwd=w)
    recomputed = marker.stat().st_mtime_ns != stamp
    seen = (f"transcript after edit {text!r}; same CSV by another path recomputed: "
            f"{recomputed} (rc {o.rc_text()})")
    return seen, text == "second words" and not recomputed and o.rc == 0


def damaged_merged_manifest(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    csv_path = write_csv(src / "sources.csv", [{"clip_id": "ok", "path": "ok.mp4"}])
    ctx.ingest(w, str(csv_path))
    manifest = w / "store" / "a" / "ingest" / "manifest.parquet"
    clean = manifest.read_bytes()
    data = bytearray(clean)
    data[len(data) // 2] ^= 0xFF
    manifest.write_bytes(bytes(data))
    st, _, st_err, _ = ctx.madbench(["status", "--store", str(w / "store"), "--run-id", "a"])
    manifest.write_bytes(bytes(data))
    o = ctx.ingest(w, str(csv_path))
    same = manifest.read_bytes() == clean
    seen = (f"status rc {st}; run --until ingest rc {o.rc_text()}; manifest restored: {same}"
            + (f"; stderr: {o.last_error()}" if o.rc != 0 else "")
            + (f"; status stderr: {st_err.strip().splitlines()[-1][:120]}"
               if st != 0 and st_err.strip() else ""))
    return seen, st == 0 and o.rc == 0 and same


def store_uri_credentials(ctx: Ctx, w: Path) -> Result:
    secret = "Zq8" + "".join(random.Random(7).choices(string.ascii_letters, k=30))
    rc, out, err, secs = ctx.madbench(
        ["run", "--sources", str(make_src(w)), "--store",
         f"s3://AKIAQQQQQQQQQQQQQQQQ:{secret}@bucket/prefix", "--run-id", "a", "--until",
         "ingest", "--no-progress"])
    echoed = secret in out or secret in err
    return (f"rc {rc if rc is not None else 'hang'} in {secs:.0f}s; secret echoed: {echoed}",
            rc == 3 and not echoed)


def store_uri_dotdot(ctx: Ctx, w: Path) -> Result:
    rc, _, err, secs = ctx.madbench(
        ["run", "--sources", str(make_src(w)), "--store", "s3://bucket/runs/../other",
         "--run-id", "a", "--until", "ingest", "--no-progress"])
    last = [ln for ln in err.splitlines() if ln.strip()][-1:] or [""]
    return (f"rc {rc if rc is not None else 'hang'} in {secs:.0f}s; {last[0][:120]}",
            rc == 3)


def _scan(ctx: Ctx, w: Path) -> dict[str, list[str]]:
    code = ("import json,sys; from pathlib import Path; "
            "from madbench_common.imagefactory.secrets_scan import scan_paths; "
            "print(json.dumps([[f.where, f.kind] for f in scan_paths([Path(sys.argv[1])])]))")
    done = subprocess.run([ctx.python, "-c", code, str(w)], capture_output=True, text=True,
                          env=ctx.env, cwd=w, timeout=LIMIT_S)
    if done.returncode != 0:
        return {"error": [done.stderr.strip().splitlines()[-1][:120]]}
    found: dict[str, list[str]] = {}
    for where, kind in json.loads(done.stdout):
        # a finding in a decoded Parquet column is at "<path>:<column>"
        found.setdefault(Path(where).name.split(":")[0], []).append(kind)
    return found


def scanner_misses(ctx: Ctx, w: Path) -> Result:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(23)
    alnum = string.ascii_letters + string.digits
    openai = "sk-proj-" + "".join(rng.choices(alnum, k=48))
    gemini = "AIza" + "".join(rng.choices(alnum, k=35))
    aws = "".join(rng.choices(alnum + "/+", k=40))
    eleven = "sk_" + "".join(rng.choices("0123456789abcdef", k=48))
    noise = ["".join(rng.choices(alnum, k=200)) for _ in range(2000)]  # no plain copy
    pq.write_table(pa.table({"note": [*noise[:1000], f"key {openai} end", *noise[1000:]]}),
                   w / "zstd.parquet", compression="zstd")
    pq.write_table(pa.table({"k": [gemini] * 500 + ["x"] * 500}), w / "dict.parquet",
                   compression="snappy", use_dictionary=True)
    (w / "sts.json").write_text(json.dumps({"Credentials": {"SecretAccessKey": aws}}))
    (w / "tts.log").write_text(f"calling voice api with key {eleven}\n")
    plain = {p.name: p.read_bytes() for p in w.glob("*.parquet")}
    assert openai.encode() not in plain["zstd.parquet"]
    found = _scan(ctx, w)
    want = ("zstd.parquet", "dict.parquet", "sts.json", "tts.log")
    seen = "; ".join(f"{n}: {','.join(found.get(n, [])) or 'missed'}" for n in want)
    if "error" in found:
        seen = f"scanner failed: {found['error']}"
    return seen, all(found.get(n) for n in want)


# ---------------------------------------------------------------- hostile classes, round 3


def folder_row(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    (src / "dir.mp4").mkdir()
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "d", "path": "dir.mp4"})
    return _std(o, "d", _rejected(o, "d"))


def megabyte_transcript(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    shutil.copy(GOOD2, src / "m.mp4")
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "m", "path": "m.mp4",
                                       "transcript": "=cmd|' /C x'!A0 " + "word " * 250_000})
    return _std(o, "m", lambda r: r == "ok")


def ids_equal_after_sanitising(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    rows = [{"clip_id": "ok", "path": "ok.mp4"}]
    for i, cid in enumerate(("a b", "a_b", "Case", "case", "caf\u00e9", "cafe\u0301",
                             "\uff58", "x")):
        shutil.copy(GOOD2, src / f"{i}.mp4")
        rows.append({"clip_id": cid, "path": f"{i}.mp4"})
    o = ctx.ingest(w, str(write_csv(src / "sources.csv", rows)))
    bad = [c for c, s, _ in o.rows if c != "ok" and s == "ok"]
    seen = f"rc {o.rc_text()}; ok-row {o.row('ok')}; accepted besides ok: {bad or 'none'}"
    return seen, o.rc == 0 and o.ok("ok") and not bad


def non_finite_stem(ctx: Ctx, w: Path) -> Result:
    import numpy as np
    import soundfile as sf

    src = make_src(w)
    shutil.copy(GOOD2, src / "a.mp4")
    x = np.zeros(16000 * 5, np.float32)
    x[99] = np.nan
    sf.write(src / "nan.wav", x, 16000, subtype="FLOAT")
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "a", "path": "a.mp4", "speech_stem": "nan.wav"})
    return _std(o, "a", _rejected(o, "a"))


def path_beyond_path_max(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    o = ingest_beside_ok(
        ctx, w, src, {"clip_id": "p", "path": "a/" * 2100 + "x.mp4"},
        {"clip_id": "n", "path": "n" * 300 + ".mp4"})
    seen, held = _std(o, "p", _rejected(o, "p"), f"n {o.row('n')}")
    return seen, held and o.quarantined("n") and not o.traceback()


def escapes_in_names(ctx: Ctx, w: Path) -> Result:
    src = make_src(w)
    name = "[bold red]x[/bold red]\x1b[2J\x1b]0;t\x07\x9b1m\u202egone.mp4"
    o = ingest_beside_ok(ctx, w, src, {"clip_id": "e", "path": name})
    raw = [f"{ch!r}" for ch in ("\x1b", "\x07", "\x9b", "\u202e") if ch in o.stderr]
    seen, held = _std(o, "e", _rejected(o, "e"), f"raw in stderr: {raw or 'none'}")
    return seen, held and not raw


@dataclass(frozen=True)
class Attack:
    name: str
    expected: str
    run: Callable[[Ctx, Path], Result]


ATTACKS = [
    Attack("baseline (one good clip)", "rc 0, ok", baseline),
    Attack("WAV stem that is an HLS playlist, http:// segment", "clip quarantined, 0 HTTP "
           "requests, ok row ok, rc 0", hls_http_stem),
    Attack("MKV main media that is an HLS playlist, http:// segment", "quarantined, 0 HTTP "
           "requests", hls_http_main),
    Attack("MP4 40 s whose mvhd/tkhd/mdhd claim 5 s", "rejected/too_long", lying_duration_mp4),
    Attack("MKV 40 s whose Segment Duration claims 5 s", "rejected/too_long",
           lying_duration_mkv),
    Attack("ffconcat list named .mkv (one file inside, one outside)", "quarantined",
           ffconcat_row),
    Attack("CSV with BOM + CRLF + a NUL byte in one row", "ok row ok, NUL row quarantined, "
           "rc 0", csv_bom_crlf_nul),
    Attack("clip ids '../../escaped', 'a/b', '..'", "a row each, none ok under such an "
           "id; nothing written outside store/<run>", clip_id_traversal),
    Attack("symlink loops (self, a->b->a)", "both quarantined, rc 0", symlink_loop),
    Attack("0-byte .mp4", "quarantined", zero_byte_mp4),
    Attack("local CSV row naming s3://other-bucket/...", "rejected/outside_sources, no S3 "
           "call", s3_other_bucket_row),
    Attack("folder mode, file name with a newline", "rc 0, ok row ok, the other row without "
           "a newline in its id", newline_file_name),
    Attack("/proc/self/environ (absolute, and via an in-root symlink) with a planted "
           "OPENAI_API_KEY", "both rejected/outside_sources, key not in the store",
           proc_environ),
    Attack("in-root symlink to /dev/zero", "quarantined, no hang", dev_zero_link),
    Attack("reference stem that is a FIFO", "quarantined, no hang", fifo_stem),
    Attack("path through an in-root dir symlink leaving the root; 'sub/../../outside'",
           "both rejected/outside_sources", dir_link_component),
    Attack("row naming the sources CSV itself as media", "quarantined", csv_as_media),
    Attack("env stem with video and no audio", "quarantined", video_only_stem),
    Attack("two rows with one clip id", "at most one ok under it, a duplicate_clip_id "
           "quarantine row",
           duplicate_clip_id),
    Attack("UTF-16 sources CSV", "rc 3 naming the file (or rows), no traceback", utf16_csv),
    Attack("300 rows naming one file", "300 ok, under 2x one row's time + 5 s",
           many_rows_one_file),
    Attack("same CSV edited, then named by another path", "edit seen; other path skipped",
           edited_csv_and_other_path),
    Attack("damaged ingest/manifest.parquet; status, then run --until ingest",
           "rc 0 and 0, manifest rebuilt byte-identical", damaged_merged_manifest),
    Attack("store URI with credentials in it", "rc 3, secret never echoed",
           store_uri_credentials),
    Attack("store URI s3://bucket/runs/../other", "rc 3 at once (not 75 after retries)",
           store_uri_dotdot),
    Attack("secret scanner: sk-proj in zstd Parquet, AIza in a snappy dictionary page, "
           "JSON SecretAccessKey, ElevenLabs sk_ in a log", "all four found", scanner_misses),
    Attack("row naming a folder called dir.mp4", "quarantined, run goes on", folder_row),
    Attack("1.25 MB transcript starting with a formula", "ok (a valid field)",
           megabyte_transcript),
    Attack("ids equal after sanitising, NFC/NFD, NFKC or case ('a b'/'a_b', 'Case'/'case', "
           "café twice, 'ｘ'/'x')", "none accepted silently", ids_equal_after_sanitising),
    Attack("speech stem with a NaN sample", "quarantined", non_finite_stem),
    Attack("paths beyond PATH_MAX and NAME_MAX", "both quarantined, no traceback",
           path_beyond_path_max),
    Attack("missing file named with ESC, OSC, BEL, C1, RLO and rich markup",
           "quarantined, no raw control byte on stderr", escapes_in_names),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, default=ROOT)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    tree = args.tree.resolve()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "MADBENCH_")) and not k.endswith(("_API_KEY", "_TOKEN"))}
    # any S3 call goes to a closed local port with made-up credentials
    env |= {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed_port()}",
            "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEEXAMPLE00", "AWS_SECRET_ACCESS_KEY": "x" * 40,
            "AWS_REGION": "us-east-1", "COLUMNS": "200", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": str(tree)}  # the tree's own code, whichever venv runs it
    commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    lines = [f"# attack table: tree {tree} at {commit}, "
             f"{time.strftime('%Y-%m-%d %H:%M:%SZ', time.gmtime())}",
             "attack | expected | observed | verdict"]
    print(lines[0], flush=True)
    with tempfile.TemporaryDirectory(prefix="madbench-attacks-") as tmp:
        ctx = Ctx(tree, Path(tmp), env)
        with http_server(ctx):
            for i, attack in enumerate(ATTACKS):
                if args.only and not any(o in attack.run.__name__ for o in args.only):
                    continue
                where = Path(tmp) / f"{i:02d}-{attack.run.__name__}"
                where.mkdir()
                try:
                    seen, held = attack.run(ctx, where)
                except Exception as exc:
                    seen, held = f"harness error: {type(exc).__name__}: {exc}", False
                line = (f"{attack.name} | {attack.expected} | {seen.replace(chr(10), ' ')} | "
                        f"{'held' if held else 'FAILED'}")
                lines.append(line)
                print(line, flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
