"""Component QC stage: score every generated component; failures stay with their reasons.

Paper §3.3–3.4: each check is a stored score and a configurable threshold. Every
component: :func:`qc_verdict`; fake speech: transcript preservation (WER) and speaker
similarity; fake environment: speech leakage (VAD and ASR) and music. Event tags and
CLAP audio–prompt scores are diagnostics, never filters (§3.4).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.rows import ComponentRow
from madbench_common.benchmarks.madbench.stages.clips import (
    ClipInputs,
    load_clip_inputs,
    speech_active,
)
from madbench_common.benchmarks.madbench.stages.source_qc import (
    QCParams,
    asr_detects_speech,
    asr_identity,
    clip_fraction,
    word_recall,
)
from madbench_common.core.compat import zip_strict
from madbench_common.core.errors import InputRejected
from madbench_common.core.manifest import Provenance
from madbench_common.core.types import Audio
from madbench_common.media.audio import rms_dbfs
from madbench_common.media.dsp import n_samples
from madbench_common.models.reference.vad import coverage
from madbench_common.models.registry import load_model
from madbench_common.models.roles import ASR, VAD, AudioTagger, AudioTextScorer, SpeakerEmbedder
from madbench_common.models.taxonomy import load_taxonomy
from madbench_common.pipeline.paramspec import param
from madbench_common.pipeline.stage import MapStage

__all__ = ["ComponentQCStage", "english_like", "qc_verdict", "word_error_rate"]

_ENGLISH = frozenset((
    "the", "a", "an", "and", "or", "to", "of", "in", "on", "is", "are", "was", "you", "your",
    "we", "i", "it", "this", "that", "for", "with", "be", "not", "have", "has", "please",
    "call", "number", "now", "at", "from", "by", "as", "all", "no", "yes", "been", "will",
    "can"))
_SIM_BRANCHES = {"tts_same": "same", "tts_cross": "cross", "vc": "cross"}


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def english_like(text: str) -> bool:
    """ASCII-only text in which at least a fifth of the words are English function words."""
    words = _words(text)
    if not words or not text.isascii():
        return False
    return sum(w in _ENGLISH for w in words) / len(words) >= 0.2


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Levenshtein distance over words divided by the reference length (1.0 if empty)."""
    ref, hyp = _words(reference), _words(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1] / len(ref)


def _outside_db(audio: Audio, starts: Sequence[float], ends: Sequence[float], rate: int,
                ) -> float:
    mask = np.zeros(len(audio), bool)
    for s, e in zip_strict(starts, ends):
        mask[max(0, n_samples(s, rate)): n_samples(e, rate)] = True
    inside = float(np.sum(np.square(audio[mask], dtype=np.float64)))
    outside = float(np.sum(np.square(audio[~mask], dtype=np.float64)))
    if outside <= 0:
        return -120.0
    return 10.0 * np.log10(outside / max(inside, 1e-20))


def qc_verdict(row: ComponentRow, p: ComponentQCStage.Params) -> tuple[str, ...]:
    """The failed checks of a scored component (empty when it passes).

    Every component (§3.4 "duration alignment, severe silence or clipping"; §3.3
    "generation duration"): duration alignment with the source clip, silence (RMS level),
    clipping (share of samples at full scale), and the **length fix-up**: the track stored
    is always fitted to the clip, so its own length proves nothing; what the generator made
    is checked instead. ``length_correction`` (target / generated length: the time-stretch
    of fake speech, the loop or pad of an environment track shorter than the clip) must
    stay within ``1 ± max_length_correction`` (0.15: WSOLA and PSOLA stretches beyond
    ±15 % become audible as a speaking-rate change or smearing, and a loop of more than
    15 % repeats an audible stretch), else ``length_correction_exceeded``. A generator that
    reports no length (``None``) is not checked by it. Only the kinds listed in
    ``wer_gate`` fail on WER; for others it is a diagnostic.
    """
    fails = []
    if row.duration_error is None or row.duration_error > p.max_duration_error:
        fails.append("duration_mismatch")
    if row.rms_dbfs is None or row.rms_dbfs < p.min_rms_dbfs:
        fails.append("silent")
    if row.clip_fraction is not None and row.clip_fraction > p.max_clip_fraction:
        fails.append("clipping")
    if row.length_correction is not None and (
            abs(row.length_correction - 1.0) > p.max_length_correction):
        fails.append("length_correction_exceeded")
    if row.component == "env":
        return tuple(fails + _env_fails(row, p))
    if row.outside_energy_db is not None and row.outside_energy_db > p.max_outside_db:
        fails.append("speech_outside_regions")
    if row.wer is not None and row.wer_reference in p.wer_gate and row.wer > p.max_wer:
        fails.append("transcript_not_preserved")
    fails += _identity_fails(row, p)
    return tuple(fails)


