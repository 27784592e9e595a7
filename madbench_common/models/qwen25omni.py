"""Qwen2.5-Omni-7B as a zero-shot omni model (paper §4.2, §5): thinker only, no talker.

Loading: ``Qwen2_5OmniForConditionalGeneration.from_pretrained(snapshot,
enable_audio_output=False)`` builds only the thinker
(``Qwen2_5OmniThinkerForConditionalGeneration``) from the released composite checkpoint
(its ``thinker.*`` weights; the talker and token2wav are never built, their weights
are skipped), and :class:`~transformers.Qwen2_5OmniProcessor` from the same snapshot.
The thinker runs forward and generation.

Inputs (one user turn, media first): the official system prompt of the model card; the
video as frames (A-V only) sampled at a fixed rate by the stage (default 2 fps, the
rate of ``qwen-omni-utils``), passed with that ``fps`` and not resampled again; the
audio resampled to 16 kHz for the Whisper feature extractor (128 mel). The processor
pads or cuts audio to Whisper's 30 s window, so audio beyond 30 s is cut here
explicitly (and logged); MADBench clips are far shorter. The audio track of the video
is never used (``load_audio_from_video`` off): the mixed audio is the only audio.

Scores: the raw next-token logits at the answer position from the first step of the
greedy generation (``output_logits``), read at each option's first token
(:mod:`madbench_common.models._omni_hf`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.audio import resample
from madbench_common.models._hf import torch_device
from madbench_common.models._omni_hf import greedy_reply, video_frames
from madbench_common.roles import Frames, OmniAnswer
from madbench_common.types import Audio, Hertz
from madbench_common.weights import hf_path

__all__ = ["IMAGE", "MAX_AUDIO_SECONDS", "REPO", "REVISION", "SYSTEM_PROMPT", "QwenOmni"]

log = logging.getLogger("madbench")
IMAGE = "omni-qwen25omni"
REPO = "Qwen/Qwen2.5-Omni-7B"
REVISION = "main"
"""``weights.yaml`` fetches ``main``; the snapshot's commit is recorded in :attr:`version`."""
SAMPLE_RATE = 16000
MAX_AUDIO_SECONDS = 30.0
SYSTEM_PROMPT = ("You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, "
                 "capable of perceiving auditory and visual inputs, as well as generating text "
                 "and speech.")
"""The model card's system prompt (the one the model was trained with)."""


class QwenOmni:
    """Qwen2.5-Omni thinker: greedy answer plus first-token option log-probs."""

    slug = "omni-qwen25omni"
    reference = False
    modes = ("A", "AV")

    def __init__(self, device: str | None = None, root: str | Path | None = None,
                 dtype: str | None = None) -> None:
        import torch
        import transformers
        from transformers import Qwen2_5OmniForConditionalGeneration, Qwen2_5OmniProcessor

        snap = hf_path(REPO, image=IMAGE, revision=REVISION, root=root)
        self.device = torch_device(device)
        torch_dtype = getattr(torch, dtype) if dtype else (
            torch.bfloat16 if self.device.type == "cuda" else torch.float32)
        self.processor = Qwen2_5OmniProcessor.from_pretrained(snap)
        full = Qwen2_5OmniForConditionalGeneration.from_pretrained(
            snap, enable_audio_output=False, dtype=torch_dtype, attn_implementation="sdpa")
        self.model = full.thinker.to(self.device).eval()
        self.version = f"{REPO}@{snap.name[:12]}+transformers-{transformers.__version__}"

    def _audio(self, audio: Audio, sample_rate: Hertz) -> np.ndarray:
        x = resample(np.asarray(audio, np.float32), sample_rate, SAMPLE_RATE)
        limit = int(MAX_AUDIO_SECONDS * SAMPLE_RATE)
        if len(x) > limit:
            log.info("qwen2.5-omni: audio of %.1f s cut to %.0f s", len(x) / SAMPLE_RATE,
                     MAX_AUDIO_SECONDS)
        return x[:limit]

    def conversation(self, prompt: str, video: bool) -> list[dict[str, Any]]:
        """The chat: system prompt, then one user turn of [video], audio and the prompt."""
        content: list[dict[str, Any]] = [{"type": "video"}] if video else []
        content += [{"type": "audio"}, {"type": "text", "text": prompt}]
        return [{"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
                {"role": "user", "content": content}]

    def inputs(self, prompt: str, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0) -> Any:
        """Processor outputs (token ids, Whisper features, video patches) on the device."""
        text = self.processor.apply_chat_template(self.conversation(prompt, frames is not None),
                                                  add_generation_prompt=True, tokenize=False)
        kwargs: dict[str, Any] = {}
        if frames is not None:
            video, rate = video_frames(frames, fps)
            kwargs = {"videos": [video], "fps": rate, "do_sample_frames": False,
                      "cap_pixels_per_frame": True}
        batch = self.processor(text=[text], audio=[self._audio(audio, sample_rate)],
                               sampling_rate=SAMPLE_RATE, return_tensors="pt", padding=True,
                               **kwargs)
        return batch.to(self.device)

    def answer(self, prompt: str, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0, choices: Sequence[str] = (),
               max_new_tokens: int = 16) -> OmniAnswer:
        batch = self.inputs(prompt, audio, sample_rate, frames, fps)
        for key in ("input_features", "pixel_values_videos"):
            if key in batch:
                batch[key] = batch[key].to(self.model.dtype)
        return greedy_reply(self.model, batch, self.processor.tokenizer, choices, max_new_tokens)
