"""Source QC stage: the paper's eligibility checks (paper §3.2), every score stored.

"We retain clips with valid media, usable English transcripts, sufficient spoken
content, perceptible environmental audio, and no substantial music or media
playback"; each check and its threshold is documented on :func:`eligibility`,
:func:`env_checks` and :func:`asr_detects_speech`. The ASR and tagger checks on ê run
only for clips that pass the others (they cost the most and cannot make a failed clip
eligible); their scores are ``None`` otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.rows import SourceQCRow, SourceRow, StemRow
from madbench_common.benchmarks.madbench.stages.clips import speech_active
from madbench_common.core.errors import InputRejected
from madbench_common.media.audio import rms_dbfs
from madbench_common.models.reference.vad import coverage
from madbench_common.models.registry import load_model
from madbench_common.models.roles import ASR, VAD, AudioTagger, Segment, Transcript
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import MapStage

__all__ = ["SourceQCStage", "asr_detects_speech", "asr_identity", "clip_fraction",
           "content_words", "eligibility", "env_checks", "recovered_words", "word_recall"]

_CLIP_LEVEL = 0.999


def asr_identity(asr: ASR) -> str:
    """``"<slug> <version>"``: which ASR (and weights) produced a stored transcript."""
    return f"{asr.slug} {asr.version}"


def clip_fraction(audio: np.ndarray) -> float:
    """Share of samples at or beyond ±0.999 full scale."""
    return float(np.mean(np.abs(audio) >= _CLIP_LEVEL)) if audio.size else 0.0


def eligibility(scores: dict[str, Any], p: SourceQCStage.Params) -> tuple[str, ...]:
    """The failed checks (empty when the clip is eligible).

    Speech content: VAD coverage of ŝ ≥ ``min_speech_coverage`` (0.3, the paper gives no
    number); the transcript is the given one, else the ASR's, whose word coverage must
    reach ``min_asr_coverage`` (0.3; the paper reports 95.9 % mean). No speech in ê by VAD:
    coverage ≤ ``max_env_leakage`` (0: the paper finds none). Minimum environmental energy:
    RMS of ê ≥ ``min_env_dbfs`` (−60 dBFS; no number in the paper: ambience quieter than
    that is not perceptible beside speech). Clipping of the mixture ≤ ``max_clip_fraction``.
    """
    fails = []
    if scores["speech_coverage"] < p.min_speech_coverage:
        fails.append("low_speech_coverage")
    asr = scores["asr_coverage"]
    if asr is not None and asr < p.min_asr_coverage:
        fails.append("low_asr_coverage")
    if not scores["transcript"].strip():
        fails.append("no_transcript")
    if scores["env_leakage"] > p.max_env_leakage:
        fails.append("speech_leakage_in_env")
    if scores["env_rms_dbfs"] < p.min_env_dbfs:
        fails.append("low_env_energy")
    if scores["clip_fraction"] > p.max_clip_fraction:
        fails.append("clipping")
    return tuple(fails)


def env_checks(scores: dict[str, Any], p: SourceQCStage.Params) -> tuple[str, ...]:
    """The failed language, ASR-leakage and music checks.

    English: the ASR's language for ŝ must be in ``languages`` (``["en"]``) with
    probability ≥ ``min_language_prob`` (0: the top language decides). An ASR that cannot
    identify languages (the PocketSphinx reference: English-only) reports ``""``; the check
    is then *not applied* and the row says so (``language=""``), because any other choice
    would either reject every clip or pass it by fiat. On the cluster the QC image's
    Whisper identifies the language.

    No substantial music or media playback: the highest ``tagger`` probability over
    ``music_labels`` (AudioSet names) must stay under ``max_music_prob`` (0.5: "substantial"
    as the tagger's own decision threshold) on ê **and** on ŝ (music or singing the
    separator moved into the speech estimate is still music in the clip); ``music_prob``
    is ê's, ``speech_music_prob`` ŝ's.
    """
    fails = []
    lang = scores.get("language", "")
    if lang and (lang not in p.languages
                 or (scores.get("language_prob") or 0.0) < p.min_language_prob):
        fails.append("not_english")
    if scores.get("env_asr_speech"):
        fails.append("asr_speech_in_env")
    music = [scores.get(k) for k in ("music_prob", "speech_music_prob")]
    if any(m is not None and m >= p.max_music_prob for m in music):
        fails.append("music_or_media")
    return tuple(fails)


_FUNCTION_WORDS = frozenset((
    "the", "and", "for", "are", "but", "not", "you", "your", "all", "any", "can", "her",
    "was", "one", "our", "out", "his", "has", "had", "him", "how", "its", "may", "who",
    "did", "get", "got", "let", "she", "too", "use", "yes", "yet", "this", "that", "with",
    "have", "from", "they", "them", "then", "than", "there", "their", "what", "when",
    "where", "which", "while", "will", "would", "could", "should", "been", "were", "here",
    "into", "onto", "also", "just", "some", "such", "very", "more", "most", "only", "over",
    "these", "those", "about", "because", "being", "does", "each", "ever", "every",
    "mhm", "uhm", "hmm", "huh", "okay"))
"""English function words and fillers (3+ letters): no evidence of content when heard."""


def content_words(text: str) -> list[str]:
    """The content words of ``text``: lower-case words of 3+ letters, not function words."""
    return [w for w in re.findall(r"[^\W\d_]+", text.lower())
            if len(w) >= 3 and w not in _FUNCTION_WORDS]


def recovered_words(reference: str, hypothesis: str) -> int:
    """How many of ``reference``'s content words ``hypothesis`` holds in order (LCS)."""
    ref, hyp = content_words(reference), content_words(hypothesis)
    prev = [0] * (len(hyp) + 1)
    for r in ref:
        cur = [0]
        for j, h in enumerate(hyp, 1):
            cur.append(prev[j - 1] + 1 if r == h else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def word_recall(reference: str, hypothesis: str) -> float:
    """Share of ``reference``'s content words found in order in ``hypothesis`` (LCS)."""
    n = len(content_words(reference))
    return recovered_words(reference, hypothesis) / n if n else 0.0


def asr_detects_speech(heard: Transcript, reference: str, p: QCParams) -> bool:
    """Whether the ASR detected speech in an environment track (§3.2: "in any environmental
    residual", so the whole track, not only the source speech regions).

    ``heard`` is the ASR's transcript of the whole track, ``reference`` its words for the
    clip's ŝ (used only by an ASR without a no-speech signal). An ASR's words on non-speech
    are not evidence of speech (PocketSphinx decodes words from any noise; Whisper
    hallucinates on silence), so "detected" uses the ASR's own no-speech signal and
    *content words* (:func:`content_words`):

    - with a no-speech probability (Whisper): detected when Whisper does not call the track
      silent (:func:`whisper_silent`) **and** the transcript holds at least
      ``min_content_words`` (2) content words (a guard against hallucinated filler);
    - without one (the PocketSphinx reference): detected when at least
      ``min_content_words`` of the content words heard in ŝ are heard again in ê, in order.
      Its words on ambience are not speech (on clean demo ambience stems it decodes a few
      words each), but the clip's own words coming back are. This is weaker than Whisper's
      signal: PocketSphinx recovers few words even from loud leakage, so the VAD carries
      most of the check on the demo. ``env_asr_recall`` (the share of ŝ's content words
      recovered) stays as a diagnostic.
    """
    need = p.min_content_words
    if heard.no_speech_prob is not None:
        return (not whisper_silent(heard, p)
                and len(content_words(heard.text)) >= need)
    return recovered_words(reference, heard.text) >= need


def whisper_silent(heard: Transcript, p: QCParams) -> bool:
    """openai-whisper's no-speech rule (``transcribe.py``, ``transcribe()``): silent when
    ``no_speech_prob > no_speech_threshold``, unless ``avg_logprob > logprob_threshold``
    (the decoder was confident in what it read); without ``avg_logprob``, the first test.
    openai-whisper's defaults are 0.6 and −1.0."""
    if heard.no_speech_prob is None or heard.no_speech_prob <= p.no_speech_threshold:
        return False
    threshold = p.logprob_threshold
    return not (threshold is not None and heard.avg_logprob is not None
                and heard.avg_logprob > threshold)


MUSIC_LABELS = ("Music", "Musical instrument", "Singing", "Television", "Radio")
"""AudioSet labels that count as music or broadcast sound (both QC stages)."""


@dataclass(frozen=True)
class QCParams(StageParams):
    """The parameters both QC stages take: their models and the speech and music checks."""

    vad: str = param("", doc="registry slug of the VAD (the graph's: a QC card's)",
                     paper="§3.2, §3.4")
    asr: str = param("", doc="registry slug of the ASR", paper="§3.2, §3.4")
    tagger: str = param("", doc="registry slug of the audio tagger (AST on the cluster)",
                        paper="§3.2, §3.4")
    music_labels: list[str] = param(list(MUSIC_LABELS), doc="AudioSet labels that count as "
                                    "music or media playback")
    max_music_prob: float = param(0.5, unit="probability", doc="\"no substantial music or "
                                  "media playback\" (§3.2), \"detectable … music\" (§3.4): the "
                                  "tagger's highest probability over music_labels stays under "
                                  "this, its own decision threshold")
    no_speech_threshold: float = param(0.6, unit="probability", doc="openai-whisper's "
                                       "no-speech rule: a track is silent when no_speech_prob "
                                       "exceeds this (transcribe.py's default)")
    logprob_threshold: float | None = param(-1.0, unit="mean log-probability", doc="a track "
                                            "silent by no_speech_threshold still holds speech "
                                            "when avg_logprob exceeds this (openai-whisper's "
                                            "default; null: never)")
    min_content_words: int = param(2, unit="words", doc="ASR speech counts as detected with "
                                   "this many content words (3+ letters, no function word): "
                                   "one word is Whisper's typical hallucination on noise")
    max_clip_fraction: float = param(0.001, unit="fraction of samples", doc="\"severe … "
                                     "clipping\": more samples than this at full scale fail")
    max_env_leakage: float = param(0.0, unit="fraction of the track", paper="§3.2, §3.4",
                                   doc="VAD speech share allowed in an environment track "
                                   "(\"detect no speech in any environmental residual\")")


class SourceQCStage(MapStage[SourceQCRow]):
    """``sources`` + ``stems`` → ``source_qc``."""

    @dataclass(frozen=True)
    class Params(QCParams):
        min_speech_coverage: float = param(0.3, unit="fraction of the clip", doc="\"sufficient "
                                           "spoken content\" (§3.2) without a number: VAD "
                                           "speech share of ŝ")
        min_asr_coverage: float = param(0.3, unit="fraction of the clip", doc="\"usable "
                                        "transcripts\": the ASR's word coverage of ŝ (the paper "
                                        "reports a 95.9 % mean, not a floor)")
        languages: list[str] = param(["en"], paper="§3.2", doc="languages the ASR may find "
                                     "in ŝ (\"usable English transcripts\")")
        min_language_prob: float = param(0.0, unit="probability", doc="least probability of "
                                         "that language (0: the top language decides)")
        min_env_dbfs: float = param(-60.0, unit="dBFS", doc="\"minimum environmental-energy "
                                    "criterion\": quieter ambience is not perceptible beside "
                                    "speech")

    p: Params

    @cached_property
    def inputs(self) -> dict[str, tuple[SourceRow, StemRow]]:
        sources = {r.clip_id: r for r in self.ctx.read_input("ingest", SourceRow) if r.ok}
        stems = self.ctx.read_input("separate", StemRow)
        return {s.clip_id: (sources[s.clip_id], s) for s in stems if s.ok}

    @cached_property
    def vad(self) -> VAD:
        model: VAD = load_model(self.p.vad)
        return model

    @cached_property
    def asr(self) -> ASR:
        model: ASR = load_model(self.p.asr)
        return model

    @cached_property
    def tagger(self) -> AudioTagger:
        model: AudioTagger = load_model(self.p.tagger)
        return model

    def plan(self) -> list[str]:
        return sorted(self.inputs)

    def rejected_row(self, item: str, exc: InputRejected) -> SourceQCRow:
        return SourceQCRow(clip_id=item, status="rejected", reason=exc.reason, detail=str(exc))

    def run_item(self, item: str) -> SourceQCRow:
        src, stem = self.inputs[item]
        mix, rate = self.ctx.load_audio(src.audio_uri, src.audio_sha256)
        speech, _ = self.ctx.load_audio(stem.speech_uri, stem.speech_sha256)
        env, _ = self.ctx.load_audio(stem.env_uri, stem.env_sha256)
        segments, env_segments = self._vad_pair(speech, env, rate)
        duration = len(mix) / rate
        scores: dict[str, Any] = {
            "speech_coverage": coverage(segments, duration),
            "speech_seconds": sum(s.end - s.start for s in segments),
            "speech_starts": tuple(s.start for s in segments),
            "speech_ends": tuple(s.end for s in segments),
            "env_leakage": coverage(env_segments, duration),
            "env_rms_dbfs": rms_dbfs(env),
            "clip_fraction": clip_fraction(mix),
            **self._transcript(src, speech, rate),
        }
        fails = eligibility(scores, self.p)
        if not fails:
            scores |= self._env_scores(speech, env, rate, segments)
            fails = env_checks(scores, self.p)
        slug = f"{self.vad.slug}+{self.asr.slug if scores['transcript_source'] == 'asr' else ''}"
        return SourceQCRow(clip_id=item, eligible=not fails, fail_reasons=fails,
                           **scores).with_provenance(
            self.ctx.provenance(slug.rstrip("+"), self.vad.version))

    def _env_scores(self, speech: np.ndarray, env: np.ndarray, rate: int,
                    segments: list[Segment]) -> dict[str, Any]:
        """Language of ŝ, ASR speech detection in ê, music/media probability of ê and ŝ."""
        starts, ends = [s.start for s in segments], [s.end for s in segments]
        said = self.asr.transcribe(speech_active(speech, starts, ends, rate), rate)
        heard = self.asr.transcribe(env, rate)  # "any environmental residual": all of ê
        return {"language": said.language, "language_prob": said.language_prob,
                "speech_asr_text": said.text, "speech_asr_model": asr_identity(self.asr),
                "env_asr_text": heard.text, "env_asr_recall": word_recall(said.text, heard.text),
                "env_asr_no_speech_prob": heard.no_speech_prob,
                "env_asr_avg_logprob": heard.avg_logprob,
                "env_asr_speech": asr_detects_speech(heard, said.text, self.p),
                "music_prob": self._music(env, rate),
                "speech_music_prob": self._music(speech, rate)}

    def _music(self, audio: np.ndarray, rate: int) -> float:
        """The tagger's highest probability over the music/media-playback labels."""
        tags = self.tagger.tag(audio, rate)
        return max((tags.get(lbl, 0.0) for lbl in self.p.music_labels),
                   default=0.0)

    def _vad_pair(self, speech: np.ndarray, env: np.ndarray, rate: int) -> list[list[Segment]]:
        """VAD of ŝ and ê, batched into one pass when the model supports it."""
        many = getattr(self.vad, "segments_many", None)
        if many is not None:
            result: list[list[Segment]] = many([speech, env], rate)
            return result
        return [self.vad.segments(speech, rate), self.vad.segments(env, rate)]

    def _transcript(self, src: SourceRow, speech: np.ndarray, rate: int) -> dict[str, Any]:
        if src.transcript.strip():
            return {"transcript": src.transcript, "transcript_source": "given",
                    "asr_coverage": None}
        result = self.asr.transcribe(speech, rate)
        return {"transcript": result.text, "transcript_source": "asr",
                "asr_coverage": result.coverage}