def _env_fails(row: ComponentRow, p: ComponentQCStage.Params) -> list[str]:
    # Fake environment (§3.4 "detectable speech or music content ... VAD and ASR detect
    # speech leakage"): VAD speech share ≤ max_env_leakage; no music (the tagger's highest
    # probability over music_labels < max_music_prob, 0.5, the tagger's own decision
    # threshold; music_filter=false makes it a diagnostic); no ASR-detected speech; a
    # mismatched prompt must come from one of the clip's incompatible scenes ("valid
    # replacement pairing for mismatch variants"; replaced tracks are checked when
    # assembly borrows them).
    fails = []
    if row.speech_leakage is not None and row.speech_leakage > p.max_env_leakage:
        fails.append("speech_leakage")
    if row.asr_speech:
        fails.append("asr_speech_leakage")
    if p.music_filter and row.music_prob is not None \
            and row.music_prob >= p.max_music_prob:
        fails.append("music")
    if not row.scene_match and row.scene_label and (
            row.prompt_label not in load_taxonomy().fine[row.scene_label].mismatch):
        fails.append("invalid_mismatch")
    return fails


def _identity_fails(row: ComponentRow, p: ComponentQCStage.Params) -> list[str]:
    # Speaker checks: same-identity TTS must stay close to the source speaker (sim_source);
    # cross-identity TTS and voice conversion must end closer to the target than to the
    # source (sim_target − sim_source: target similarity and source leakage).
    kind = _SIM_BRANCHES.get(row.branch)
    if row.sim_source is None or kind is None:
        return []
    if kind == "same":
        return [] if row.sim_source >= p.min_same_similarity else ["speaker_changed"]
    shift = (row.sim_target or 0.0) - row.sim_source
    return [] if shift >= p.min_identity_shift else ["not_moved_to_target"]


