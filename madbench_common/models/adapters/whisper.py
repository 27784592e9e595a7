"""Whisper ASR (transformers): transcript, word coverage and language id for the QC checks.

Used where the paper asks for ASR (§3.2: "usable English transcripts", 95.9 % mean ASR
coverage, no speech in the residual; §3.3: transcript preservation; §3.4: speech
leakage). The paper names no ASR model; this adapter runs ``openai/whisper-large-v3``
(:meth:`WhisperASR.transcribe`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models._hf import model_version, snapshot, torch_device
from madbench_common.models.roles import Transcript

__all__ = ["REPO", "REVISION", "WhisperASR", "mean_token_logprob", "no_speech_probability",
           "word_coverage"]

REPO = "openai/whisper-large-v3"
REVISION = "06f233fe06e710322aca913c1bc4249a0d71fce1"
_RATE = 16000


class WhisperASR:
    """Whisper large-v3: fp16 on a GPU, fp32 on the CPU."""

    slug = "qc-whisper"
    reference = False

    def __init__(self, device: str | None = None, root: str | Path | None = None) -> None:
        import torch
        from transformers import WhisperForConditionalGeneration, WhisperProcessor, pipeline

        snap = snapshot(REPO, REVISION, root)
        self.device = torch_device(device)
        self._dtype = torch.float16 if self.device.type == "cuda" else torch.float32
        self._processor = WhisperProcessor.from_pretrained(snap)
        self._model = WhisperForConditionalGeneration.from_pretrained(
            snap, dtype=self._dtype).to(self.device).eval()
        self._asr = pipeline("automatic-speech-recognition", model=self._model,
                             tokenizer=self._processor.tokenizer,
                             feature_extractor=self._processor.feature_extractor,
                             device=self.device)
        self.version = model_version(REPO, REVISION, "transformers")

    def transcribe(self, audio: Audio, sample_rate: Hertz) -> Transcript:
        """Language, transcript, coverage, no-speech probability and mean log-probability.

        Transcript: transformers' ASR pipeline in the detected language,
        ``task="transcribe"``, with word timestamps (cross-attention alignment heads of the
        checkpoint). Coverage: :func:`word_coverage`, the same definition the CPU reference
        uses. QC reads the no-speech probability and ``avg_logprob`` to tell speech from
        Whisper's hallucinations on noise (openai-whisper's no-speech rule needs both;
        :func:`madbench_common.benchmarks.madbench.stages.source_qc.asr_detects_speech`).
        """
        x = resample(np.asarray(audio, np.float32), sample_rate, _RATE)
        language, prob, no_speech = self.detect_language(x)
        out = self._asr({"raw": x, "sampling_rate": _RATE}, return_timestamps="word",
                        generate_kwargs={"language": language, "task": "transcribe"})
        duration = len(x) / _RATE
        words = tuple((str(c["text"]).strip(), *_span(c["timestamp"], duration))
                      for c in out.get("chunks", []) if str(c["text"]).strip())
        text = str(out["text"]).strip()
        return Transcript(text=text, coverage=word_coverage(words, duration),
                          words=words, language=language, language_prob=prob,
                          no_speech_prob=no_speech,
                          avg_logprob=self.avg_logprob(x, language, str(out["text"])))

    def avg_logprob(self, x: Audio, language: str, text: str) -> float:
        """openai-whisper's ``avg_logprob`` of ``text`` as the transcript of 16 kHz ``x``:
        one decoder pass over ``<|startoftranscript|><|lang|><|transcribe|>
        <|notimestamps|>`` + the text's tokens + ``<|endoftext|>`` (teacher-forced over the
        pipeline's transcript). As ``decoding.py``: the summed log-probabilities of the
        decoded text tokens and the end token, over their count, after its suppress-token
        filters."""
        tok = self._processor.tokenizer
        body = [*tok.encode(text, add_special_tokens=False), tok.eos_token_id]
        return self.tokens_logprob(x, language, body)

    def tokens_logprob(self, x: Audio, language: str, body: list[int]) -> float:
        """Mean log-probability of the decoded tokens ``body`` (ending with the end token)
        after the transcription prefix, by one teacher-forced decoder pass."""
        import torch

        tok = self._processor.tokenizer
        prefix = tok.convert_tokens_to_ids(["<|startoftranscript|>", f"<|{language}|>",
                                            "<|transcribe|>", "<|notimestamps|>"])
        ids = torch.tensor([[*prefix, *body]], device=self.device)
        features = self._processor.feature_extractor(
            x, sampling_rate=_RATE, return_tensors="pt").input_features
        with torch.inference_mode():
            logits = self._model(input_features=features.to(self.device, self._dtype),
                                 decoder_input_ids=ids[:, :-1], use_cache=False).logits[0]
        logits = logits[len(prefix) - 1:].float().cpu().clone()  # a normal tensor to mask
        # openai-whisper scores after its logit filters (SuppressTokens, SuppressBlank):
        # the checkpoint's suppressed tokens everywhere, the begin-suppressed ones first
        config = self._model.generation_config
        logits[:, list(getattr(config, "suppress_tokens", None) or [])] = -float("inf")
        logits[0, list(getattr(config, "begin_suppress_tokens", None) or [])] = -float("inf")
        return mean_token_logprob(logits, body)

    def detect_language(self, x: Audio) -> tuple[str, float, float | None]:
        """The most probable language code of 16 kHz ``x``, its probability, and the
        no-speech probability from the same decoder step.

        Whisper's own language detection: one decoder step from ``<|startoftranscript|>``
        over the audio, restricted to the language tokens (as
        ``WhisperForConditionalGeneration.detect_language`` does), softmaxed over them. The
        no-speech probability: :func:`no_speech_probability`."""
        import torch

        features = self._processor.feature_extractor(
            x, sampling_rate=_RATE, return_tensors="pt").input_features
        config = self._model.generation_config
        tokens = list(config.lang_to_id)
        start = torch.tensor([[config.decoder_start_token_id]], device=self.device)
        with torch.inference_mode():
            logits = self._model(input_features=features.to(self.device, self._dtype),
                                 decoder_input_ids=start, use_cache=False).logits[0, -1]
        probs = torch.softmax(logits[[config.lang_to_id[t] for t in tokens]].float(), dim=-1)
        best = int(torch.argmax(probs))
        no_speech = no_speech_probability(logits, self._no_speech_id())
        return tokens[best].strip("<|>"), float(probs[best]), no_speech

    def _no_speech_id(self) -> int | None:
        """The ``<|nospeech|>`` (older: ``<|nocaptions|>``) token id, if the vocabulary has it."""
        tok = self._processor.tokenizer
        for name in ("<|nospeech|>", "<|nocaptions|>"):
            tid = tok.convert_tokens_to_ids(name)
            if isinstance(tid, int) and tid != tok.unk_token_id:
                return tid
        return None


def no_speech_probability(sot_logits: Any, token_id: int | None) -> float | None:
    """openai-whisper's ``no_speech_prob``: softmax over the whole vocabulary of the logits at
    the start-of-transcript position, at the no-speech token (``None`` without one).

    As ``decoding.py`` computes it; the token is ``<|nospeech|>``, called ``<|nocaptions|>``
    in the older vocabularies. It comes from the same decoder step as the language
    detection."""
    import torch

    if token_id is None:
        return None
    return float(torch.softmax(sot_logits.float(), dim=-1)[token_id])


def mean_token_logprob(logits: Any, token_ids: list[int]) -> float:
    """Sum of ``log_softmax(logits[i])[token_ids[i]]`` over the tokens, divided by their
    count (openai-whisper's ``sum_logprobs / (len(tokens) + 1)``, where its ``tokens`` are
    the text tokens and the ``+ 1`` the end token that ``token_ids`` ends with)."""
    import torch

    logprobs = torch.log_softmax(logits.float(), dim=-1)
    picked = logprobs[torch.arange(len(token_ids)), torch.tensor(token_ids)]
    return float(picked.sum() / len(token_ids))


def _span(stamp: Any, duration: float) -> tuple[float, float]:
    start, end = stamp
    start = min(max(float(start or 0.0), 0.0), duration)
    end = duration if end is None else min(max(float(end), start), duration)
    return start, end


def word_coverage(words: tuple[tuple[str, float, float], ...], duration: float) -> float:
    """Share of ``duration`` covered by the union of the words' spans."""
    if duration <= 0:
        return 0.0
    covered, reach = 0.0, 0.0
    for _, start, end in sorted(words, key=lambda w: w[1]):
        start = max(start, reach)
        if end > start:
            covered += end - start
            reach = end
    return min(1.0, covered / duration)
