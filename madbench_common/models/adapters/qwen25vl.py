"""Qwen2.5-VL scene labeller: describe a clip's video, then assign one fine taxonomy label (§3.4).

The paper has Qwen2.5-VL-32B summarise the visual scene, expected sounds and audio
confounders (:meth:`Qwen25VLSceneLabeller.describe`); the caption is then mapped to one of
the taxonomy's fine labels (:meth:`Qwen25VLSceneLabeller.assign`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.models.env_common import resolve_device
from madbench_common.models.roles import Frames
from madbench_common.models.taxonomy import Taxonomy, assign_label, load_taxonomy
from madbench_common.models.weights import hf_path

__all__ = ["DESCRIBE_PROMPT", "Qwen25VLSceneLabeller", "assign_prompt", "parse_label"]

IMAGE = "scene-qwen25vl"
REPO = "Qwen/Qwen2.5-VL-32B-Instruct"
DESCRIBE_PROMPT = (
    "Describe the scene of this video for a sound designer, in three short parts. "
    "Scene: where this is and what is visible. Expected sounds: the environmental and "
    "background sounds one would hear in this place. Confounders: sounds that may also be "
    "present but are not ambience, such as people speaking, singing, music or a TV or "
    "radio playing. Do not guess who the people are."
)
_METHODS = ("prompt", "loglik", "keyword")


def assign_prompt(caption: str, tax: Taxonomy) -> str:
    """The constrained label prompt: the caption and every fine label with its category."""
    lines = "\n".join(f"- {f.name} ({tax.coarse[f.coarse].description})"
                      for f in tax.fine.values())
    return (f"Scene description:\n{caption}\n\nWhich one of these scene labels fits the scene "
            f"best?\n{lines}\n\nAnswer with the label only, exactly as written.")


def parse_label(answer: str, labels: list[str]) -> str | None:
    """The one label ``answer`` names (exact after normalising, or a unique mention)."""
    norm = re.sub(r"[^a-z0-9]+", "_", answer.lower()).strip("_")
    if norm in labels:
        return norm
    spaced = f" {norm.replace('_', ' ')} "
    hits = [lab for lab in labels if f" {lab.replace('_', ' ')} " in spaced]
    hits = [h for h in hits if not any(h != o and h in o for o in hits)]
    return hits[0] if len(hits) == 1 else None


class Qwen25VLSceneLabeller:
    """``SceneLabeller``: Qwen2.5-VL captions of sampled frames, constrained label assignment.

    :meth:`describe` asks for "the visual scene, expected environmental sounds, and
    potential audio confounders (e.g. speech or music)" of the frames the scene stage
    samples (passed as one video with their real rate, no further frame sampling).
    Defaults the paper does not fix: greedy decoding, 192 new tokens for the caption and
    16 for the label answer, bfloat16 on GPU (float32 on CPU), label scoring in batches of
    16.
    """

    slug = "scene-qwen25vl"
    version = "transformers-5.24.0"
    reference = False

    def __init__(self, repo: str = REPO, device: str | None = None, dtype: str | None = None,
                 assign_method: str = "prompt", max_new_tokens: int = 192,
                 batch: int = 16, root: str | None = None) -> None:
        if assign_method not in _METHODS:
            raise ConfigError(f"{self.slug}: assign_method must be one of {_METHODS}")
        self.repo, self.device, self.dtype, self.root = repo, device, dtype, root
        self.assign_method, self.max_new_tokens, self.batch = assign_method, max_new_tokens, batch
        self.last_assignment: dict[str, str] = {}
        self._loaded: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            import torch
            from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

            path = hf_path(self.repo, image=IMAGE, root=self.root)
            device = resolve_device(self.device)
            dtype = getattr(torch, self.dtype or ("bfloat16" if device != "cpu" else "float32"))
            processor = AutoProcessor.from_pretrained(path)
            # on a GPU the shards load straight into device memory (32B: ~66 GB in bf16)
            placement = {"device_map": device} if device != "cpu" else {}
            model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path, dtype=dtype,
                                                                       **placement)
            self._loaded = (processor, model.to(device).eval())
        return self._loaded

    def _generate(self, messages: list[dict[str, Any]], max_new: int, **media: Any) -> str:
        import torch

        processor, model = self._load()
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        inputs = processor(text=[text], return_tensors="pt", **media).to(model.device)
        with torch.inference_mode():
            out = model.generate(**inputs, max_new_tokens=max_new, do_sample=False)
        new = out[:, inputs["input_ids"].shape[1]:]
        return str(processor.batch_decode(new, skip_special_tokens=True)[0]).strip()

    def describe(self, frames: Frames, fps: float, hint: str = "") -> str:
        """Caption of the clip's frames (``hint`` is ignored: the model looks at the video)."""
        if len(frames) == 0 or fps <= 0:
            raise ConfigError(f"{self.slug}: no frames to describe")
        video = np.asarray(frames)
        if len(video) % 2:  # Qwen's temporal patch is 2 frames
            video = np.concatenate([video, video[-1:]])
        messages = [{"role": "user", "content": [{"type": "video"},
                                                 {"type": "text", "text": DESCRIBE_PROMPT}]}]
        caption = self._generate(messages, self.max_new_tokens, videos=[video],
                                 videos_kwargs={"fps": float(fps), "do_sample_frames": False})
        return " ".join(caption.split())

    def assign(self, caption: str) -> str:
        """One fine label for ``caption``; ``last_assignment`` says how it was chosen.

        A **constrained prompt**: the model sees the caption and the list of fine labels
        (with their coarse category) and answers with one label (greedy). If the answer is
        not exactly one label, **constrained scoring** chooses instead (the mean
        log-probability of each label's tokens as the answer), so the result is always a
        valid label. ``last_assignment`` records the raw answer, the label and the method
        (``prompt`` or ``loglik``; ``keyword`` when built with ``assign_method="keyword"``,
        the deterministic keyword step every describer shares)."""
        tax = load_taxonomy()
        if self.assign_method == "keyword":
            label = assign_label(caption, tax)
            self.last_assignment = {"label": label, "method": "keyword", "raw": ""}
            return label
        prompt = assign_prompt(caption, tax)
        messages = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
        raw = self._generate(messages, 16) if self.assign_method == "prompt" else ""
        parsed = parse_label(raw, list(tax.fine)) if raw else None
        label, method = (parsed, "prompt") if parsed else (
            self._score_labels(messages, list(tax.fine)), "loglik")
        self.last_assignment = {"label": label, "method": method, "raw": raw}
        return label

    def _score_labels(self, messages: list[dict[str, Any]], labels: list[str]) -> str:
        """The label whose tokens have the highest mean log-probability as the answer."""

        processor, model = self._load()
        tok = processor.tokenizer
        prefix = processor.apply_chat_template(messages, add_generation_prompt=True,
                                               tokenize=False)
        head = tok(prefix, add_special_tokens=False)["input_ids"]
        scores: list[float] = []
        for i in range(0, len(labels), self.batch):
            chunk = [tok(lab, add_special_tokens=False)["input_ids"]
                     for lab in labels[i:i + self.batch]]
            scores += self._mean_logprobs(model, head, chunk, int(tok.pad_token_id or 0))
        return labels[int(np.argmax(scores))]

    @staticmethod
    def _mean_logprobs(model: Any, head: list[int], tails: list[list[int]],
                       pad: int) -> list[float]:
        import torch

        width = len(head) + max(len(t) for t in tails)
        ids = torch.full((len(tails), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for row, tail in enumerate(tails):
            seq = head + tail
            ids[row, :len(seq)] = torch.tensor(seq)
            mask[row, :len(seq)] = 1
        start, longest = len(head) - 1, max(len(t) for t in tails)
        with torch.inference_mode():
            logits = model(input_ids=ids.to(model.device),
                           attention_mask=mask.to(model.device)).logits
            # only the positions that predict a label token, (labels, label tokens, vocab),
            # go to float32 and the log-softmax: the whole (labels, sequence, vocab) in
            # float32 is ~16 x 2000 x 152k x 4 bytes (~19 GB) for one batch of labels
            logp = torch.log_softmax(logits[:, start:start + longest].float(), dim=-1).cpu()
        out = []
        for row, tail in enumerate(tails):
            out.append(float(logp[row, torch.arange(len(tail)), torch.tensor(tail)].mean()))
        return out
