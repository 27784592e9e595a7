"""The manifest kinds of the MADBench graph, one row dataclass per kind.

Artifact columns come in groups ``<name>_uri`` / ``<name>_sha256`` plus the row's
``duration`` and ``sample_rate``; provenance columns come from :class:`ManifestRow`.
Bump a kind's version whenever a column changes meaning or is removed.
"""

from __future__ import annotations

from dataclasses import dataclass

from madbench_common.manifest import ManifestRow, manifest

__all__ = [
    "ComponentRow",
    "FeatureRow",
    "SampleRow",
    "ScoreRow",
    "SourceQCRow",
    "SourceRow",
    "SplitRow",
    "StemRow",
]


@manifest("sources", 1)
@dataclass(frozen=True, kw_only=True)
class SourceRow(ManifestRow):
    """One ingested source clip: the untouched video plus its 16 kHz mono audio."""

    clip_id: str
    source_path: str
    speaker: str = ""
    gender: str = ""
    source_group: str = ""
    transcript: str = ""
    scene_caption: str = ""
    video_uri: str = ""
    video_sha256: str = ""
    video_codec: str = ""
    width: int = 0
    height: int = 0
    fps: float = 0.0
    audio_uri: str = ""
    audio_sha256: str = ""
    duration: float = 0.0
    sample_rate: int = 0
    orig_sample_rate: int = 0
    orig_channels: int = 0
    orig_audio_codec: str = ""
    ref_speech_uri: str = ""
    ref_speech_sha256: str = ""
    ref_env_uri: str = ""
    ref_env_sha256: str = ""


@manifest("stems", 1)
@dataclass(frozen=True, kw_only=True)
class StemRow(ManifestRow):
    """Separation of one clip: speech estimate ŝ and residual ê = x − ŝ."""

    clip_id: str
    speech_uri: str = ""
    speech_sha256: str = ""
    env_uri: str = ""
    env_sha256: str = ""
    duration: float = 0.0
    sample_rate: int = 0
    mixture_error: float = 0.0
    """max |x − ŝ − ê| over the clip: 0 up to float rounding by construction."""
    si_sdr_speech: float | None = None
    si_sdr_env: float | None = None
    si_sdr_speech_input: float | None = None
    """SI-SDR of the unprocessed mixture against the clean speech (the baseline)."""


@manifest("source_qc", 1)
@dataclass(frozen=True, kw_only=True)
class SourceQCRow(ManifestRow):
    """Source quality control scores and the eligibility verdict for one clip."""

    clip_id: str
    speech_coverage: float = 0.0
    speech_seconds: float = 0.0
    speech_starts: tuple[float, ...] = ()
    speech_ends: tuple[float, ...] = ()
    transcript: str = ""
    transcript_source: str = ""
    asr_coverage: float | None = None
    """Share of decoded time in words; ``None`` where the transcript was given."""
    env_leakage: float = 0.0
    env_rms_dbfs: float = 0.0
    clip_fraction: float = 0.0
    eligible: bool = False
    fail_reasons: tuple[str, ...] = ()


@manifest("splits", 1)
@dataclass(frozen=True, kw_only=True)
class SplitRow(ManifestRow):
    """The split of one eligible clip and the speaker cluster behind it."""

    clip_id: str
    split: str = ""
    speaker_cluster: int = -1
    group_id: int = -1
    source_group: str = ""
    gender: str = ""
    embedding: tuple[float, ...] = ()


@manifest("components", 1)
@dataclass(frozen=True, kw_only=True)
class ComponentRow(ManifestRow):
    """One generated component (fake speech or fake environment) and its QC."""

    component_id: str
    clip_id: str
    component: str
    """``speech`` or ``env``."""
    branch: str = ""
    """Speech: ``tts_same``, ``tts_cross``, ``vc``; env: ``t2a``, ``v2a``, ``a2a``."""
    generator: str = ""
    scene_match: bool = True
    target_clip_id: str = ""
    prompt: str = ""
    uri: str = ""
    sha256: str = ""
    duration: float = 0.0
    sample_rate: int = 0
    split: str = ""
    qc_pass: bool = False
    qc_reasons: tuple[str, ...] = ()


@manifest("samples", 1)
@dataclass(frozen=True, kw_only=True)
class SampleRow(ManifestRow):
    """One benchmark sample: a variant (R/S/E/Q) of a source clip, with labels."""

    sample_id: str
    clip_id: str
    variant: str
    """``R`` real, ``S`` fake speech, ``E`` fake environment, ``Q`` both."""
    speech_fake: bool = False
    env_fake: bool = False
    scene_consistent: bool = True
    speech_generator: str = ""
    env_generator: str = ""
    speech_branch: str = ""
    env_branch: str = ""
    protocol: str = ""
    split: str = ""
    audio_uri: str = ""
    audio_sha256: str = ""
    video_uri: str = ""
    video_sha256: str = ""
    duration: float = 0.0
    sample_rate: int = 0


@manifest("features", 1)
@dataclass(frozen=True, kw_only=True)
class FeatureRow(ManifestRow):
    """A frozen encoder's embedding of one sample; keyed by (model, sample sha256, mode)."""

    sample_id: str
    sample_sha256: str
    mode: str
    """Input mode: ``A``, ``V`` or ``AV``."""
    pairing: str = "paired"
    features: tuple[float, ...] = ()


@manifest("scores", 1)
@dataclass(frozen=True, kw_only=True)
class ScoreRow(ManifestRow):
    """A detector's or omni model's native output for one sample."""

    sample_id: str
    sample_sha256: str = ""
    mode: str = "A"
    pairing: str = "paired"
    task: str = "binary"
    score: float | None = None
    answer: str = ""
