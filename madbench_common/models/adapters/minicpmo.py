"""MiniCPM-o 4.5 as a zero-shot omni model (paper §4.2, §5), through its remote code.

From an offline snapshot of ``openbmb/MiniCPM-o-4_5`` (remote code, pinned by the
snapshot's commit: transformers 4.51, torch ≤ 2.8, numpy < 2); loading, decoding and
scoring on :class:`MiniCPMo45`. Its forward is hub remote code only, so the tests load a
stand-in snapshot in the release layout (:mod:`madbench_common.models.tiny.remote`, whose
``chat()`` returns the answer string as the release's does) and check the messages, the
prefill-logit capture, the parsing and the stage's rows.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.core.types import Audio, Hertz
from madbench_common.models._hf import torch_device
from madbench_common.models._omni_hf import checkpoint_version, option_logprobs, torch_dtype
from madbench_common.models._remote import (
    first_step_logits,
    one_second_chunks,
    writable_modules_cache,
)
from madbench_common.models.roles import Frames, OmniAnswer
from madbench_common.models.weights import hf_path

__all__ = ["IMAGE", "REPO", "REVISION", "MiniCPMo45", "messages"]

IMAGE = "omni-minicpmo45"
REPO = "openbmb/MiniCPM-o-4_5"
REVISION = "main"
SAMPLE_RATE = 16000
MAX_AUDIO_SECONDS = 30.0


def messages(prompt: str, audio16k: np.ndarray, frames: Frames | None = None,
             fps: float = 0.0) -> list[dict[str, Any]]:
    """The chat messages for one question: [audio, prompt], or the omni layout for A-V.

    A-V uses the card's omni layout: one frame then one second of 16 kHz audio per second
    (``get_video_frame_audio_segments``' order, frames as RGB PIL images at the stage's
    rate, default 1 fps), then the prompt, with ``omni_mode=True``."""
    if frames is None:
        return [{"role": "user", "content": [audio16k, prompt]}]
    from PIL import Image

    content: list[Any] = []
    for frame, chunk in one_second_chunks(audio16k, SAMPLE_RATE, list(frames), fps):
        content += [Image.fromarray(np.asarray(frame, np.uint8)), chunk]
    return [{"role": "user", "content": [*content, prompt]}]


class MiniCPMo45:
    """MiniCPM-o 4.5: greedy ``chat()`` answer plus first-token option log-probs.

    Loading (the model card's recipe): ``AutoModel.from_pretrained(snapshot,
    trust_remote_code=True, attn_implementation="sdpa", torch_dtype=bfloat16,
    init_vision=True, init_audio=True, init_tts=False)`` (no speech output) and its
    tokenizer; ``trust_remote_code`` copies the snapshot's code into a writable modules
    cache (:func:`~madbench_common.models._remote.writable_modules_cache`), not the
    read-only weights. Decoding: ``model.chat(..., do_sample=False, use_tts_template=False,
    enable_thinking=False, generate_audio=False, max_slice_nums=1)`` (greedy, text only).

    Scores: ``chat()`` returns text only. A forward hook on the inner LLM (``model.llm``)
    records the logits of its first forward call inside that same ``chat()`` (the prefill
    of the whole prompt, whose last position is the answer position) and each option's
    first token is read there (:func:`~madbench_common.models._remote.first_step_logits`).
    If the hook sees no LLM call, the row keeps the answer alone (``logits`` empty): the
    task is then scored from the parsed answer as a hard decision, so its AUC has a single
    operating point and refusals/unparsed answers are excluded.
    """

    slug = "omni-minicpmo45"
    reference = False
    modes = ("A", "AV")

    def __init__(self, device: str | None = None, root: str | Path | None = None,
                 dtype: str | None = None) -> None:
        from transformers import AutoModel, AutoTokenizer

        snap = hf_path(REPO, image=IMAGE, revision=REVISION, root=root)
        self.device = torch_device(device)
        writable_modules_cache()
        self.model = AutoModel.from_pretrained(
            snap, trust_remote_code=True, attn_implementation="sdpa",
            torch_dtype=torch_dtype(self.device, dtype), init_vision=True, init_audio=True,
            init_tts=False).to(self.device).eval()
        self.tokenizer = AutoTokenizer.from_pretrained(snap, trust_remote_code=True)
        self.version = checkpoint_version(REPO, snap, "transformers")

    def _audio(self, audio: Audio, sample_rate: Hertz) -> np.ndarray:
        from madbench_common.media.audio import resample

        x = resample(np.asarray(audio, np.float32), sample_rate, SAMPLE_RATE)
        return x[:int(MAX_AUDIO_SECONDS * SAMPLE_RATE)]

    def answer(self, prompt: str, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0, choices: Sequence[str] = (),
               max_new_tokens: int = 16) -> OmniAnswer:
        import torch

        start = time.perf_counter()
        msgs = messages(prompt, self._audio(audio, sample_rate), frames, fps)
        with torch.inference_mode(), first_step_logits(self.model.llm) as seen:
            text = self.model.chat(msgs=msgs, do_sample=False, max_new_tokens=max_new_tokens,
                                   use_tts_template=False, enable_thinking=False,
                                   omni_mode=frames is not None, generate_audio=False,
                                   max_slice_nums=1)
        text = text if isinstance(text, str) else str(getattr(text, "text", text))
        options = (option_logprobs(seen.logits, self.tokenizer, choices)
                   if choices and seen.logits is not None else ())
        return OmniAnswer(text.strip(), options, "forward" if options else "",
                          time.perf_counter() - start)
