"""Reference ASR: CMU PocketSphinx 5 with the US English model shipped in its wheel."""

from __future__ import annotations

import numpy as np

from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models.roles import Transcript

__all__ = ["PocketSphinxASR"]

_RATE = 16000
_FRAME_RATE = 100  # pocketsphinx segment times are in 10 ms frames
_PRUNING = {"maxhmmpf": 3000, "maxwpf": 5, "fwdflat": False, "bestpath": False}
"""Search limits: QC transcribes every residual and environment component, where the
default search explodes on noise. On demo speech and ambience these settings decode
1.8× faster with near-identical transcripts of the speech (measured on two clips)."""


class PocketSphinxASR:
    """English transcription; ``coverage`` = share of decoded speech time in real words."""

    slug = "ref-pocketsphinx"
    reference = True

    def __init__(self) -> None:
        from importlib.metadata import version

        from pocketsphinx import Decoder

        self.version = f"pocketsphinx-{version('pocketsphinx')}-en-us-pruned"
        self._decoder = Decoder(samprate=_RATE, loglevel="FATAL", **_PRUNING)

    def transcribe(self, audio: Audio, sample_rate: Hertz) -> Transcript:
        x = resample(audio, sample_rate, _RATE)
        pcm = (np.clip(x, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()
        dec = self._decoder
        # The decoder carries its feature state (the cepstral mean, even with batch CMN)
        # from one utterance to the next, so a transcript would depend on what the process
        # decoded before: shard order, a resumed run. Each utterance starts afresh.
        dec.reinit_feat()
        dec.start_utt()
        dec.process_raw(pcm, full_utt=True)
        dec.end_utt()
        words = tuple(
            (_clean(seg.word), seg.start_frame / _FRAME_RATE, (seg.end_frame + 1) / _FRAME_RATE)
            for seg in dec.seg()
            if _is_word(seg.word)
        )
        text = " ".join(w for w, _, _ in words)
        spoken = sum(end - start for _, start, end in words)
        total = len(x) / _RATE
        return Transcript(text=text, coverage=min(1.0, spoken / total) if total else 0.0,
                          words=words)


def _is_word(token: str) -> bool:
    return not (token.startswith("<") or token.startswith("[") or token.startswith("+"))


def _clean(token: str) -> str:
    return token.split("(")[0].lower()
