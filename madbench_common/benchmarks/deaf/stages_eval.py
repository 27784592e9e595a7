"""DEAF evaluation stages: trials, one answer stage per model, the judge, and the metrics.

``deaf_trials`` (:class:`TrialsStage`: every trial of L1–L3 over the run's ok clips),
``answer_<model>`` (:class:`AnswerStage`: every query answered ``repeats`` times by one
``OmniModel``, through the response cache), ``deaf_judge`` (:class:`JudgeStage`: each
answer judged against its trial's key) and ``deaf_metrics`` (:class:`MetricsStage`,
:func:`model_metrics`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from madbench_common.benchmarks.deaf import metrics as mx
from madbench_common.benchmarks.deaf.cache import ResponseCache, cache_key, open_cache
from madbench_common.benchmarks.deaf.design import CONFLICTS, EXTENSION_LEVEL, LEVELS
from madbench_common.benchmarks.deaf.judge import (
    DEFAULT_MODE,
    JUDGE_MAX_TOKENS,
    MODES,
    R1_BASE_URL,
    R1_MODEL,
    LLMJudge,
    RuleJudge,
    Verdict,
    judge_answer,
)
from madbench_common.benchmarks.deaf.prompts import load_judge_prompt, load_prompts
from madbench_common.benchmarks.deaf.rows import (
    AnswerRow,
    MetricRow,
    StimulusRow,
    TrialRow,
    VerdictRow,
)
from madbench_common.benchmarks.deaf.stages_stimuli import instantiate
from madbench_common.benchmarks.deaf.trials import build_trials
from madbench_common.core.store import open_store
from madbench_common.core.types import Audio
from madbench_common.models.adapters.openai_compat import ChatClient
from madbench_common.models.answer_cache import ResponseCache as OmniCache
from madbench_common.models.answer_cache import ResponseKey
from madbench_common.models.http_api import ApiError
from madbench_common.models.roles import OmniAnswer
from madbench_common.pipeline.failures import model_rejection, row_failure
from madbench_common.pipeline.paramspec import StageParams, param
from madbench_common.pipeline.stage import StageImpl

__all__ = ["AnswerStage", "JudgeStage", "MetricsStage", "TrialsStage", "model_metrics"]

log = logging.getLogger("madbench")
_SR = 16000


class TrialsStage(StageImpl[TrialRow]):
    """Trials over the ok clips of every input stage, with the prompt file's version."""

    @dataclass(frozen=True)
    class Params(StageParams):
        prompts: str = param("", paper="§2.2", doc="a prompt file replacing the packaged "
                             "questions")

    p: Params

    @cached_property
    def trials(self) -> dict[str, TrialRow]:
        clips = [r for dep in self.ctx.stage.inputs
                 for r in self.ctx.read_input(dep, StimulusRow) if r.ok]
        prompts = load_prompts(self.p.prompts)
        return {t.trial_id: t for t in build_trials(clips, prompts)}

    def plan(self) -> list[str]:
        return sorted(self.trials)

    def run_items(self, items: Sequence[str]) -> list[TrialRow]:
        prov = self.ctx.provenance()
        return [self.trials[i].with_provenance(prov) for i in items]


def _read_trials(ctx: Any) -> list[TrialRow]:
    return [t for t in ctx.read_input("deaf_trials", TrialRow) if t.ok]


