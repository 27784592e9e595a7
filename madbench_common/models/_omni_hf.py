"""Helpers shared by the transformers omni adapters: option first tokens and greedy replies.

:func:`greedy_reply` runs ``model.generate`` greedily (``do_sample=False``: temperature
0) with ``output_logits=True``, so the raw next-token logits at the answer position —
the first decoding step, before any logits processor — come from the same call as the
text. Each requested choice is scored by the log-softmax of its **first token**
(:func:`first_token_ids`; tokenised without special tokens, as it would follow the
chat template's generation prompt).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from madbench_common.roles import OmniAnswer, OptionLogprob

__all__ = ["first_token_ids", "greedy_reply", "option_logprobs", "video_frames"]


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


def video_frames(frames: Any, fps: float) -> tuple[Any, float]:
    """Frames as a (T, 3, H, W) uint8 tensor with an even frame count (temporal patches of
    two), repeating the last frame if needed, and the rate they were sampled at."""
    import numpy as np
    import torch

    arr = np.asarray(frames, dtype=np.uint8)
    if arr.ndim != 4 or arr.shape[-1] != 3 or len(arr) == 0:
        raise ValueError(f"frames must be (T, H, W, 3) RGB with T > 0, got {arr.shape}")
    if len(arr) % 2:
        arr = np.concatenate([arr, arr[-1:]])
    return torch.from_numpy(np.ascontiguousarray(arr)).permute(0, 3, 1, 2), float(fps)
