"""Role interfaces: the narrow contracts that every model, reference or real, implements.

Each role is a :class:`typing.Protocol` of one to three methods. Audio is mono
float32 at the ``sample_rate`` the caller passes; every implementation resamples
internally if its model needs another rate. Models declare ``slug``,
``version`` and ``reference`` (``True`` for CPU reference implementations, which
are never passed off as the paper's models).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from madbench_common.core.types import Audio, Frames, Hertz, Seconds

__all__ = [
    "ASR",
    "VAD",
    "AudioTagger",
    "AudioTextScorer",
    "Detector",
    "Embedding",
    "Encoder",
    "EnvGenerator",
    "FaceCropper",
    "Frames",
    "InputSpec",
    "Model",
    "MultiSourceSeparator",
    "OmniAnswer",
    "OmniModel",
    "OptionLogprob",
    "SceneLabeller",
    "Segment",
    "SeparatedSpeech",
    "Separator",
    "SpeakerEmbedder",
    "SpeechGenerator",
    "Transcript",
]



@dataclass(frozen=True)
class Segment:
    """A time span in seconds."""

    start: Seconds
    end: Seconds


@dataclass(frozen=True)
class Transcript:
    """ASR output: the words, a confidence-like coverage score in [0, 1], and the language.

    ``language`` is an ISO 639-1 code (``en``) where the model identifies the language
    (Whisper), else ``""``; ``language_prob`` is its probability where exposed.
    ``no_speech_prob`` is the ASR's own probability that the audio holds no speech
    (Whisper: its ``<|nospeech|>`` token at the start-of-transcript position), ``None``
    for an ASR without such a signal (PocketSphinx). ``avg_logprob`` goes with it: openai-
    whisper calls a window silent only when both say so (``transcribe.py``).
    """

    text: str
    coverage: float
    words: tuple[tuple[str, Seconds, Seconds], ...] = field(default=())
    language: str = ""
    language_prob: float | None = None
    no_speech_prob: float | None = None
    avg_logprob: float | None = None
    """The decoded tokens' mean log-probability as openai-whisper computes it (the sum over
    the tokens and the end token, divided by their count), ``None`` without one."""


@dataclass(frozen=True)
class OptionLogprob:
    """The log-probability of one answer string's first token at the answer position.

    ``logprob`` is the log-softmax over the whole vocabulary of the next-token logits
    right after the prompt (where the answer starts); ``token_id`` is the first token
    of ``text``'s tokenisation, so callers can merge surface forms that share it.
    """

    text: str
    token_id: int
    logprob: float


@dataclass(frozen=True)
class OmniAnswer:
    """An omni model's reply: the greedy text and, where exposed, option log-probs.

    ``options`` has one entry per requested choice, in request order, when the model
    exposes next-token logits (``logits`` names how: ``generate`` = the first decoding
    step of the greedy generation, ``forward`` = a separate forward pass on the same
    inputs); it is empty, and ``logits`` is ``""``, when they are hidden. ``seconds``
    is the wall time of the call.
    """

    text: str
    options: tuple[OptionLogprob, ...] = ()
    logits: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class InputSpec:
    """The exact input a frozen encoder or detector saw, recorded on every feature row.

    ``audio_rate``/``audio_seconds``: the rate the model consumed and the seconds of audio
    it saw after its own crop, pad or tiling; ``video_frames``/``video_fps``/``video_size``:
    frames fed, their rate and side in pixels; ``crop`` and ``pooling`` in words
    (``"resize 224 (no crop)"``, ``"mean over frames of last hidden state"``);
    ``fallback``: non-empty where the model's documented fallback was taken for this
    input (``"no_face:centre_crop"``), never a silent substitute.
    """

    audio_rate: int = 0
    audio_seconds: float = 0.0
    video_frames: int = 0
    video_fps: float = 0.0
    video_size: int = 0
    crop: str = ""
    pooling: str = ""
    fallback: str = ""


@dataclass(frozen=True)
class Embedding:
    """One model output for one input: the frozen features, a detector's native score
    (P(fake), or ``None`` for encoders) with how to read it, and the input it saw."""

    vector: npt.NDArray[np.float32]
    spec: InputSpec
    score: float | None = None
    score_kind: str = ""
    """``prob`` (a model probability of fake) or ``sigmoid(raw)`` (a monotone squash of an
    unbounded native score: ranks and AUC are the model's, calibration is not)."""


@runtime_checkable
class Model(Protocol):
    """What every model declares about itself."""

    slug: str
    version: str
    reference: bool


class Separator(Model, Protocol):
    """Mixture → speech estimate ŝ (the residual ê = x − ŝ is computed by the stage)."""

    def separate(self, audio: Audio, sample_rate: Hertz) -> Audio: ...


@dataclass(frozen=True)
class SeparatedSpeech:
    """A multi-source separator's speech estimate and the recorded rule that picked it.

    ``scores`` are, per separator output, the figure ``rule`` compared (the chosen
    ``source`` has the best); ``gains`` are the per-output gains applied before the choice.
    """

    speech: Audio
    rule: str
    source: int
    scores: tuple[float, ...]
    gains: tuple[float, ...]


class MultiSourceSeparator(Separator, Protocol):
    """A separator with several outputs (e.g. a 2-speaker model): it also says which
    output it took as ŝ and why (the separate stage records it on the stems row)."""

    def separate_detailed(self, audio: Audio, sample_rate: Hertz) -> SeparatedSpeech: ...


class VAD(Model, Protocol):
    def segments(self, audio: Audio, sample_rate: Hertz) -> list[Segment]: ...


class ASR(Model, Protocol):
    def transcribe(self, audio: Audio, sample_rate: Hertz) -> Transcript: ...


class SpeakerEmbedder(Model, Protocol):
    def embed(self, audio: Audio, sample_rate: Hertz) -> npt.NDArray[np.float32]:
        """A unit-norm speaker embedding."""
        ...


class AudioTagger(Model, Protocol):
    def tag(self, audio: Audio, sample_rate: Hertz) -> dict[str, float]:
        """Label → probability."""
        ...


class AudioTextScorer(Model, Protocol):
    """Audio–text similarity (CLAP): one score per text, higher = better match."""

    def score_texts(self, audio: Audio, sample_rate: Hertz, texts: Sequence[str]) -> list[float]:
        ...


class FaceCropper(Model, Protocol):
    """Face and mouth crops for face-centric detectors.

    Returns per-frame crops of shape (T, size, size, 3) and, per frame, whether a face
    was found; callers apply their model's documented fallback where none was.
    """

    def crop(
        self, frames: Frames, fps: float, *, size: int, region: str = "face"
    ) -> tuple[Frames, npt.NDArray[np.bool_]]: ...


class SpeechGenerator(Model, Protocol):
    """Fake speech; ``branch`` is ``tts_same``, ``tts_cross`` or ``vc``.

    Same-identity TTS: ``ref_audio`` of the source speaker, ``ref_text``, ``text``,
    ``duration``. Cross-identity TTS: ``ref_audio`` of the target speaker, ``text``,
    ``duration``. Voice conversion: ``source_audio`` + ``ref_audio`` of the target.
    """

    branch: str

    def generate(
        self,
        *,
        sample_rate: Hertz,
        duration: Seconds,
        ref_audio: Audio,
        ref_text: str = "",
        text: str = "",
        source_audio: Audio | None = None,
        seed: int = 0,
    ) -> Audio: ...


class EnvGenerator(Model, Protocol):
    """Fake environmental audio; ``paradigm`` is ``t2a``, ``v2a`` or ``a2a``.

    Text-to-audio: ``prompt`` + ``duration``; video-to-audio: ``frames`` (+ ``fps``)
    + ``prompt`` + ``duration``; audio-to-audio: ``source_env`` + ``prompt``.
    ``negative_prompt`` lists the sounds to keep out (the scene's exclusions; speech,
    singing, music and media playback always). Real-model adapters also set
    ``last_settings`` (seed, sampler, steps, guidance, how the model's native length was
    fitted to ``duration``) after each call, and may declare ``frame_request``
    (fps, shorter-side size, frame cap) for the frames a video stage passes them.
    """

    paradigm: str

    def generate(
        self,
        *,
        sample_rate: Hertz,
        duration: Seconds,
        prompt: str,
        frames: Frames | None = None,
        fps: float = 0.0,
        source_env: Audio | None = None,
        seed: int = 0,
        negative_prompt: str = "",
    ) -> Audio: ...


class SceneLabeller(Model, Protocol):
    """Two steps: describe a video as text, then assign a taxonomy label to text."""

    def describe(self, frames: Frames, fps: float, hint: str = "") -> str: ...

    def assign(self, caption: str) -> str: ...


class Encoder(Model, Protocol):
    """Frozen embeddings; ``modes`` lists the supported input modes (A, V, AV).

    Real model adapters also offer ``embed`` (same arguments) returning an
    :class:`Embedding`, so the feature stage records the exact input on every row, and may
    offer ``embed_batch(inputs)`` (a list of ``embed``'s keyword arguments → a list of
    Embeddings, each equal to ``embed``'s within
    :data:`~madbench_common.models.batching.EQUIVALENCE_ATOL`); without it
    :func:`~madbench_common.models.batching.embed_batch` calls ``embed`` per input.
    """

    modes: tuple[str, ...]

    def encode(
        self,
        *,
        mode: str,
        audio: Audio | None = None,
        sample_rate: Hertz = 16000,
        frames: Frames | None = None,
        fps: float = 0.0,
    ) -> npt.NDArray[np.float32]: ...


class Detector(Model, Protocol):
    """A deepfake detector: its native score (higher = more likely fake) and features.

    Audio-visual detectors (``modes`` holds ``AV``) also take the clip's ``frames`` and
    ``fps``; audio detectors ignore them. Like encoders, adapters offer ``embed`` for
    one pass that returns both with the exact input, and may offer ``embed_batch``.
    """

    modes: tuple[str, ...]

    def score(self, audio: Audio, sample_rate: Hertz, *, frames: Frames | None = None,
              fps: float = 0.0) -> float: ...

    def features(self, audio: Audio, sample_rate: Hertz, *, frames: Frames | None = None,
                 fps: float = 0.0) -> npt.NDArray[np.float32]: ...


class OmniModel(Model, Protocol):
    """A zero-shot multimodal LLM answering a prompt about audio (and video).

    ``modes`` lists the input modes it takes (``A``, ``AV``). One call is one user turn
    with the media first and ``prompt`` last, decoded greedily (temperature 0) for at
    most ``max_new_tokens`` tokens. ``choices`` are answer strings whose first-token
    log-probabilities at the answer position are returned (option scoring); with no
    choices the call is free-form generation only. An adapter may offer
    ``answer_batch(requests)`` (a list of ``answer``'s keyword arguments → a list of
    replies, each ``answer``'s text with its option log-probs within
    :data:`~madbench_common.models.batching.EQUIVALENCE_ATOL`); without it
    :func:`~madbench_common.models.batching.answer_batch` calls ``answer`` per request.
    """

    modes: tuple[str, ...]

    def answer(
        self,
        prompt: str,
        audio: Audio,
        sample_rate: Hertz,
        frames: Frames | None = None,
        fps: float = 0.0,
        choices: Sequence[str] = (),
        max_new_tokens: int = 16,
    ) -> OmniAnswer: ...