class AnswerStage(StageImpl[AnswerRow]):
    """One model's answers to every query, ``repeats`` times (params: ``model``,
    ``model_args``, ``repeats``, ``max_new_tokens``, ``cache``).

    §3.1: three independent repeats; each query is a 16 kHz WAV and the prompt. A failed
    API call quarantines that answer (``api_error``); a missing key, weight or spend cap
    stops the stage (exit 3).

    Replies go through the omni response cache (:mod:`madbench_common.models.answer_cache`), keyed
    by the model and its version, this stage's image, the prompt's hash, the clip's
    sha256 and the repeat, so a rerun asks only what changed.
    """

    @dataclass(frozen=True)
    class Params(StageParams):
        model_args: dict[str, Any] | str = param({}, doc="the model's constructor arguments "
                                                 "(a mapping or its JSON)")
        cache: str = param("", doc="the response cache: empty, the run's store; a store URI; "
                           "off")
        repeats: int = param(3, unit="repeats", paper="§3.1", doc="independent answers per "
                             "query (\"repeated three times\")")
        max_new_tokens: int = param(256, optional=True, unit="tokens", doc="answer length")

    p: Params

    @cached_property
    def queries(self) -> dict[str, tuple[str, str]]:
        out = {}
        for t in _read_trials(self.ctx):
            out[t.test_query] = (t.test_stimulus, t.prompt)
            if t.control_query:
                out[t.control_query] = (t.control_stimulus, t.prompt)
        return out

    @cached_property
    def stimuli(self) -> dict[str, StimulusRow]:
        return {r.stimulus_id: r for dep in self.ctx.stage.inputs if dep != "deaf_trials"
                for r in self.ctx.read_input(dep, StimulusRow)}

    @cached_property
    def model(self) -> Any:
        return instantiate(self.p.model or self.ctx.stage.model, self.p.model_args or {})

    @cached_property
    def cache(self) -> OmniCache | None:
        setting = self.p.cache
        if setting == "off":
            return None
        return OmniCache(open_store(setting) if setting else self.ctx.run.store)

    def plan(self) -> list[str]:
        repeats = self.p.repeats
        return [f"{q}#{r}" for q in sorted(self.queries) for r in range(repeats)]

    def run_items(self, items: Sequence[str]) -> list[AnswerRow]:
        audio: dict[str, Audio] = {}
        return [self._answer(item, audio) for item in items]

    def _key(self, prompt: str, stim: StimulusRow, repeat: int) -> ResponseKey:
        tokens = self.p.max_new_tokens
        return ResponseKey(self.model.slug, self.model.version, self.ctx.image,
                           hashlib.sha256(prompt.encode()).hexdigest()[:16],
                           (stim.audio_sha256,), "A", "paired",
                           {"repeat": repeat, "max_new_tokens": tokens, "rate": _SR,
                            "args": self.ctx.params.get("model_args") or {}}, self.identity)

    @cached_property
    def identity(self) -> str:
        """The loaded model's identity for the response cache (adapter code, weights pins,
        dtype, message layout)."""
        from madbench_common.pipeline.identity import cache_identity

        slug = self.p.model or self.ctx.stage.model
        return cache_identity(slug, self.ctx.image, self.ctx.params, self.model, omni=True)

    def _answer(self, item: str, audio: dict[str, Audio]) -> AnswerRow:
        query, _, repeat = item.rpartition("#")
        stimulus_id, prompt = self.queries[query]
        stim = self.stimuli[stimulus_id]
        base = AnswerRow(answer_id=item, query_id=query, repeat=int(repeat),
                         stimulus_id=stimulus_id, prompt=prompt)
        prov = self.ctx.provenance(self.model.slug, self.model.version)

        def ask() -> OmniAnswer:
            if stimulus_id not in audio:
                audio.clear()  # queries are sorted by stimulus: keep one clip at a time
                audio[stimulus_id] = self.ctx.load_audio(stim.audio_uri, stim.audio_sha256)[0]
            return self.model.answer(prompt, audio[stimulus_id], _SR,
                                     max_new_tokens=self.p.max_new_tokens)

        try:
            if self.cache is None:
                ans, cached = ask(), False
            else:
                ans, cached = self.cache.fetch(self._key(prompt, stim, int(repeat)), ask)
        except (ApiError, RuntimeError, ValueError) as exc:
            reason = "api_error" if isinstance(exc, ApiError) else _inference_reason(exc, item)
            return _replace(base, status="rejected", reason=reason,
                            detail=str(exc)[:500]).with_provenance(prov)
        return _replace(base, text=ans.text, cached=cached,
                        seconds=ans.seconds).with_provenance(prov)


