"""The manifest kinds of the DEAF graph, one row dataclass per kind.

Artifact columns follow the house pattern (``audio_uri`` / ``audio_sha256`` plus the
row's ``duration`` and ``sample_rate``); provenance columns come from
:class:`~madbench_common.core.manifest.ManifestRow`.
"""

from __future__ import annotations

from madbench_common.core.compat import row
from madbench_common.core.manifest import ManifestRow, manifest

__all__ = [
    "AnswerRow",
    "EnvRow",
    "MetricRow",
    "ReportRow",
    "SentenceRow",
    "StimulusRow",
    "TrialRow",
    "VerdictRow",
]


@manifest("deaf_sentences", 1, key="sentence_id")
@row
class SentenceRow(ManifestRow):
    """One scripted sentence and the semantic class it implies (§2.1)."""

    sentence_id: str
    conflict: str = ""
    subdim: str = ""
    condition: str = ""
    label: str = ""
    text: str = ""
    source: str = ""
    """``committed`` (written for this project), ``emis`` or ``user``."""


@manifest("deaf_envlib", 1, key="code")
@row
class EnvRow(ManifestRow):
    """One BSC background environment of the run's library (Table 6)."""

    code: str
    category: str = ""
    name: str = ""
    source: str = ""
    """``demand`` (the paper's database) or ``debian`` (the offline library)."""
    quality: str = ""
    """``recording`` (a recording of that environment) or ``proxy`` (a related one)."""
    files: tuple[str, ...] = ()
    licence: str = ""
    attribution: str = ""
    audio_uri: str = ""
    audio_sha256: str = ""
    duration: float = 0.0
    sample_rate: int = 0


@manifest("deaf_stimuli", 1, key="stimulus_id")
@row
class StimulusRow(ManifestRow):
    """One clip: what its words imply, what its audio carries, and the audio itself."""

    stimulus_id: str
    conflict: str = ""
    sentence_id: str = ""
    subdim: str = ""
    condition: str = ""
    text: str = ""
    semantic: str = ""
    acoustic: str = ""
    matched: bool = False
    setting: str = ""
    pairing: str = ""
    snr_db: int = 0
    reference: bool = True
    """``True`` when a CPU reference made the audio (not the paper's generator)."""
    audio_uri: str = ""
    audio_sha256: str = ""
    duration: float = 0.0
    sample_rate: int = 0


@manifest("deaf_trials", 1, key="trial_id")
@row
class TrialRow(ManifestRow):
    """One scored question: a test query, its matched control query, and the answer key.

    ``correct`` is the acoustic truth and ``trap`` what the text (semantics at L1, the
    prompt at L2, both at L3) suggests; ``attrs`` lists the SIC attributes in conflict.
    """

    trial_id: str
    conflict: str = ""
    level: str = ""
    question: str = ""
    subdim: str = ""
    condition: str = ""
    setting: str = ""
    snr_db: int = 0
    sentence_id: str = ""
    sentence: str = ""
    claim: str = ""
    prompt: str = ""
    prompt_version: str = ""
    test_query: str = ""
    test_stimulus: str = ""
    control_query: str = ""
    control_stimulus: str = ""
    correct: str = ""
    trap: str = ""
    attrs: tuple[str, ...] = ()


@manifest("deaf_answers", 1, key="answer_id")
@row
class AnswerRow(ManifestRow):
    """One model answer to one query in one repeat (§3.1: three independent repeats)."""

    answer_id: str
    query_id: str = ""
    repeat: int = 0
    stimulus_id: str = ""
    prompt: str = ""
    text: str = ""
    cached: bool = False
    seconds: float = 0.0


@manifest("deaf_verdicts", 1, key="verdict_id")
@row
class VerdictRow(ManifestRow):
    """The judge's label of one answer against one trial's key (§2.4)."""

    verdict_id: str
    model: str = ""
    trial_id: str = ""
    role: str = ""
    """``test`` (the trial's own query) or ``control`` (its matched-audio query)."""
    repeat: int = 0
    answer_id: str = ""
    label: str = ""
    """``C``, ``T``, ``O``; empty when the answer is missing (excluded from metrics)."""
    judge: str = ""
    """``rule``, ``llm:<model>``, or ``none`` (undecided by rules, no LLM configured)."""
    judge_version: str = ""
    rationale: str = ""


@manifest("deaf_metrics", 1, key="metric_id")
@row
class MetricRow(ManifestRow):
    """One number of the paper's tables: model × conflict × level × group × metric."""

    metric_id: str
    model: str = ""
    conflict: str = ""
    level: str = ""
    group: str = ""
    metric: str = ""
    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    p_value: float | None = None
    n: int = 0
    repeats: int = 0


@manifest("deaf_report", 1, key="name")
@row
class ReportRow(ManifestRow):
    """One file of the report (Markdown, JSON, HTML, the radar PNG and SVG)."""

    name: str
    uri: str = ""
    sha256: str = ""
