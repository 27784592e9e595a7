"""Separator residual check: share of demo clips whose ê has no speech by VAD and by ASR.

On clean speech over natural ambience (the 28 demo clips), at least
90 % of clips must be eligible with no speech in ê = x − ŝ, by Silero VAD (no segment)
and by the ASR (the share of ASR(ŝ)'s words recovered from ASR(ê) over the speech
regions under 0.5, as source QC checks it). Prints JSON and writes
``.bench/separation.json``. (DFN3's output alone left speech in 16 of the 28 residuals
by VAD; see ``madbench_common/models/reference/separator.py``.)
"""

from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

from madbench_common.benchmarks.madbench.stages.clips import speech_active
from madbench_common.benchmarks.madbench.stages.source_qc import word_recall
from madbench_common.media.audio import decode_audio
from madbench_common.models.reference.asr import PocketSphinxASR
from madbench_common.models.reference.separator import DeepFilterSeparator
from madbench_common.models.reference.vad import SileroVAD, coverage
from perf.results import save

REPO = Path(__file__).resolve().parents[1]

DEMO = REPO / "data" / "demo"
RATE = 16000


def _clip(sep: DeepFilterSeparator, vad: SileroVAD, asr: PocketSphinxASR,
          path: Path) -> dict[str, float]:
    x = decode_audio(path, RATE)
    s_hat = sep.separate(x, RATE)
    e_hat = x - s_hat
    speech, env = vad.segments_many([s_hat, e_hat], RATE)
    starts, ends = [s.start for s in speech], [s.end for s in speech]
    said = asr.transcribe(speech_active(s_hat, starts, ends, RATE), RATE).text
    heard = asr.transcribe(speech_active(e_hat, starts, ends, RATE), RATE).text
    return {"vad": coverage(env, len(x) / RATE), "asr_recall": word_recall(said, heard)}


def main() -> int:
    with open(DEMO / "sources.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    sep, vad, asr = DeepFilterSeparator(), SileroVAD(), PocketSphinxASR()
    start = time.perf_counter()
    per = {r["clip_id"]: _clip(sep, vad, asr, DEMO / r["path"]) for r in rows}
    ok = [c for c, v in per.items() if v["vad"] == 0.0 and v["asr_recall"] < 0.5]
    result = {"clips": len(per), "eligible_no_speech_in_env": len(ok),
              "share": len(ok) / max(len(per), 1),
              "vad_hits": sum(v["vad"] > 0 for v in per.values()),
              "asr_hits": sum(v["asr_recall"] >= 0.5 for v in per.values()),
              "max_asr_recall": max((v["asr_recall"] for v in per.values()), default=0.0),
              "seconds": time.perf_counter() - start, "separator": sep.version,
              "per_clip": per}
    save("separation", result)
    print(json.dumps({k: v for k, v in result.items() if k != "per_clip"}, indent=1))
    return 0 if np.isfinite(result["share"]) else 1


if __name__ == "__main__":
    sys.exit(main())
