"""Gemma-4-E4B-it as a zero-shot omni model (paper §4.2, §5), through transformers ≥ 5.5.

Loading and scoring: :class:`Gemma4Omni`; inputs: :meth:`Gemma4Omni.conversation`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from madbench_common.models._hf import torch_device
from madbench_common.models._omni_hf import (
    HFOmniBase,
    checkpoint_version,
    load_kwargs,
    torch_dtype,
    video_frames,
)
from madbench_common.models.weights import hf_path

__all__ = ["IMAGE", "REPO", "REVISION", "Gemma4Omni"]

IMAGE = "omni-qwen25omni"
"""Gemma 4 shares the Qwen2.5-Omni image: the same pins (transformers 5, torch 2.14.1)."""
REPO = "google/gemma-4-E4B-it"
REVISION = "main"


class Gemma4Omni(HFOmniBase):
    """Gemma 4 E4B instruction-tuned: greedy answer plus first-token option log-probs.

    ``Gemma4ForConditionalGeneration.from_pretrained(snapshot)`` and ``AutoProcessor``
    (``Gemma4Processor``) from the same offline snapshot of ``google/gemma-4-E4B-it``, with
    transformers' default attention per tower (the audio conformer has no SDPA path; the
    text and vision towers use SDPA). Scores: the raw next-token logits at the answer
    position from the first greedy decoding step, read at each option's first token
    (:mod:`madbench_common.models._omni_hf`).
    """

    slug = "omni-gemma4"
    template_kwargs: ClassVar[dict[str, Any]] = {"enable_thinking": False}

    def __init__(self, device: str | None = None, root: str | Path | None = None,
                 dtype: str | None = None) -> None:
        from transformers import AutoProcessor, Gemma4ForConditionalGeneration

        snap = hf_path(REPO, image=IMAGE, revision=REVISION, root=root)
        self.device = torch_device(device)
        self.processor = AutoProcessor.from_pretrained(snap)
        # straight onto the device (device_map): no host copy of the whole model first
        self.model = Gemma4ForConditionalGeneration.from_pretrained(
            snap, **load_kwargs(self.device, torch_dtype(self.device, dtype))).eval()
        self.version = checkpoint_version(REPO, snap, "transformers")

    def conversation(self, prompt: str, video: bool) -> list[dict[str, Any]]:
        """One user turn of [video], audio and the prompt.

        Media first, no system prompt, thinking off through the chat template's
        ``enable_thinking=False``. The video is frames sampled at a fixed rate by the stage
        (default 1 fps), passed with their timestamps (``video_metadata``) and not
        resampled (``do_sample_frames=False``); the audio is 16 kHz through Gemma 4's audio
        feature extractor (128 mel). Gemma 4 takes at most 750 audio soft tokens of 40 ms
        (30 s): longer audio is cut at 30 s explicitly (and logged)."""
        content: list[dict[str, Any]] = [{"type": "video"}] if video else []
        content += [{"type": "audio"}, {"type": "text", "text": prompt}]
        return [{"role": "user", "content": content}]

    def video_kwargs(self, frames: Any, fps: float) -> dict[str, Any]:
        from transformers.video_utils import VideoMetadata

        video, rate = video_frames(frames, fps, even=False)
        n = int(video.shape[0])
        meta = VideoMetadata(total_num_frames=n, fps=rate, frames_indices=list(range(n)))
        return {"videos": [video], "video_metadata": [meta], "do_sample_frames": False}
