"""Real speech for the speech-generator adapter tests: demo stems, regions, checks.

The demo corpus (``data/demo``) holds real recorded speech; these helpers cut it into
what the speech stages hand a generator (active speech, regions, transcripts) and
check what comes back (rate, exact length, placement, silence elsewhere).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from madbench_common.core.compat import zip_strict
from madbench_common.core.types import Audio
from madbench_common.media.dsp import n_samples, place_in_regions

__all__ = ["RATE", "SpeechCase", "assert_conversion_placed", "assert_placed",
           "assert_short_reference_fails", "demo_case", "seeded_conversion"]

DEMO = Path(__file__).resolve().parents[2] / "data" / "demo"
RATE = 16000
"""The pipeline rate (ingest's ``sample_rate``)."""


@dataclass(frozen=True)
class SpeechCase:
    """One demo clip as a speech stage sees it."""

    clip_id: str
    speech: Audio
    """The full-length speech stem ŝ at :data:`RATE`."""
    transcript: str
    starts: tuple[float, ...]
    ends: tuple[float, ...]

    @property
    def active(self) -> Audio:
        """The speech inside the regions, concatenated (what the generator is given)."""
        parts = [self.speech[n_samples(s, RATE):n_samples(e, RATE)]
                 for s, e in zip_strict(self.starts, self.ends)]
        return np.concatenate(parts).astype(np.float32)

    @property
    def duration(self) -> float:
        return len(self.active) / RATE


def _regions(x: Audio, floor_db: float = -35.0, min_gap: float = 0.25) -> list[tuple[float, float]]:
    """Speech regions by a frame-energy threshold (merged across short pauses)."""
    hop = RATE // 100
    frames = x[: len(x) // hop * hop].reshape(-1, hop)
    db = 10 * np.log10(np.mean(frames.astype(np.float64) ** 2, axis=1) + 1e-12)
    on = db > db.max() + floor_db
    spans: list[tuple[float, float]] = []
    for i in np.flatnonzero(on):
        t = i * hop / RATE
        if spans and t - spans[-1][1] <= min_gap:
            spans[-1] = (spans[-1][0], t + hop / RATE)
        else:
            spans.append((t, t + hop / RATE))
    return spans


def demo_case(clip_id: str = "demo_002") -> SpeechCase:
    """A demo clip's speech stem, transcript and energy-based speech regions."""
    with (DEMO / "sources.csv").open(encoding="utf-8") as f:
        row = next(r for r in csv.DictReader(f) if r["clip_id"] == clip_id)
    speech, sr = sf.read(DEMO / row["speech_stem"], dtype="float32")
    assert sr == RATE
    spans = _regions(speech)
    return SpeechCase(clip_id, speech, row["transcript"], tuple(s for s, _ in spans),
                      tuple(e for _, e in spans))


def assert_placed(track: Audio, case: SpeechCase) -> None:
    """``track`` is clip length, silent outside the speech regions and audible inside."""
    assert track.dtype == np.float32 and len(track) == len(case.speech)
    inside = np.zeros(len(track), bool)
    for s, e in zip_strict(case.starts, case.ends):
        inside[n_samples(s, RATE):n_samples(e, RATE)] = True
    assert np.all(track[~inside] == 0.0), "non-speech regions must be digital silence"
    assert np.sqrt(np.mean(track[inside] ** 2)) > 1e-4, "speech regions must carry the fake"
    assert np.all(np.isfinite(track)) and np.max(np.abs(track)) <= 1.0


def place(speech: Audio, case: SpeechCase) -> Audio:
    """The stage's placement of generated speech into the case's regions."""
    return place_in_regions(speech, case.starts, case.ends, RATE, len(case.speech))


def seeded_conversion(vc: Any) -> Any:
    """Convert demo_002's speech into demo_010's voice with the voice converter ``vc``:
    the same seed gives the same audio and another seed other audio, float32 at the
    source's length. Returns the adapter's report of the conversion."""
    case, target = demo_case("demo_002"), demo_case("demo_010")
    kw = {"sample_rate": RATE, "duration": case.duration, "ref_audio": target.active,
          "source_audio": case.active}
    a = vc.generate(**kw, seed=5)
    report = vc.last_report
    assert np.array_equal(a, vc.generate(**kw, seed=5)), "same seed must give the same audio"
    assert not np.array_equal(a, vc.generate(**kw, seed=6))
    assert a.dtype == np.float32 and len(a) == round(case.duration * RATE)
    return report


def assert_conversion_placed(vc: Any) -> None:
    """The speech stage's path through the voice converter ``vc`` (demo_002's speech in
    demo_010's voice) places the converted speech in demo_002's speech regions."""
    from madbench_common.benchmarks.madbench.stages.speech_gen import generate_speech

    case, target = demo_case("demo_002"), demo_case("demo_010")
    track = generate_speech(vc, source=case.speech, reference=target.active, rate=RATE,
                            starts=case.starts, ends=case.ends, text=case.transcript, seed=1)
    assert_placed(track, case)


def assert_short_reference_fails(vc: Any) -> None:
    """A quarter second of reference speech fails the voice converter ``vc``'s component
    (``reference_too_short``), not the stage."""
    from madbench_common.models.speech_prep import GenerationFailed

    case = demo_case("demo_002")
    with pytest.raises(GenerationFailed, match="reference_too_short"):
        vc.generate(sample_rate=RATE, duration=1.0, ref_audio=case.active[:RATE // 4],
                    source_audio=case.active)
