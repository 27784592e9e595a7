"""The manifest kinds of the MADBench graph, one row dataclass per kind.

Artifact columns come in groups ``<name>_uri`` / ``<name>_sha256`` plus the row's
``duration`` and ``sample_rate``; provenance columns come from :class:`ManifestRow`.
Bump a kind's version whenever a column changes meaning or is removed.
"""

from __future__ import annotations

from madbench_common.core.compat import row
from madbench_common.core.manifest import ManifestRow, manifest

__all__ = [
    "ComponentRow",
    "FeatureRow",
    "PairRow",
    "PerturbedRow",
    "SampleRow",
    "SceneRow",
    "ScoreRow",
    "SourceQCRow",
    "SourceRow",
    "SplitRow",
    "StemRow",
]


@manifest("sources", 1)
@row
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


@manifest("stems", 2)
@row
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
    speech_source: int | None = None
    """Multi-source separators: the index of the output taken as ŝ (``None`` otherwise)."""
    source_rule: str = ""
    """The rule that picked it (see the separator's docstring)."""
    source_scores: tuple[float, ...] = ()
    """Per output, the figure the rule compared."""
    source_gains: tuple[float, ...] = ()
    """Per output, the gain fitted to the mixture before the choice."""


@manifest("source_qc", 4)
@row
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
    """Share of the clip where the VAD finds speech in ê (the paper's criterion: none)."""
    env_asr_text: str = ""
    env_asr_recall: float | None = None
    """Share of the ASR's content words for ŝ that the same ASR recovers from ê (source
    speech regions; a diagnostic); ``None`` where the check did not run (the clip had
    already failed)."""
    env_asr_no_speech_prob: float | None = None
    """The ASR's own no-speech probability for ê (Whisper), ``None`` without one."""
    env_asr_avg_logprob: float | None = None
    """The ASR's mean token log-probability for ê (Whisper's rule pairs it with the above)."""
    env_asr_speech: bool | None = None
    """Whether the ASR detected speech in ê (``source_qc.asr_detects_speech``, §3.2)."""
    speech_asr_text: str = ""
    """The ASR's words for ŝ over the source speech regions, the reference of
    ``env_asr_recall`` (component QC reuses it rather than decoding ŝ again); ``""``
    where the check did not run."""
    speech_asr_model: str = ""
    """``"<slug> <version>"`` of the ASR behind ``speech_asr_text`` (``""``: not run)."""
    language: str = ""
    """The ASR's language for ŝ (``""`` where the ASR cannot identify languages)."""
    language_prob: float | None = None
    music_prob: float | None = None
    """Highest tagger probability over the music/media-playback labels, on ê."""
    speech_music_prob: float | None = None
    """The same on ŝ (music or singing the separator put into the speech estimate)."""
    env_rms_dbfs: float = 0.0
    clip_fraction: float = 0.0
    eligible: bool = False
    fail_reasons: tuple[str, ...] = ()


@manifest("splits", 1)
@row
class SplitRow(ManifestRow):
    """The split of one eligible clip and the speaker cluster behind it."""

    clip_id: str
    split: str = ""
    speaker_cluster: int = -1
    group_id: int = -1
    source_group: str = ""
    gender: str = ""
    embedding: tuple[float, ...] = ()


