"""Qwen2.5-Omni-7B as a zero-shot omni model (paper §4.2, §5): thinker only, no talker.

Loading and scoring: :class:`QwenOmni`; inputs (one user turn, media first):
:meth:`QwenOmni.conversation`. The thinker runs forward and generation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from madbench_common.models._hf import torch_device
from madbench_common.models._omni_hf import (
    LeftPaddedOmni,
    checkpoint_version,
    load_kwargs,
    torch_dtype,
    video_frames,
)
from madbench_common.models.weights import hf_path

__all__ = ["IMAGE", "REPO", "REVISION", "SYSTEM_PROMPT", "QwenOmni", "TinyQwenOmni"]

IMAGE = "omni-qwen25omni"
REPO = "Qwen/Qwen2.5-Omni-7B"
REVISION = "main"
"""``weights.yaml`` fetches ``main``; the snapshot's commit is recorded in :attr:`version`."""
SYSTEM_PROMPT = ("You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, "
                 "capable of perceiving auditory and visual inputs, as well as generating text "
                 "and speech.")
"""The model card's system prompt (the one the model was trained with)."""


class QwenOmni(LeftPaddedOmni):
    """Qwen2.5-Omni thinker: greedy answer plus first-token option log-probs.

    ``Qwen2_5OmniForConditionalGeneration.from_pretrained(snapshot,
    enable_audio_output=False)`` builds only the thinker
    (``Qwen2_5OmniThinkerForConditionalGeneration``) from the released composite checkpoint
    (its ``thinker.*`` weights; the talker and token2wav are never built, their weights
    are skipped), and :class:`~transformers.Qwen2_5OmniProcessor` from the same snapshot.
    Scores: the raw next-token logits at the answer position from the first step of the
    greedy generation (``output_logits``), read at each option's first token
    (:mod:`madbench_common.models._omni_hf`).
    """

    slug = "omni-qwen25omni"
    tiny = False

    def __init__(self, device: str | None = None, root: str | Path | None = None,
                 dtype: str | None = None) -> None:
        from transformers import Qwen2_5OmniForConditionalGeneration, Qwen2_5OmniProcessor

        snap = hf_path(REPO, image=IMAGE, revision=REVISION, root=root)
        self.device = torch_device(device)
        self.processor = Qwen2_5OmniProcessor.from_pretrained(snap)
        # straight onto the device (device_map): no host copy of the whole model first
        full = Qwen2_5OmniForConditionalGeneration.from_pretrained(
            snap, enable_audio_output=False, attn_implementation="sdpa",
            **load_kwargs(self.device, torch_dtype(self.device, dtype)))
        self.model = full.thinker.eval()
        self.version = checkpoint_version(REPO, snap, "transformers", self.tiny)

    def conversation(self, prompt: str, video: bool) -> list[dict[str, Any]]:
        """The chat: system prompt, then one user turn of [video], audio and the prompt.

        The system prompt is the model card's official one. The video is frames (A-V only)
        sampled at a fixed rate by the stage (default 2 fps, the rate of
        ``qwen-omni-utils``), passed with that ``fps``, not resampled again and capped per
        frame as ``qwen-vl-utils`` does; the audio is 16 kHz for the Whisper feature
        extractor (128 mel). The processor pads or cuts audio to Whisper's 30 s window, so
        audio beyond 30 s is cut explicitly (and logged); MADBench clips are far shorter.
        The audio track of the video is never used (``load_audio_from_video`` off): the
        mixed audio is the only audio.
        """
        content: list[dict[str, Any]] = [{"type": "video"}] if video else []
        content += [{"type": "audio"}, {"type": "text", "text": prompt}]
        return [{"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
                {"role": "user", "content": content}]

    def video_kwargs(self, frames: Any, fps: float) -> dict[str, Any]:
        video, rate = video_frames(frames, fps)
        return {"videos": [video], "fps": rate, "do_sample_frames": False,
                "cap_pixels_per_frame": True}


class TinyQwenOmni(QwenOmni):
    """The same adapter on a tiny random checkpoint (``make demo-omni``): registered as a
    reference slug so reports mark its rows as not the paper's model."""

    slug = "omni-qwen25omni-tiny"
    reference = True
    tiny = True
