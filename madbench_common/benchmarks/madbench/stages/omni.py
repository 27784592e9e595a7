"""Omni stage (``omni_<model>``): a zero-shot omni model's answers and scores per sample and task.

Paper §4.2 and §5.1–5.4: omni models answer fixed task prompts without training —
P_bin (task ``binary``), P_4way (``fourway``), P_comp (``speech`` and ``env``, one call
each) and P_SC (``scene``) — with audio only (A) and with audio and the clip's video
(A-V), and for scene consistency also with another clip's video (§5.3, Table 4). One
:class:`~madbench_common.benchmarks.madbench.rows.ScoreRow` per (sample, task, mode,
pairing); responses are cached (:meth:`OmniStage.cache`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from madbench_common.benchmarks.madbench.eval.tasks import CORE_TASKS, SC_PROTOCOL, VARIANTS
from madbench_common.benchmarks.madbench.omni.ask import (
    Media,
    Outcome,
    ask,
    request,
    response_key,
)
from madbench_common.benchmarks.madbench.prompts import MADBENCH_PROMPTS, Question, load_prompt
from madbench_common.benchmarks.madbench.rows import SampleRow, ScoreRow
from madbench_common.benchmarks.madbench.stages.features import (
    input_sha256,
    shuffle_partners,
    shuffle_rng,
    shuffled_input,
)
from madbench_common.media.mux import sample_frames
from madbench_common.models.answer_cache import ResponseCache, ResponseKey
from madbench_common.models.batching import answer_batch
from madbench_common.models.catalog import gpu_batch
from madbench_common.models.registry import load_model
from madbench_common.models.roles import OmniAnswer
from madbench_common.pipeline.failures import free_gpu_memory, is_fault, is_gpu_oom, row_failure
from madbench_common.pipeline.paramspec import StageParams, batch_param, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["POSITIVE", "OmniStage", "omni_jobs"]

log = logging.getLogger("madbench")
POSITIVE = {"binary": "fake", "speech": "fake", "env": "fake", "scene": "inconsistent"}
"""The label whose probability is a row's ``score`` (paper: P(fake); scene: inconsistent)."""
_FRAME_PARAMS = ("fps", "frame_size", "max_frames")
_TASKS = (*CORE_TASKS, "scene")


def omni_jobs(s: SampleRow, modes: Sequence[str], scene_modes: Sequence[str],
              shuffled: bool) -> list[tuple[str, str, str]]:
    """(task, mode, pairing) questions for one sample.

    Core-protocol samples: ``binary``, ``fourway``, ``speech``, ``env`` × (A, A-V paired);
    scene-consistency samples (``protocol == "scene_consistency"``): ``scene`` × A-V
    paired, and A-V shuffled where
    :func:`~madbench_common.benchmarks.madbench.stages.features.shuffled_input` says so
    (test samples; partners from the run seed, the same for every model's stage).
    """
    if s.protocol == SC_PROTOCOL:
        jobs = [("scene", m, "paired") for m in scene_modes if m in modes]
        if shuffled and "AV" in scene_modes and "AV" in modes:
            jobs.append(("scene", "AV", "shuffled"))
        return jobs
    return [(task, m, "paired") for task in CORE_TASKS for m in modes]


