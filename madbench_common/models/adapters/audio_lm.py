"""DEAF's open audio language models through transformers 5: Qwen2-Audio, Audio Flamingo 3,
Qwen3-Omni (the thinker), as OmniModels (DEAF §3.1).

Each call is one user turn (the 16 kHz clip and the question) rendered with the
checkpoint's own chat template and processor, then decoded greedily (``do_sample=False``:
temperature 0) for at most ``max_new_tokens`` tokens; the reply is free text for the judge.
Where ``choices`` are given, the first-token log-probabilities at the answer position come
from the same generation's first-step logits, as the omni stage scores options.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from importlib.metadata import version as pkg_version
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models._omni_hf import cast_media, load_kwargs
from madbench_common.models.roles import Frames, OmniAnswer, OptionLogprob
from madbench_common.models.weights import TINY_MARKER, hf_path

__all__ = ["IMAGE", "TINY_MARKER", "AudioFlamingo3", "AudioLM", "Qwen2Audio", "Qwen2AudioTiny",
           "Qwen3Omni"]

log = logging.getLogger("madbench")
IMAGE = "deaf-tf5"
"""The marker the tiny installers write beside a random checkpoint (as the omni issue's)."""
_RATE = 16000


def _device(device: str | None) -> Any:
    import torch

    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def _dtype(device: Any, dtype: str | None) -> Any:
    import torch

    if dtype:
        return getattr(torch, dtype)
    return torch.bfloat16 if device.type == "cuda" else torch.float32


class AudioLM:
    """Shared loading, prompting and greedy decoding; subclasses name the classes.

    Weights are read offline (:func:`madbench_common.models.weights.hf_path`); a snapshot
    marked by the tiny installers (``madbench_tiny_random.json``) adds ``+tiny-random`` to
    the version, so reports never pass a random checkpoint off as the model. Audio longer
    than ``max_audio_seconds`` is cut (logged); DEAF clips are a few seconds.
    """

    repo: ClassVar[str] = ""
    revision: ClassVar[str] = "main"
    requires_modules: ClassVar[tuple[str, ...]] = ("torch", "transformers")
    """What the interpreter running it must import (checked before a run starts)."""
    slug = ""
    reference = False
    tiny = False
    modes = ("A",)
    max_audio_seconds = 30.0
    audio_first = True
    system: ClassVar[str] = ""
    call_kwargs: ClassVar[dict[str, Any]] = {"padding": True}
    """Extra processor arguments (AF3's processor pads text itself; a shared ``padding``
    would also reach its feature extractor and stop the 30 s window padding)."""

    def __init__(self, device: str | None = None, root: str | Path | None = None,
                 dtype: str | None = None) -> None:
        snap = hf_path(self.repo, image=IMAGE, revision=self.revision, root=root)
        self.device = _device(device)
        # loaded straight onto the device (device_map), not via host memory
        self.processor, self.model = self.load(snap, load_kwargs(self.device,
                                                                 _dtype(self.device, dtype)))
        self.model = self.model.eval()
        marked = (snap / TINY_MARKER).exists()
        if self.tiny and not marked:
            raise ConfigError(f"{snap}: not a tiny random checkpoint (no {TINY_MARKER})")
        if marked and not self.tiny:
            log.warning("%s: %s is a tiny RANDOM checkpoint; its answers are noise", self.slug,
                        snap)
        self.version = (f"{self.repo}@{snap.name[:12]}+transformers-"
                        f"{pkg_version('transformers')}" + ("+tiny-random" if marked else ""))

    def load(self, snap: Path, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """Processor and model from ``snap``; ``kwargs`` (dtype, device_map) go to the
        model's ``from_pretrained``."""
        raise NotImplementedError

    def conversation(self, prompt: str) -> list[dict[str, Any]]:
        """One user turn: the clip and the question (order per model card)."""
        parts: list[dict[str, Any]] = [{"type": "audio"}, {"type": "text", "text": prompt}]
        turn = {"role": "user", "content": parts if self.audio_first else parts[::-1]}
        if self.system:
            return [{"role": "system", "content": [{"type": "text", "text": self.system}]}, turn]
        return [turn]

    def inputs(self, prompt: str, audio: Audio, sample_rate: Hertz) -> Any:
        x = resample(np.asarray(audio, np.float32), sample_rate, _RATE)
        limit = int(self.max_audio_seconds * _RATE)
        if len(x) > limit:
            log.info("%s: audio of %.1f s cut to %.0f s", self.slug, len(x) / _RATE,
                     self.max_audio_seconds)
        text = self.processor.apply_chat_template(self.conversation(prompt), tokenize=False,
                                                  add_generation_prompt=True)
        batch = self.processor(text=[text], audio=[x[:limit]], sampling_rate=_RATE,
                               return_tensors="pt", **self.call_kwargs)
        return cast_media(batch.to(self.device), self.model.dtype)

    def generator(self) -> Any:
        return self.model

    def answer(self, prompt: str, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0, choices: Sequence[str] = (),
               max_new_tokens: int = 256) -> OmniAnswer:
        """Greedy reply; first-token log-probs of ``choices`` when asked."""
        import torch

        if frames is not None:
            raise ConfigError(f"{self.slug}: audio-only model; video frames are not taken")
        start = time.perf_counter()
        batch = self.inputs(prompt, audio, sample_rate)
        prompt_len = int(batch["input_ids"].shape[-1])
        with torch.inference_mode():
            out = self.generator().generate(
                **batch, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                temperature=None, top_p=None, top_k=None, output_logits=bool(choices),
                return_dict_in_generate=True)
        tok = self.processor.tokenizer
        text = tok.decode(out.sequences[0, prompt_len:], skip_special_tokens=True).strip()
        options = _options(out.logits[0][0], tok, choices) if choices else ()
        return OmniAnswer(text, options, "generate" if choices else "",
                          time.perf_counter() - start)


def _options(logits: Any, tokenizer: Any, choices: Sequence[str]) -> tuple[OptionLogprob, ...]:
    import torch

    logp = torch.log_softmax(logits.float().reshape(-1), dim=-1)
    out = []
    for c in choices:
        ids = tokenizer(c, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"choice {c!r} tokenises to nothing")
        out.append(OptionLogprob(c, int(ids[0]), float(logp[int(ids[0])])))
    return tuple(out)


class Qwen2Audio(AudioLM):
    """Qwen2-Audio-7B-Instruct (Chu et al. 2024): ``Qwen2AudioForConditionalGeneration`` +
    ``Qwen2AudioProcessor`` (Whisper features, 128 mel, 30 s window)."""

    repo = "Qwen/Qwen2-Audio-7B-Instruct"
    slug = "deaf-qwen2-audio"

    def load(self, snap: Path, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        from transformers import AutoProcessor, Qwen2AudioForConditionalGeneration

        return (AutoProcessor.from_pretrained(snap),
                Qwen2AudioForConditionalGeneration.from_pretrained(snap, **kwargs))


class Qwen2AudioTiny(Qwen2Audio):
    """The same adapter on a tiny random checkpoint (the demo): a reference slug, so
    reports mark its rows as not the paper's model."""

    slug = "deaf-qwen2-audio-tiny"
    reference = True
    tiny = True


class AudioFlamingo3(AudioLM):
    """Audio Flamingo 3 (Goel et al. 2025), the transformers port
    (``nvidia/audio-flamingo-3-hf``): ``AudioFlamingo3ForConditionalGeneration`` +
    ``AudioFlamingo3Processor`` (30 s windows, up to 10 minutes); text then audio in the
    turn, as its model card shows."""

    repo = "nvidia/audio-flamingo-3-hf"
    slug = "deaf-audio-flamingo3"
    audio_first = False
    max_audio_seconds = 600.0
    call_kwargs: ClassVar[dict[str, Any]] = {}

    def load(self, snap: Path, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        from transformers import AudioFlamingo3ForConditionalGeneration, AutoProcessor

        return (AutoProcessor.from_pretrained(snap),
                AudioFlamingo3ForConditionalGeneration.from_pretrained(snap, **kwargs))


class Qwen3Omni(AudioLM):
    """Qwen3-Omni-30B-A3B-Instruct (Xu et al. 2025): thinker only.

    ``Qwen3OmniMoeForConditionalGeneration`` with ``enable_audio_output=False``: only the
    thinker is built (the talker and code2wav are never loaded), and it alone generates."""

    repo = "Qwen/Qwen3-Omni-30B-A3B-Instruct"
    slug = "deaf-qwen3-omni"

    def load(self, snap: Path, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        from transformers import Qwen3OmniMoeForConditionalGeneration, Qwen3OmniMoeProcessor

        full = Qwen3OmniMoeForConditionalGeneration.from_pretrained(
            snap, enable_audio_output=False, **kwargs)
        return Qwen3OmniMoeProcessor.from_pretrained(snap), full.thinker