@manifest("components", 3, key="component_id")
@row
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
    setting: str = ""
    """The generator stage (branch × slot, e.g. ``speech_vc_a``) that makes this component."""
    target_clip_id: str = ""
    prompt: str = ""
    uri: str = ""
    sha256: str = ""
    duration: float = 0.0
    sample_rate: int = 0
    split: str = ""
    qc_pass: bool = False
    qc_reasons: tuple[str, ...] = ()
    scene_label: str = ""
    """The source clip's fine scene label."""
    prompt_label: str = ""
    """The fine label the prompt was built from (differs from ``scene_label`` when mismatched)."""
    negative_prompt: str = ""
    ref_clip_id: str = ""
    """Whose voice the speech reference audio is: the source (same-identity) or the target."""
    ref_text: str = ""
    """Transcript of the reference audio (TTS ``ref_text``): the target's for cross-identity."""
    gen_seconds: float = 0.0
    """Always 0: timings would make manifests differ run to run (and with them every
    downstream fingerprint). Per-item seconds are in the shard markers (``item_seconds``)."""
    duration_error: float | None = None
    """|component length − source length| in seconds."""
    rms_dbfs: float | None = None
    peak: float | None = None
    clip_fraction: float | None = None
    outside_energy_db: float | None = None
    """Speech only: energy outside the source speech regions relative to inside (dB)."""
    speech_leakage: float | None = None
    """Env only: share of the clip the VAD calls speech."""
    asr_leak_recall: float | None = None
    """Env only: share of the source's ASR content words the same ASR recovers from the
    component (a diagnostic)."""
    asr_no_speech_prob: float | None = None
    """Env only: the ASR's own no-speech probability for the component (Whisper)."""
    asr_avg_logprob: float | None = None
    """Env only: the ASR's mean token log-probability for the component (Whisper)."""
    asr_speech: bool | None = None
    """Env only: whether the ASR detected speech (``source_qc.asr_detects_speech``)."""
    music_prob: float | None = None
    """Env only: highest tagger probability over the music/media labels (paper §3.4
    "detectable speech or music content": a filter at ``max_music_prob`` unless
    ``music_filter=false``)."""
    events: tuple[str, ...] = ()
    """Env only: the tagger's top event labels (AST in the paper; a diagnostic)."""
    event_probs: tuple[float, ...] = ()
    asr_text: str = ""
    wer: float | None = None
    wer_reference: str = ""
    """``transcript`` (English source transcript), ``asr_source`` (ASR of ŝ), or empty."""
    sim_source: float | None = None
    """Speaker similarity (cosine) of the component to the source speech ŝ."""
    sim_target: float | None = None
    sim_source_target: float | None = None
    """Baseline: similarity of the source speech to the target speaker's speech."""
    prompt_match: float | None = None
    """CLAP audio–prompt score where ``prompt_model`` is configured (a diagnostic, §3.4)."""
    gen_seed: int | None = None
    """The generator's own seed for this component (derived from the run seed and id)."""
    gen_settings: str = ""
    """JSON of the generator's settings for this call (sampler, steps, guidance, model
    variant, native rate and length, and how that length was fitted: ``exact``, ``trim``
    or ``loop``), as the adapter reports them; empty for references."""
    duration_control: str = ""
    """Speech: how the generator reached the duration, ``model:<how>`` (its own control,
    e.g. F5-TTS ``fix_duration``) or with ``+time_stretch``/``time_stretch`` where a WSOLA
    stretch did (part of) it; ``""`` for generators that do not report it (references)."""
    length_correction: float | None = None
    """The length fix-up after generation, target / generated length (1.0 = none):
    speech, the time-stretch applied to the model's speech; environment, the loop or
    pad of a track shorter than the clip (1.0 where it was exact or trimmed). Bounded by
    component QC (``max_length_correction``); ``None`` where the generator reports no
    length."""


@manifest("samples", 3, key="sample_id")
@row
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
    scene_class: str = ""
    """Scene-consistency class of the environment track: ``R`` real, ``S`` fake and
    scene-matched, ``D`` fake and from a different (incompatible) scene."""
    scene_label: str = ""
    coarse_label: str = ""
    env_scene_label: str = ""
    """The fine label the environment track depicts (the clip's own unless mismatched)."""
    mismatch_mode: str = ""
    """Scene-mismatched env only: ``prompt`` (generated from another scene's prompt) or
    ``replaced`` (track borrowed from a clip of an incompatible scene)."""
    env_donor_clip_id: str = ""
    env_donor_scene_label: str = ""
    """Fine label of the clip the environment track came from (swaps and replacements)."""
    env_donor_coarse_label: str = ""
    env_fit: str = ""
    """How the environment track was brought to the clip's length at assembly (paper §5.3
    "D-R uses real environmental audio from different coarse scenes": a donor's ê, or a
    borrowed replacement, is another clip's length): ``exact``, ``trim`` or ``loop``
    (shorter: repeated with crossfades, an audio-only cue); empty for the clip's own ê."""
    sc_condition: str = ""
    """Scene-consistency samples only (``protocol == "scene_consistency"``, paper §5.3):
    ``D-R`` (real ê of a different coarse scene), ``S-R`` (real ê of the same coarse scene,
    another fine label) or ``D-S`` (both tracks synthetic: scene-matched vs -mismatched).
    ``scene_consistent`` is that task's label. Empty for the three core protocols."""
    speech_component_id: str = ""
    env_component_id: str = ""
    target_clip_id: str = ""
    speech_gain_db: float = 0.0
    env_gain_db: float = 0.0
    common_gain_db: float = 0.0
    speech_target_dbfs: float = 0.0
    env_target_dbfs: float = 0.0
    mux_audio_codec: str = ""
    mux_sample_rate: int = 0