class OmniStage(StageImpl[ScoreRow]):
    """``samples`` → ``scores`` for one omni model (params: model, modes, splits, prompts).

    Defaults the paper does not fix: only the ``val`` and ``test`` splits are asked
    (zero-shot models use no training data; ``val`` gives the accuracy threshold, ``test``
    the metrics); scene consistency is asked with video only (A-V), since the question is
    about the scene shown; ``max_new_tokens`` 8 (the answer is one word or letter); frame
    rate and size per model (:mod:`madbench_common.benchmarks.madbench.omni_models`).
    Without a model (the embedded default and ``smoke.yaml``) the stage plans nothing.
    """

    separable = True

    @dataclass(frozen=True)
    class Params(StageParams):
        modes: list[str] = param(["A", "AV"], paper="§5.4", doc="input modes asked, where "
                                 "the model takes them")
        scene_modes: list[str] = param(["AV"], paper="§5.3", doc="modes of the scene-"
                                       "consistency question (about the scene shown: video)")
        splits: list[str] = param(["val", "test"], doc="splits asked (zero-shot: val gives "
                                  "the accuracy threshold, test the metrics)")
        max_new_tokens: int = param(8, unit="tokens", doc="answer length (one word or "
                                    "letter)")
        fps: float = param(2.0, unit="fps", doc="frame rate (per model: its card's frames, "
                           "upstream defaults)")
        frame_size: int = param(336, unit="px (shorter side)", doc="size of the frames")
        max_frames: int = param(32, unit="frames", doc="most frames per sample (clips ≤ 12 s)")
        samples_stage: str = param("assemble", optional=True, doc="the stage whose samples "
                                   "are asked about")
        cache: bool = param(True, optional=True, doc="keep replies in the store's response "
                            "cache, so a rerun asks only what changed")
        prompts: dict[str, str] = param({}, optional=True, paper="§4.2", doc="task → "
                                        "prompt name replacing the packaged fixed prompt")
        batch: int | None = batch_param("questions")

    p: Params

    @cached_property
    def model_slug(self) -> str:
        return self.p.model or self.ctx.stage.model

    @cached_property
    def samples(self) -> dict[str, SampleRow]:
        source = self.p.samples_stage
        return {s.sample_id: s for s in self.ctx.read_input(source, SampleRow) if s.ok}

    @cached_property
    def model(self) -> Any:
        return load_model(self.model_slug)

    @cached_property
    def identity(self) -> str:
        """The loaded model's identity for the response cache (adapter code, weights pins,
        dtype, message layout with the system prompt)."""
        from madbench_common.pipeline.identity import cache_identity

        return cache_identity(self.model_slug, self.ctx.image, self.ctx.params, self.model,
                              omni=True)

    @cached_property
    def questions(self) -> dict[str, Question]:
        names = {**MADBENCH_PROMPTS, **self.p.prompts}
        return {task: load_prompt(names[task]).question(task) for task in _TASKS}

    @cached_property
    def partners(self) -> dict[str, SampleRow]:
        return shuffle_partners(sorted(self.samples.values(), key=lambda s: s.sample_id),
                                shuffle_rng(self.ctx.seed))

    @cached_property
    def cache(self) -> ResponseCache | None:
        """The response cache at the store root, keyed by model, image, prompt hash, input
        sha256s, mode, pairing, frame parameters and the model's identity (adapter code,
        weights pins, dtype, message layout): a rerun, or a new version of one prompt,
        asks only what changed."""
        return ResponseCache(self.ctx.run.store) if self.p.cache else None

    def plan(self) -> list[str]:
        if not self.model_slug:
            log.info("%s: no model in this profile (workflows/full.yaml sets one); nothing to do",
                     self.ctx.stage.name)
            return []
        splits = set(self.p.splits)
        return sorted(k for k, s in self.samples.items() if s.split in splits)

    def _modes(self) -> tuple[list[str], list[str]]:
        modes = [m for m in self.p.modes if m in self.model.modes]
        return modes, list(self.p.scene_modes)

    def batch_size(self) -> int:
        """Questions per model call: the ``batch`` parameter, else the card's ``gpu.batch``
        (:func:`~madbench_common.models.catalog.gpu_batch`), else 1."""
        return self.p.batch or gpu_batch(self.model_slug, self.ctx.stage.name)

    def run_items(self, items: Sequence[str]) -> list[ScoreRow]:
        if not items:
            return []
        prov = self.ctx.provenance(self.model.slug, self.model.version)
        modes, scene_modes = self._modes()
        jobs = {item: omni_jobs(self.samples[item], modes, scene_modes,
                                shuffled_input(self.samples[item])) for item in items}
        size = self.batch_size()
        if size > 1:
            self._prefetch([(self.samples[i], *job) for i in items for job in jobs[i]], size)
        rows = []
        try:
            for item in items:
                s = self.samples[item]
                media = _MediaLoader(self, s)
                for task, mode, pairing in jobs[item]:
                    rows.append(self._row(s, task, mode, pairing, media).with_provenance(prov))
        finally:
            self._pending.clear()
        if self.cache is not None:
            log.info("%s: %d replies from the cache, %d asked", self.ctx.stage.name,
                     self.cache.hits, self.cache.misses)
        return rows

    @cached_property
    def _pending(self) -> dict[str, OmniAnswer]:
        """Replies of a batched call by their key's digest, until the row that asked takes
        them."""
        return {}

    def _ask_args(self, s: SampleRow, task: str, mode: str, pairing: str,
                  video: SampleRow) -> dict[str, Any]:
        """What identifies one question on one input (:func:`response_key`'s arguments)."""
        inputs = (s.audio_sha256,) if mode == "A" else (s.audio_sha256, video.video_sha256)
        return {"inputs": inputs, "mode": mode, "image": self.ctx.image, "pairing": pairing,
                "max_new_tokens": self.p.max_new_tokens,
                "settings": self._settings(mode), "identity": self.identity}

    def _prefetch(self, jobs: Sequence[tuple[SampleRow, str, str, str]], size: int) -> None:
        """Ask the uncached questions of ``jobs``, ``size`` of one task and mode per model
        call, into :attr:`_pending`. A batch that raises is left to :meth:`_row`, question by
        question (batch 1), so a bad input is rejected with its own reason and the other
        questions still get their rows, identical to batch 1's."""
        todo: dict[tuple[str, str], list[tuple[ResponseKey, SampleRow, SampleRow]]] = {}
        seen: set[str] = set()
        for s, task, mode, pairing in jobs:
            video = s if pairing == "paired" else self.partners.get(s.sample_id)
            if video is None:
                continue
            key = response_key(self.model, self.questions[task],
                               **self._ask_args(s, task, mode, pairing, video))
            if key.digest() in seen or (self.cache is not None and self.cache.store.exists(
                    self.cache.key_path(key))):
                continue
            seen.add(key.digest())
            todo.setdefault((task, mode), []).append((key, s, video))
        for (task, mode), asks in todo.items():
            for chunk in (asks[i:i + size] for i in range(0, len(asks), size)):
                if len(chunk) > 1:
                    self._ask_chunk(task, mode, chunk)

    def _ask_chunk(self, task: str, mode: str,
                   chunk: Sequence[tuple[ResponseKey, SampleRow, SampleRow]]) -> None:
        max_new = self.p.max_new_tokens
        try:
            requests = [request(self.questions[task], _MediaLoader(self, s).load(mode, video),
                                max_new) for _, s, video in chunk]
            replies = answer_batch(self.model, requests)
        except Exception as exc:  # each question again alone, in _row, with its own reason
            if is_gpu_oom(exc):
                free_gpu_memory()
            log.warning("%s: a batch of %d %s/%s questions failed (%s: %s); asking them one "
                        "by one", self.ctx.stage.name, len(chunk), task, mode,
                        type(exc).__name__, exc)
            return
        for (key, _, _), reply in zip(chunk, replies):
            self._pending[key.digest()] = reply

    def _row(self, s: SampleRow, task: str, mode: str, pairing: str,
             media: _MediaLoader) -> ScoreRow:
        """One row: ``score`` = P(positive) from the first-token logits (P(fake), or
        P(inconsistent) for scene), ``probs`` the four-way R, S, E, Q distribution,
        ``answer`` the greedy text, ``parsed`` its label (``refusal``/``unparsed``
        included), ``prompt_hash`` the question's hash, ``excluded`` when there is neither
        a score nor a parsed label; ``sample_sha256`` the input's content hash (audio, or
        audio + video as in the feature stages)."""
        video = s if pairing == "paired" else self.partners.get(s.sample_id)
        base = {"sample_id": s.sample_id, "mode": mode, "pairing": pairing, "task": task,
                "model": self.model.slug, "prompt_hash": self.questions[task].hash}
        if video is None:
            return ScoreRow(**base, status="rejected", reason="no_shuffle_partner")
        sha = input_sha256(mode, s.audio_sha256, video.video_sha256)
        try:
            args = self._ask_args(s, task, mode, pairing, video)
            answered = self._pending.pop(response_key(
                self.model, self.questions[task], **args).digest(), None) if self._pending \
                else None
            out = ask(self.model, self.questions[task], load=lambda: media.load(mode, video),
                      cache=self.cache, answered=answered, **args)
        except Exception as exc:  # quarantines this row, unless the whole stage must fail
            failed = row_failure(exc, f"{s.sample_id} {task} {mode}/{pairing}")
            log.warning("%s: %s %s %s/%s failed: %s", self.ctx.stage.name, s.sample_id, task,
                        mode, pairing, failed)
            # a fault (device, code, memory) keeps its reason: it counts against the budget
            reason = failed.reason if is_fault(failed.reason) else "omni_failed"
            return ScoreRow(**base, sample_sha256=sha, status="rejected", reason=reason,
                            detail=f"{s.sample_id} {task} {mode}/{pairing}: {failed.detail}"[:500])
        return ScoreRow(**base, sample_sha256=sha, **_outcome_columns(task, out))

    def _settings(self, mode: str) -> dict[str, Any]:
        return {k: self.ctx.params.get(k) for k in _FRAME_PARAMS} if mode == "AV" else {}