def _inference_reason(exc: Exception, item: str) -> str:
    """``inference_failed`` for a data error; a device, memory or code fault's own reason
    (it counts against the stage's rejection budget)."""
    try:
        return model_rejection(exc, item, "inference_failed", "inference_error").reason
    except Exception as oom:  # GPU out of memory: this stage does not batch, count it
        return row_failure(oom, item).reason


def _replace(row: Any, **kw: Any) -> Any:
    return dataclasses.replace(row, **kw)


class JudgeStage(StageImpl[VerdictRow]):
    """Verdicts for every (answer stage, trial, role, repeat) (params: ``mode``,
    ``judge_base_url``, ``judge_model_id``, ``judge_key_env``, ``judge_max_tokens``,
    ``judge_prompt``, ``cache``).

    §2.4: by default every answer by the LLM judge (DeepSeek-R1, §3.1); ``mode=rule`` is
    the offline keyword option and ``rule+llm`` sends only what the rules leave undecided
    (:mod:`.judge`). Each verdict records which judge decided and the judge prompt's
    version; LLM verdicts are cached too. An answer stage that failed is skipped (its model
    gets no verdicts, no metrics, and an "absent" row in the report)."""

    @dataclass(frozen=True)
    class Params(StageParams):
        mode: str = param(DEFAULT_MODE, paper="§2.4", doc="llm (every answer by the LLM "
                          "judge), rule (offline keywords) or rule+llm (the LLM for what the "
                          "rules leave undecided)")
        judge_base_url: str = param(R1_BASE_URL, paper="§3.1", doc="the LLM judge's "
                                    "OpenAI-compatible endpoint (env:VAR/… reads it from $VAR)")
        judge_model_id: str = param(R1_MODEL, paper="§3.1", doc="the judge model "
                                    "(DeepSeek-R1)")
        judge_key_env: str = param("JUDGE_API_KEY", doc="the environment variable holding "
                                   "the judge's API key")
        judge_max_tokens: int = param(JUDGE_MAX_TOKENS, unit="tokens", doc="the judge's "
                                      "reply length (R1 reasons before it answers)")
        judge_prompt: str = param("", paper="§2.4", doc="a judge prompt file replacing the "
                                  "packaged one")
        cache: str = param("", doc="the verdict cache: empty, the run's store; a store URI; "
                           "off")
        rpm: float = param(60.0, optional=True, unit="requests per minute", doc="the judge's "
                           "request rate")
        spend_cap_usd: float = param(20.0, optional=True, unit="USD", doc="the judge's "
                                     "spending cap for the run")

    p: Params

    @staticmethod
    def preflight(params: Mapping[str, Any]) -> list[str]:
        """What the judge needs before the run starts: an endpoint and its key (the LLM
        modes), checked by :mod:`madbench_common.pipeline.preflight`."""
        mode = str(params["mode"])
        if mode not in MODES:
            return [f"judge mode {mode!r} not in {MODES}"]
        if mode == "rule":
            return []
        url = str(params["judge_base_url"])
        if not url:
            return [] if mode == "rule+llm" else [
                "judge mode 'llm' needs judge_base_url (or --judge-mode rule, offline)"]
        out = []
        if url.startswith("env:") and not os.environ.get(url[4:].partition("/")[0]):
            out.append(f"judge_base_url {url!r}: ${url[4:].partition('/')[0]} is not set")
        key = str(params["judge_key_env"])
        if key and not os.environ.get(key):
            out.append(f"API key ${key} of the LLM judge ({params['judge_model_id']} "
                       f"at {url}) is not set; or run the offline keyword rules: "
                       "--judge-mode rule")
        return out

    @cached_property
    def trials(self) -> dict[str, TrialRow]:
        return {t.trial_id: t for t in _read_trials(self.ctx)}

    @cached_property
    def answers(self) -> dict[str, dict[tuple[str, int], AnswerRow]]:
        """Answers per answer stage that finished; a failed one (an optional input that is
        absent) is left out here and named as absent by the report."""
        out = {}
        for dep in self.ctx.stage.inputs:
            if dep == "deaf_trials":
                continue
            if dep in self.ctx.stage.optional_inputs and not self.ctx.has_input(dep):
                log.warning("deaf_judge: %s has no answers (the stage failed or did not "
                            "run); judging the other models", dep)
                continue
            out[dep] = {(a.query_id, a.repeat): a for a in self.ctx.read_input(dep, AnswerRow)}
        return out

    @cached_property
    def llm(self) -> LLMJudge | None:
        p = self.p
        if not p.judge_base_url:
            return None
        client = ChatClient(p.judge_base_url, p.judge_model_id, p.judge_key_env,
                            bool(p.judge_key_env), float(p.rpm),
                            spend_cap_usd=float(p.spend_cap_usd))
        return LLMJudge(client, self.prompt, p.judge_max_tokens)

    @cached_property
    def prompt(self) -> Any:
        return load_judge_prompt(self.p.judge_prompt)

    @cached_property
    def cache(self) -> ResponseCache | None:
        return open_cache(self.p.cache, self.ctx.run.store)

    def plan(self) -> list[str]:
        return [f"{stage}|{t}" for stage in sorted(self.answers) for t in sorted(self.trials)]

    def run_items(self, items: Sequence[str]) -> list[VerdictRow]:
        rows = []
        for item in items:
            stage, _, trial_id = item.partition("|")
            rows += self._verdicts(stage, self.trials[trial_id])
        return rows

    def _verdicts(self, stage: str, trial: TrialRow) -> list[VerdictRow]:
        answers = self.answers[stage]
        repeats = 1 + max((r for _, r in answers), default=0)
        out = []
        for role, query in (("test", trial.test_query), ("control", trial.control_query)):
            for r in range(repeats if query else 0):
                ans = answers.get((query, r))
                vid = f"{stage}|{trial.trial_id}|{role}|{r}"
                base = VerdictRow(verdict_id=vid, model=stage, trial_id=trial.trial_id,
                                  role=role, repeat=r, judge_version=self.prompt.version)
                if ans is None or not ans.ok:
                    out.append(_replace(base, judge="missing", rationale=ans.reason if ans
                                        else "no answer"))
                    continue
                v = self._judge(trial, ans.text)
                out.append(_replace(base, answer_id=ans.answer_id, label=v.label, judge=v.judge,
                                    rationale=v.rationale))
        prov = self.ctx.provenance(self.llm.name if self.llm else "rule", self.prompt.version)
        return [v.with_provenance(prov) for v in out]

    def _judge(self, trial: TrialRow, text: str) -> Verdict:
        mode = self.p.mode
        rule = RuleJudge()
        if self.llm is None or self.cache is None:
            return judge_answer(trial, text, mode, rule, self.llm)
        if mode != "llm" and (v := rule.judge(trial, text)) is not None:
            return v
        key = cache_key(judge=self.llm.name, version=self.prompt.version,
                        messages=self.llm.messages(trial, text))
        hit = self.cache.get("judge", key)
        if hit is not None:
            return Verdict(hit["label"], hit["judge"], hit["rationale"])
        v = judge_answer(trial, text, "llm", rule, self.llm)
        self.cache.put("judge", key, {"label": v.label, "judge": v.judge,
                                      "rationale": v.rationale})
        return v