@manifest("perturbed", 1, key="sample_id")
@row
class PerturbedRow(SampleRow):
    """A test sample under one robustness condition: a protocol of its own.

    Every label and provenance column is the clean sample's; ``audio_*`` is the perturbed
    track, ``video_*`` the clean clip's untouched video stream remuxed beside that track
    (its packets byte for byte). ``sample_id`` is ``<clean sample id>@<condition>``.
    """

    condition: str = ""
    condition_index: int = 0
    """The condition's position in the stage's list (the reports' order)."""
    condition_family: str = ""
    condition_params: str = ""
    """JSON: the chain as configured and, per step, what was measured on its output
    (codec, sample rate, bitrate; noise file, sha256, offset, achieved SNR)."""
    clean_sample_id: str = ""
    clean_audio_sha256: str = ""


@manifest("scenes", 1)
@row
class SceneRow(ManifestRow):
    """The scene of one eligible clip: caption (describe), fine label (assign), prompts."""

    clip_id: str
    split: str = ""
    source_group: str = ""
    caption: str = ""
    caption_source: str = ""
    """``hint`` (the sources' scene_caption, reference describer) or ``model`` (a VLM)."""
    scene_label: str = ""
    coarse_label: str = ""
    domain: str = ""
    prompt: str = ""
    negative_prompt: str = ""
    mismatch_label: str = ""
    """An incompatible fine label (for text-to-audio scene-mismatched prompts)."""
    mismatch_prompt: str = ""
    taxonomy_version: str = ""
    label_method: str = ""
    """How ``assign`` chose the label: ``keyword`` (the shared deterministic step),
    ``prompt`` (a VLM's constrained answer) or ``loglik`` (constrained label scoring)."""
    label_raw: str = ""
    """The labeller's raw answer text, where it generated one."""


@manifest("pairs", 1, key="pair_id")
@row
class PairRow(ManifestRow):
    """One cross-identity pairing: a source clip and one of its target speakers' clips."""

    pair_id: str
    """``<clip_id>><target_clip_id>``."""
    clip_id: str
    target_clip_id: str = ""
    rank: int = 0
    similarity: float = 0.0
    """Cosine similarity of the two clips' speaker embeddings."""
    gender: str = ""
    target_gender: str = ""
    gender_source: str = ""
    """``given`` or ``estimated`` (median F0 of ŝ), for the source clip."""
    split: str = ""
    target_split: str = ""
    speaker_cluster: int = -1
    target_speaker_cluster: int = -1
    relaxed: tuple[str, ...] = ()
    """Constraints dropped to reach the target count (empty when all held)."""


@manifest("features", 2, key="sample_id")
@row
class FeatureRow(ManifestRow):
    """A frozen encoder's embedding of one sample; keyed by (model, sample sha256, mode).

    v2 adds the exact input the model saw (:class:`madbench_common.models.roles.InputSpec`:
    rate, seconds, frames, crop, pooling, fallback) and, for detectors, the native
    ``score`` (P(fake)) with its ``score_kind``. Reference encoders leave them empty.
    """

    sample_id: str
    sample_sha256: str
    mode: str
    """Input mode: ``A``, ``V`` or ``AV``."""
    pairing: str = "paired"
    features: tuple[float, ...] = ()
    audio_rate: int = 0
    audio_seconds: float = 0.0
    video_frames: int = 0
    video_fps: float = 0.0
    video_size: int = 0
    crop: str = ""
    pooling: str = ""
    fallback: str = ""
    """Non-empty where the model's documented fallback was used (e.g. no face found)."""
    score: float | None = None
    """Detectors: the native score of this input, P(fake) (see ``score_kind``)."""
    score_kind: str = ""


@manifest("scores", 2, key="sample_id")
@row
class ScoreRow(ManifestRow):
    """A detector's or omni model's native output for one sample and one task.

    ``task`` is ``binary``, ``fourway``, ``speech``, ``env`` or ``scene`` (each task is
    scored only from its own rows; a task without rows is absent, never borrowed).
    ``score`` is P(positive class): fake for binary/speech/env, *inconsistent* for
    scene; ``probs`` holds the four-way distribution in R, S, E, Q order. Omni rows also
    carry the generated ``answer``, its ``parsed`` class (``fake``/``real``/R/S/E/Q,
    ``refusal`` or ``unparsed``) and the ``prompt_hash``; ``excluded`` marks a row with
    neither a score nor a usable answer (counted as the exclusion rate, never guessed).
    """

    sample_id: str
    sample_sha256: str = ""
    mode: str = "A"
    pairing: str = "paired"
    task: str = "binary"
    score: float | None = None
    answer: str = ""
    probs: tuple[float, ...] = ()
    parsed: str = ""
    prompt_hash: str = ""
    excluded: bool = False
    model: str = ""
    """Registry slug of the model that produced the row."""
