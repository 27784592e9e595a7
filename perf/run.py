"""Run every benchmark in its own process, then print each figure beside its floor.

Floors (from the issues): ingest + source QC ≥ 50× real time and S3/file wall time
≤ 1.3; assembly ≥ 200× real time; all heads for all tasks ×
3 protocols × 2 input modes at paper scale ≤ 20 s; ≥ 90 % of the demo's
clean-speech-over-ambience clips with no speech in ê by VAD and ASR; every
SIGKILL seed survived with no finished shard redone, orchestration < 5 % of the real
stages at the paper's scale with merge memory flat in the shard count, hostile media
refused within 10 s. Results: ``.bench/*.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / ".bench"
BENCHES = (
    ["-m", "perf.bench_pipeline"],
    ["-m", "perf.bench_generators"],
    ["-m", "perf.bench_build"],
    ["-m", "perf.bench_eval"],
    ["-m", "perf.bench_separation"],
    ["-m", "perf.bench_media"],
    ["-m", "perf.bench_memory"],
    ["-m", "perf.bench_scale"],
    ["-m", "perf.bench_faults"],
)


def _floors() -> list[tuple[str, float, str, bool]]:
    """(figure, value, floor, met) rows from the JSON results."""
    p = json.loads((OUT / "pipeline.json").read_text())
    b = json.loads((OUT / "build.json").read_text())
    e = json.loads((OUT / "eval.json").read_text())
    sep = json.loads((OUT / "separation.json").read_text())["share"]
    qc, ratio = p["ingest+source_qc_x_realtime"], p["s3_over_file"]
    asm = b["assembly"]["assembly_x_realtime"]
    return [
        ("ingest + source_qc (× real time)", qc, "≥ 50", qc >= 50),
        ("S3 / file wall time", ratio, "≤ 1.3", ratio <= 1.3),
        ("assembly (× real time)", asm, "≥ 200", asm >= 200),
        ("all heads, paper scale (s)", e["seconds"], "≤ 20", e["seconds"] <= 20),
        ("demo clips with no speech in ê (share)", sep, "≥ 0.9", sep >= 0.9),
        ("heads vs sklearn defaults (× faster)", e.get("speedup", float("nan")), "—", True),
        *_hardening_floors(),
    ]


def _hardening_floors() -> list[tuple[str, float, str, bool]]:
    """Faults survived, orchestration overhead and memory at the paper's scale."""
    f = json.loads((OUT / "faults.json").read_text())
    s = json.loads((OUT / "scale.json").read_text())
    m = json.loads((OUT / "media.json").read_text())
    seeds = f["file"]["seeds"] + f["s3"]["seeds"]
    survived = f["file"]["survived"] + f["s3"]["survived"]
    redone = f["file"]["finished_shards_redone_total"] + f["s3"]["finished_shards_redone_total"]
    slowest = max(h["seconds"] for h in m["hostile"].values())
    mem = json.loads((OUT / "memory.json").read_text())
    unmeasured = sum(not v["peak_rss_mb"] for v in mem["stages"].values())
    return [
        ("stages without a measured peak RSS", unmeasured, "= 0", unmeasured == 0),
        ("largest stage peak RSS, demo (MB)", mem["largest_peak_mb"], "—", True),
        ("SIGKILL seeds survived (file + S3)", survived, f"= {seeds}", survived == seeds),
        ("finished shards computed again", redone, "= 0", redone == 0),
        ("orchestration / real stages, paper scale (%)", s["overhead_pct"], "< 5",
         s["overhead_pct"] < 5),
        ("merge's own memory, max/min over shards", s["merge_memory_ratio"],
         f"≤ {s['flat_ratio']}", bool(s["merge_memory_flat"])),
        ("assemble merge process peak RSS (MB)", s["merge_process_peak_mb"],
         f"≤ {s['merge_pod_memory_mb']}", s["merge_process_peak_mb"] <= s["merge_pod_memory_mb"]),
        ("slowest hostile-media rejection (s)", slowest, "≤ 10", slowest <= 10),
    ]


def main() -> int:
    OUT.mkdir(exist_ok=True)
    for args in BENCHES:
        print(f"== {' '.join(args)}", flush=True)
        subprocess.run([sys.executable, *args], cwd=REPO, check=True)
    rows = _floors()
    print(f"\n{'figure':<40}{'value':>10}  floor   met")
    for name, value, floor, met in rows:
        print(f"{name:<40}{value:>10.2f}  {floor:<6}  {'yes' if met else 'NO'}")
    return 0 if all(met for *_, met in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