class ComponentQCStage(MapStage[ComponentRow]):
    """Generated ``components`` of every generator stage → scored ``components``."""

    @dataclass(frozen=True)
    class Params(QCParams):
        speaker: str = param("", paper="§3.3", doc="registry slug of the speaker embedder "
                             "(ECAPA on the cluster)")
        prompt_model: str = param("", paper="§3.4", doc="registry slug of the CLAP-style "
                                  "audio–prompt scorer, a diagnostic (empty: none)")
        top_events: int = param(5, unit="labels", paper="§3.4", doc="tagger labels kept per "
                                "environment track, a diagnostic (\"AST-based event checks\")")
        env_asr_branches: list[str] = param(["t2a", "v2a", "a2a"], paper="§3.4", doc="branches "
                                            "whose environment tracks the ASR checks for "
                                            "speech leakage: every one")
        music_filter: bool = param(True, paper="§3.4", doc="music fails an environment track "
                                   "(\"detectable speech or music content\"); false: a "
                                   "diagnostic")
        max_length_correction: float = param(0.15, unit="fraction of the generated length",
                                             paper="§3.3, §3.4", doc="\"generation duration\": "
                                             "a time-stretch or loop beyond ±this is audible")
        max_duration_error: float = param(0.001, unit="s", doc="the stored track is the "
                                          "clip's length to within this")
        min_rms_dbfs: float = param(-60.0, unit="dBFS", doc="\"severe silence\": a quieter "
                                    "component fails")
        max_outside_db: float = param(-30.0, unit="dB", doc="\"timeline alignment\": fake "
                                      "speech energy outside the source speech regions, "
                                      "relative to inside")
        max_wer: float = param(0.8, unit="word error rate", doc="\"ASR-based transcript "
                               "preservation\": a fake keeps at least a fifth of the words")
        wer_gate: list[str] = param(["transcript", "asr_source"], doc="WER references that "
                                    "fail a component (others: a diagnostic)")
        asr_all: bool = param(False, doc="compare against the ASR of ŝ for every clip (a "
                              "multilingual ASR such as Whisper)")
        min_same_similarity: float = param(0.6, unit="cosine", doc="\"source-speaker "
                                           "preservation\" of same-identity TTS (the "
                                           "references' embedder; ECAPA: 0.25, speechbrain's "
                                           "same-speaker threshold)")
        min_identity_shift: float = param(0.0, unit="cosine", doc="\"target-speaker "
                                          "similarity and source-speaker leakage\": a fake "
                                          "ends closer to the target than to the source")

    p: Params

    @cached_property
    def components(self) -> dict[str, ComponentRow]:
        out = {}
        for dep in self.ctx.stage.inputs:
            if self.ctx.graph[dep].role in ("speech_generator", "env_generator"):
                out.update({r.component_id: r for r in self.ctx.read_input(dep, ComponentRow)})
        return out

    @cached_property
    def clips(self) -> dict[str, ClipInputs]:
        return load_clip_inputs(self.ctx, with_scene=True)

    @cached_property
    def models(self) -> dict[str, Any]:
        p = self.p
        return {k: load_model(getattr(p, k)) for k in ("vad", "asr", "speaker", "tagger")}

    @cached_property
    def scorer(self) -> AudioTextScorer | None:
        slug = self.p.prompt_model
        model: AudioTextScorer | None = load_model(slug) if slug else None
        return model

    def plan(self) -> list[str]:
        return sorted(self.components)

    def rejected_row(self, item: str, exc: InputRejected) -> ComponentRow:
        return dataclasses.replace(self.components[item], status="rejected",
                                   reason=exc.reason, detail=str(exc), qc_pass=False,
                                   ).with_provenance(self._prov)

    def run_item(self, item: str) -> ComponentRow:
        row = self.components[item]
        if not row.ok:
            return dataclasses.replace(row, qc_pass=False, qc_reasons=("not_generated",)
                                       ).with_provenance(self._prov)
        audio, rate = self.ctx.load_audio(row.uri, row.sha256)
        clip = self.clips[row.clip_id]
        scores: dict[str, Any] = {
            "duration_error": abs(len(audio) - round(clip.source.duration * rate)) / rate,
            "rms_dbfs": rms_dbfs(audio), "peak": float(np.max(np.abs(audio), initial=0.0)),
            "clip_fraction": clip_fraction(audio)}
        extra = self._speech_scores(row, clip, audio, rate) if row.component == "speech" \
            else self._env_scores(row, clip, audio, rate)
        scored = dataclasses.replace(row, **scores, **extra)
        fails = qc_verdict(scored, self.p)
        return dataclasses.replace(scored, qc_pass=not fails, qc_reasons=fails
                                   ).with_provenance(self._prov)

    @cached_property
    def _prov(self) -> Provenance:
        """QC provenance (the generator stays in ``generator``/``setting``)."""
        p = self.p
        slugs = "+".join((p.vad, p.asr, p.speaker, p.tagger))
        return self.ctx.provenance(slugs)

    def _env_scores(self, row: ComponentRow, clip: ClipInputs, audio: Audio, rate: int,
                    ) -> dict[str, Any]:
        """VAD and ASR speech leakage, music filter; event tags and CLAP as diagnostics.

        The ASR must detect no speech over the whole track, by the same definition as
        source QC
        (:func:`~madbench_common.benchmarks.madbench.stages.source_qc.asr_detects_speech`),
        on **every** environment component (``env_asr_branches``: all three paradigms, since
        text- and video-conditioned generators invent babble too) wherever the VAD found
        none (a VAD hit already fails it). Diagnostics, never filters (§3.4 "AST-based event
        checks and CLAP-style audio-prompt matching scores serve as diagnostic signals"):
        the tagger's top ``top_events`` labels and probabilities, and the CLAP audio–prompt
        score where a ``prompt_model`` (an ``AudioTextScorer``) is configured.
        """
        vad: VAD = self.models["vad"]
        tagger: AudioTagger = self.models["tagger"]
        p = self.p
        tags = tagger.tag(audio, rate)
        top = sorted(tags.items(), key=lambda kv: -kv[1])[: p.top_events]
        out: dict[str, Any] = {
            "speech_leakage": coverage(vad.segments(audio, rate), len(audio) / rate),
            "music_prob": max((tags.get(lbl, 0.0) for lbl in p.music_labels), default=0.0),
            "events": tuple(k for k, _ in top), "event_probs": tuple(v for _, v in top),
            "prompt_match": (self.scorer.score_texts(audio, rate, [row.prompt])[0]
                             if self.scorer is not None and row.prompt else None)}
        if row.branch in p.env_asr_branches and out["speech_leakage"] <= p.max_env_leakage:
            asr: ASR = self.models["asr"]
            heard = asr.transcribe(audio, rate)  # §3.2/§3.4: the whole track
            said = self._source_asr(row.clip_id)
            out |= {"asr_leak_recall": word_recall(said, heard.text),
                    "asr_no_speech_prob": heard.no_speech_prob,
                    "asr_avg_logprob": heard.avg_logprob,
                    "asr_speech": asr_detects_speech(heard, said, p)}
        return out

    @cached_property
    def _cache(self) -> dict[tuple[str, str], Any]:
        return {}

    def _active(self, clip_id: str) -> tuple[Audio, int]:
        key = ("active", clip_id)
        if key not in self._cache:
            c = self.clips[clip_id]
            speech, rate = self.ctx.load_audio(c.stem.speech_uri, c.stem.speech_sha256)
            self._cache[key] = (speech_active(speech, *c.regions, rate), rate)
        result: tuple[Audio, int] = self._cache[key]
        return result

    def _embedding(self, clip_id: str) -> np.ndarray:
        key = ("emb", clip_id)
        if key not in self._cache:
            embedder: SpeakerEmbedder = self.models["speaker"]
            self._cache[key] = embedder.embed(*self._active(clip_id))
        emb: np.ndarray = self._cache[key]
        return emb

    def _speech_scores(self, row: ComponentRow, clip: ClipInputs, audio: Audio, rate: int,
                       ) -> dict[str, Any]:
        # Fake speech (§3.3 "generation duration, timeline alignment and ASR-based transcript
        # preservation"): energy outside the source speech regions (they must stay silent),
        # WER (_wer) and speaker similarity (_identity_fails).
        active = speech_active(audio, *clip.regions, rate)
        emb = self.models["speaker"].embed(active, rate)
        out: dict[str, Any] = {
            "outside_energy_db": _outside_db(audio, *clip.regions, rate),
            "sim_source": float(emb @ self._embedding(row.clip_id))}
        if row.target_clip_id:
            target = self._embedding(row.target_clip_id)
            out["sim_target"] = float(emb @ target)
            out["sim_source_target"] = float(self._embedding(row.clip_id) @ target)
        return out | self._wer(row, active, rate)

    def _wer(self, row: ComponentRow, active: Audio, rate: int) -> dict[str, Any]:
        """WER against a reference the ASR can read.

        The reference ASR (PocketSphinx) is English-only while the demo's transcripts are in
        six languages, so WER is computed only where there is a usable reference: where the
        source transcript looks English, against it (``wer_reference="transcript"``); where
        the source had no transcript and ``source_qc`` transcribed ŝ with the same ASR,
        against that (``"asr_source"``: like with like). Otherwise ``wer`` stays empty with
        ``wer_reference="unsupported_language"``; ``asr_all=true`` (for a multilingual ASR
        such as Whisper on the cluster) compares against the ASR of ŝ for every clip.
        """
        clip = self.clips[row.clip_id]
        if english_like(row.prompt):
            ref, kind = row.prompt, "transcript"
        elif clip.qc.transcript_source == "asr" and _words(clip.qc.transcript):
            ref, kind = clip.qc.transcript, "asr_source"
        elif self.p.asr_all:
            ref, kind = self._source_asr(row.clip_id), "asr_source"
        else:
            return {"wer": None, "wer_reference": "unsupported_language"}
        asr: ASR = self.models["asr"]
        hyp = asr.transcribe(active, rate).text
        if not _words(ref):
            return {"asr_text": hyp, "wer": None, "wer_reference": ""}
        return {"asr_text": hyp, "wer": word_error_rate(ref, hyp), "wer_reference": kind}

    def _source_asr(self, clip_id: str) -> str:
        """The ASR's words for the source's ŝ over its speech regions: source QC's
        transcript of that same audio when the same ASR made it, else decoded here."""
        key = ("asr", clip_id)
        if key not in self._cache:
            asr: ASR = self.models["asr"]
            qc = self.clips[clip_id].qc
            self._cache[key] = qc.speech_asr_text \
                if qc.speech_asr_model == asr_identity(asr) \
                else asr.transcribe(*self._active(clip_id)).text
        text: str = self._cache[key]
        return text
