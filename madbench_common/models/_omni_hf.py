"""Helpers shared by the transformers omni adapters: option first tokens and greedy replies.

:func:`greedy_reply` runs ``model.generate`` greedily (``do_sample=False``: temperature
0) with ``output_logits=True``, so the raw next-token logits at the answer position —
the first decoding step, before any logits processor — come from the same call as the
text. Each requested choice is scored by the log-softmax of its **first token**
(:func:`first_token_ids`; tokenised without special tokens, as it would follow the
chat template's generation prompt).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from madbench_common.models.batching import map_groups
from madbench_common.models.roles import OmniAnswer, OptionLogprob
from madbench_common.models.weights import TINY_MARKER

__all__ = ["MEDIA_KEYS", "TINY_MARKER", "HFOmniBase", "LeftPaddedOmni", "batch_reply", "cast_media",
           "checkpoint_version", "first_token_ids", "greedy_reply", "load_kwargs",
           "option_logprobs", "torch_dtype", "video_frames"]

log = logging.getLogger("madbench")


def checkpoint_version(repo: str, snap: Any, package: str, tiny: bool | None = None) -> str:
    """``repo@<commit[:12]>+<package>-<version>``, with ``+tiny-random`` for a tiny random
    checkpoint (marker present); ``tiny=True`` demands the marker, ``False`` only logs it."""
    from importlib.metadata import version

    from madbench_common.core.errors import ConfigError

    marked = (snap / TINY_MARKER).exists()
    if tiny and not marked:
        raise ConfigError(f"{snap}: not a tiny random checkpoint (no {TINY_MARKER}); the "
                          "-tiny slugs are for demos and tests only")
    if marked and not tiny:
        log.warning("%s: %s is a tiny RANDOM checkpoint; its answers are noise", repo, snap)
    return f"{repo}@{snap.name[:12]}+{package}-{version(package)}" + (
        "+tiny-random" if marked else "")


def first_token_ids(tokenizer: Any, choices: Sequence[str]) -> list[int]:
    """The first token id of each choice's tokenisation (no special tokens added)."""
    out = []
    for choice in choices:
        ids = tokenizer(choice, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"choice {choice!r} tokenises to nothing")
        out.append(int(ids[0]))
    return out


def option_logprobs(logits: Any, tokenizer: Any,
                    choices: Sequence[str]) -> tuple[OptionLogprob, ...]:
    """Log-softmax over the vocabulary of one position's ``logits``, read at each choice."""
    import torch

    logp = torch.log_softmax(logits.float().reshape(-1), dim=-1)
    ids = first_token_ids(tokenizer, choices)
    return tuple(OptionLogprob(c, i, float(logp[i])) for c, i in zip(choices, ids))


def greedy_reply(model: Any, inputs: Any, tokenizer: Any, choices: Sequence[str],
                 max_new_tokens: int, **generate_kwargs: Any) -> OmniAnswer:
    """Greedy text for ``inputs`` and the choices' first-token log-probs at the answer position."""
    import torch

    start = time.perf_counter()
    prompt_len = int(inputs["input_ids"].shape[-1])
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                             temperature=None, top_p=None, top_k=None, num_beams=1,
                             output_logits=True, return_dict_in_generate=True,
                             **generate_kwargs)
    text = tokenizer.decode(out.sequences[0, prompt_len:], skip_special_tokens=True).strip()
    options = option_logprobs(out.logits[0][0], tokenizer, choices) if choices else ()
    return OmniAnswer(text, options, "generate" if choices else "",
                      time.perf_counter() - start)


def batch_reply(model: Any, inputs: Any, tokenizer: Any, choices: Sequence[str],
                max_new_tokens: int) -> list[OmniAnswer]:
    """:func:`greedy_reply` of each row of a left-padded batch in one ``generate``: the
    first step's logits of row ``i`` are its answer position, its text what follows the
    padded prompt (the pad and end tokens are special tokens, skipped). ``seconds`` is the
    call's wall time shared out evenly."""
    import torch

    start = time.perf_counter()
    rows, prompt_len = (int(n) for n in inputs["input_ids"].shape)
    with torch.inference_mode():
        out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False,
                             temperature=None, top_p=None, top_k=None, num_beams=1,
                             output_logits=True, return_dict_in_generate=True)
    seconds = (time.perf_counter() - start) / rows
    return [OmniAnswer(tokenizer.decode(out.sequences[i, prompt_len:],
                                        skip_special_tokens=True).strip(),
                       option_logprobs(out.logits[0][i], tokenizer, choices) if choices else (),
                       "generate" if choices else "", seconds) for i in range(rows)]


def video_frames(frames: Any, fps: float, even: bool = True) -> tuple[Any, float]:
    """Frames as a (T, 3, H, W) uint8 tensor and the rate they were sampled at; with
    ``even``, an even frame count (temporal patches of two) by repeating the last frame."""
    import numpy as np
    import torch

    arr = np.asarray(frames, dtype=np.uint8)
    if arr.ndim != 4 or arr.shape[-1] != 3 or len(arr) == 0:
        raise ValueError(f"frames must be (T, H, W, 3) RGB with T > 0, got {arr.shape}")
    if even and len(arr) % 2:
        arr = np.concatenate([arr, arr[-1:]])
    return torch.from_numpy(np.ascontiguousarray(arr)).permute(0, 3, 1, 2), float(fps)