def _subgroups(trials: list[TrialRow]) -> dict[str, list[TrialRow]]:
    groups: dict[str, list[TrialRow]] = {"all": trials}
    for t in trials:
        for g in (t.condition, t.subdim, f"snr{t.snr_db}" if t.conflict == "bsc" else "",
                  f"setting_{t.setting}" if t.setting else ""):
            if g:
                groups.setdefault(g, []).append(t)
    return groups


def _labels(verdicts: list[VerdictRow]) -> dict[tuple[str, str, int], str]:
    return {(v.trial_id, v.role, v.repeat): v.label for v in verdicts}


def model_metrics(model: str, trials: list[TrialRow], verdicts: list[VerdictRow],
                  n_boot: int = 10_000, seed: int = 0,
                  not_built: Sequence[TrialRow] = ()) -> list[MetricRow]:
    """Every metric row of one model: Acc, ASS, ARS per conflict × level (and per condition,
    sub-dimension and SNR), EDI, the Q2 semantic check, and Δ ARS with bootstrap CIs;
    ``not_built`` are the
    trials quarantined when built (no control clip), counted per conflict, level and reason
    (metric ``not_built``)."""
    labels, repeats = _labels(verdicts), 1 + max((v.repeat for v in verdicts), default=0)
    rows: list[MetricRow] = []

    def add(conflict: str, level: str, group: str, metric: str, value: float, n: int,
            lo: float | None = None, hi: float | None = None, p: float | None = None) -> None:
        rows.append(MetricRow(metric_id=f"{model}|{conflict}|{level}|{group}|{metric}",
                              model=model, conflict=conflict, level=level, group=group,
                              metric=metric, value=value, lo=lo, hi=hi, p_value=p, n=n,
                              repeats=repeats))

    def matrix(ts: list[TrialRow]) -> mx.LabelMatrix:
        return mx.label_matrix([t.trial_id for t in ts], labels, repeats,
                               [f"{t.conflict}|{t.sentence_id}" for t in ts],
                               paired=bool(ts) and all(t.question == "q1" for t in ts))

    for conflict in CONFLICTS:
        for level in (*LEVELS, EXTENSION_LEVEL) if conflict == "bsc" else LEVELS:
            q1 = [t for t in trials if t.conflict == conflict and t.level == level
                  and t.question == "q1"]
            for group, ts in _subgroups(q1).items():
                s = mx.score(matrix(ts))
                for name in ("acc", "ass", "ars", "trap", "other"):
                    add(conflict, level, group, name, getattr(s, name), s.n)
            if conflict == "bsc":
                cross = matrix([t for t in q1 if t.subdim == "cross"])
                within = matrix([t for t in q1 if t.subdim == "within"])
                add(conflict, level, "all", "edi", mx.edi(cross, within), cross.n + within.n)
        q2 = [t for t in trials if t.conflict == conflict and t.question == "q2"]
        add(conflict, "L1", "all", "q2_acc", mx.score(matrix(q2)).acc, len(q2))
        pooled = [t for t in trials if t.conflict == conflict and t.question == "q1"
                  and t.level in ("L1", "L3")]
        exp = matrix([t for t in pooled if t.condition == "explicit"])
        imp = matrix([t for t in pooled if t.condition == "implicit"])
        delta, lo, hi, p = mx.bootstrap_delta_ars(exp, imp, n_boot, seed)
        add(conflict, "L1+L3", "explicit-implicit", "delta_ars", delta, exp.n + imp.n, lo, hi, p)
    counts = Counter((t.conflict, t.level, t.reason) for t in not_built)
    for (conflict, level, reason), n in sorted(counts.items()):
        add(conflict, level, reason, "not_built", float(n), n)
    return rows


class MetricsStage(StageImpl[MetricRow]):
    """Metric rows per answer stage (params: ``n_boot``)."""

    @dataclass(frozen=True)
    class Params(StageParams):
        n_boot: int = param(10_000, unit="resamples", paper="Table 5", doc="bootstrap "
                            "resamples of the 95 % intervals (\"10,000 resamples\")")

    p: Params

    @cached_property
    def verdicts(self) -> dict[str, list[VerdictRow]]:
        out: dict[str, list[VerdictRow]] = {}
        for v in self.ctx.read_input("deaf_judge", VerdictRow):
            out.setdefault(v.model, []).append(v)
        return out

    def plan(self) -> list[str]:
        return sorted(self.verdicts)

    def run_items(self, items: Sequence[str]) -> list[MetricRow]:
        every = self.ctx.read_input("deaf_trials", TrialRow)
        trials, not_built = [t for t in every if t.ok], [t for t in every if not t.ok]
        prov = self.ctx.provenance()
        n_boot = self.p.n_boot
        return [r.with_provenance(prov) for m in items
                for r in model_metrics(m, trials, self.verdicts[m], n_boot, self.ctx.seed,
                                       not_built)]