def _outcome_columns(task: str, out: Outcome) -> dict[str, Any]:
    cols: dict[str, Any] = {"answer": out.answer.text[:500], "parsed": out.parsed,
                            "excluded": out.excluded}
    if out.probs is not None:
        if task == "fourway":
            cols["probs"] = out.probs.ordered(VARIANTS)
        else:
            cols["score"] = out.probs.probs[POSITIVE[task]]
    return cols


class _MediaLoader:
    """Decodes a sample's audio and a video's frames once per item, on first need."""

    def __init__(self, stage: OmniStage, sample: SampleRow) -> None:
        self.stage, self.sample = stage, sample
        self._audio: tuple[Any, int] | None = None
        self._frames: dict[str, tuple[Any, float]] = {}

    def load(self, mode: str, video: SampleRow) -> Media:
        ctx = self.stage.ctx
        if self._audio is None:
            self._audio = ctx.load_audio(self.sample.audio_uri, self.sample.audio_sha256)
        audio, rate = self._audio
        if mode == "A":
            return Media(audio, rate)
        if video.video_sha256 not in self._frames:
            self._frames[video.video_sha256] = self._decode(video)
        frames, fps = self._frames[video.video_sha256]
        if not len(frames):
            raise ValueError(f"{video.video_uri}: no video frames decoded")
        return Media(audio, rate, frames, fps)

    def _decode(self, video: SampleRow) -> tuple[Any, float]:
        ctx, p = self.stage.ctx, self.stage.p
        with ctx.tempdir() as tmp:
            path = tmp / "video.mp4"
            path.write_bytes(ctx.run.get_bytes(ctx.run.key_of(video.video_uri),
                                               video.video_sha256))
            return sample_frames(path, fps=float(p.fps), size=p.frame_size,
                                 max_frames=p.max_frames)