class HFOmniBase:
    """What the transformers omni adapters share: 16 kHz audio cut at a limit, the chat
    template with the media first, the processor, a dtype cast, and :func:`greedy_reply`.

    Subclasses load ``self.processor`` and ``self.model`` and say how the conversation
    and the video inputs look for their processor."""

    slug = ""
    version = ""
    reference = False
    modes = ("A", "AV")
    sample_rate = 16000
    max_audio_seconds = 30.0
    template_kwargs: ClassVar[dict[str, Any]] = {}
    processor: Any
    model: Any
    device: Any

    def conversation(self, prompt: str, video: bool) -> list[dict[str, Any]]:
        raise NotImplementedError

    def video_kwargs(self, frames: Any, fps: float) -> dict[str, Any]:
        raise NotImplementedError

    def audio_16k(self, audio: Any, sample_rate: int) -> Any:
        """Mono float32 at 16 kHz, cut at :attr:`max_audio_seconds` (logged)."""
        import numpy as np

        from madbench_common.media.audio import resample

        x = resample(np.asarray(audio, np.float32), sample_rate, self.sample_rate)
        limit = int(self.max_audio_seconds * self.sample_rate)
        if len(x) > limit:
            log.info("%s: audio of %.1f s cut to %.0f s", self.slug, len(x) / self.sample_rate,
                     self.max_audio_seconds)
        return x[:limit]

    def inputs(self, prompt: str, audio: Any, sample_rate: int, frames: Any = None,
               fps: float = 0.0) -> Any:
        """Processor outputs (token ids, audio features, video patches) on the device."""
        text = self.processor.apply_chat_template(
            self.conversation(prompt, frames is not None), add_generation_prompt=True,
            tokenize=False, **self.template_kwargs)
        kwargs = self.video_kwargs(frames, fps) if frames is not None else {}
        batch = self.processor(text=[text], audio=[self.audio_16k(audio, sample_rate)],
                               sampling_rate=self.sample_rate, return_tensors="pt",
                               padding=True, **kwargs)
        return batch.to(self.device)

    def answer(self, prompt: str, audio: Any, sample_rate: int, frames: Any = None,
               fps: float = 0.0, choices: Sequence[str] = (),
               max_new_tokens: int = 16) -> OmniAnswer:
        batch = cast_media(self.inputs(prompt, audio, sample_rate, frames, fps), self.model.dtype)
        return greedy_reply(self.model, batch, self.processor.tokenizer, choices, max_new_tokens)


class LeftPaddedOmni(HFOmniBase):
    """An :class:`HFOmniBase` model whose processor and position ids handle left padding
    (checked against batch 1 on its tiny model): :meth:`answer_batch` runs audio-only
    requests in one left-padded ``generate``."""

    def answer_batch(self, requests: Sequence[Mapping[str, Any]]) -> list[OmniAnswer]:
        """:meth:`answer` of each request (its keyword arguments): audio-only requests that
        share choices and token limit go in one left-padded ``generate``
        (:func:`batch_reply`); A-V requests, whose video patches differ per clip, are
        answered one by one."""
        groups: dict[Any, list[int]] = {}
        for i, r in enumerate(requests):
            key = ("video", i) if r.get("frames") is not None else (
                tuple(r.get("choices", ())), int(r.get("max_new_tokens", 16)))
            groups.setdefault(key, []).append(i)
        return map_groups(list(groups.values()),
                          lambda g: self._answer_group([requests[i] for i in g]), len(requests))

    def _answer_group(self, requests: Sequence[Mapping[str, Any]]) -> list[OmniAnswer]:
        if len(requests) == 1 or requests[0].get("frames") is not None:
            return [self.answer(**r) for r in requests]
        texts = [self.processor.apply_chat_template(
            self.conversation(str(r["prompt"]), False), add_generation_prompt=True,
            tokenize=False, **self.template_kwargs) for r in requests]
        audios = [self.audio_16k(r["audio"], int(r["sample_rate"])) for r in requests]
        batch = self.processor(text=texts, audio=audios, sampling_rate=self.sample_rate,
                               return_tensors="pt", padding=True, padding_side="left")
        batch = cast_media(batch.to(self.device), self.model.dtype)
        return batch_reply(self.model, batch, self.processor.tokenizer,
                           tuple(requests[0].get("choices", ())),
                           int(requests[0].get("max_new_tokens", 16)))


MEDIA_KEYS = ("input_features", "pixel_values", "audio_values", "input_values")
"""Prefixes of the processor outputs that are media (audio features, image and video
patches): the only inputs cast to the model's dtype."""


def cast_media(batch: Any, dtype: Any) -> Any:
    """``batch`` with its floating media tensors (:data:`MEDIA_KEYS`) in ``dtype``.

    Other floating inputs keep their precision: ``video_second_per_grid`` (seconds per
    temporal patch, 2/3 at 3 fps) becomes 0.668 in bf16, and Qwen2.5-Omni's video time
    positions (its value x ``tokens_per_second``) drift with it."""
    for key, value in batch.items():
        if (key.startswith(MEDIA_KEYS) and hasattr(value, "is_floating_point")
                and value.is_floating_point()):
            batch[key] = value.to(dtype)
    return batch


def torch_dtype(device: Any, dtype: str | None) -> Any:
    """``dtype`` by name, else bfloat16 on a GPU and float32 on the CPU."""
    import torch

    if dtype:
        return getattr(torch, dtype)
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def load_kwargs(device: Any, dtype: Any) -> dict[str, Any]:
    """``from_pretrained`` arguments that load the weights in ``dtype`` straight onto
    ``device`` (``device_map``; accelerate), not into host memory first and then copied:
    a 7-30 B model would otherwise need its whole size in host RAM as well."""
    return {"dtype": dtype, "device_map": device}
