"""STAND-IN of MiniCPM-o 4.5's ``modeling_minicpmo.py``: ``MiniCPMO`` with ``self.llm`` (a
``Qwen3ForCausalLM``) and ``chat()`` returning the answer string, as the release.

Media: each numpy audio item becomes one embedding per ``audio_frame`` samples (a linear map
of the raw frame), each PIL image one embedding per ``image_patch``² patch of a 4×4 grid
(a linear map of the patch means), placed where the prompt has ``<unk>`` placeholders —
the release's processor also expands ``<audio>./</audio>`` and ``<image>./</image>`` into
placeholder runs filled from its encoders.
"""

from __future__ import annotations

import json
from copy import deepcopy
from typing import Any

import numpy as np
import torch
from torch import nn
from transformers import AutoTokenizer, PreTrainedModel

try:
    from transformers import Qwen3ForCausalLM
except ImportError:  # transformers < 4.51 (see configuration_minicpmo): never loaded there
    Qwen3ForCausalLM = None

from .configuration_minicpmo import MiniCPMOConfig

_GRID = 4


class MiniCPMO(PreTrainedModel):
    """The release's interface: ``MiniCPMO`` holds the language model as ``self.llm``
    (``Qwen3ForCausalLM``) beside its vision, audio and TTS modules
    (``init_vision``/``init_audio``/``init_tts`` config flags, settable as
    ``from_pretrained`` keyword arguments); ``chat(msgs=…, max_new_tokens, do_sample,
    max_slice_nums, enable_thinking, use_tts_template, generate_audio, omni_mode, …)`` takes
    one conversation whose contents are strings, PIL images and 16 kHz numpy audio, loads
    its processor from ``config._name_or_path``, embeds the media into the LLM's input
    embeddings, decodes with ``self.llm.generate(inputs_embeds=…)`` and returns the answer
    as a ``str`` (text before ``<|tts_eos|>``; a ``(answer, prompt)`` tuple only with
    ``return_prompt``). An audio item in the messages switches the TTS template on. Here a
    tiny linear audio and image embedder stands in for the release's Whisper and SigLIP
    encoders."""

    config_class = MiniCPMOConfig
    _supports_sdpa = True

    def __init__(self, config: MiniCPMOConfig) -> None:
        super().__init__(config)
        self.llm = Qwen3ForCausalLM(config)
        dim = config.hidden_size
        if config.init_vision:
            self.vpm = nn.Linear(3, dim)
        if config.init_audio:
            self.apm = nn.Linear(config.audio_frame, dim)
        self.terminators = ["<|im_end|>", "<|endoftext|>"]
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.llm.get_input_embeddings()

    def _audio(self, audio: np.ndarray) -> torch.Tensor:
        n = self.config.audio_frame
        x = torch.as_tensor(np.asarray(audio, np.float32))
        x = torch.nn.functional.pad(x, (0, (-len(x)) % n)).view(-1, n)
        return self.apm(x.to(self.device, self.apm.weight.dtype))

    def _image(self, image: Any) -> torch.Tensor:
        arr = torch.as_tensor(np.asarray(image.convert("RGB").resize((_GRID * 8, _GRID * 8)),
                                         np.float32) / 255.0)
        patches = arr.view(_GRID, 8, _GRID, 8, 3).mean(dim=(1, 3)).reshape(-1, 3)
        return self.vpm(patches.to(self.device, self.vpm.weight.dtype))

    def _prompt(self, tokenizer: Any, msgs: list[dict[str, Any]], omni_mode: bool,
                enable_thinking: bool, use_tts_template: bool) -> tuple[str, list[Any]]:
        from PIL import Image

        media: list[Any] = []
        for msg in msgs:
            content = [msg["content"]] if isinstance(msg["content"], str) else msg["content"]
            parts = []
            for c in content:
                if isinstance(c, Image.Image):
                    media.append(c)
                    parts.append("<image>./</image>")
                elif isinstance(c, np.ndarray):
                    media.append(c)
                    parts.append("<audio>./</audio>")
                    use_tts_template = True  # as the release: audio turns the TTS template on
                else:
                    parts.append(str(c))
            msg["content"] = ("" if omni_mode else "\n").join(parts)
        text = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True,
                                             use_tts_template=use_tts_template,
                                             enable_thinking=enable_thinking)
        return text, media

    def _embed(self, tokenizer: Any, text: str, media: list[Any]) -> torch.Tensor:
        embeds = [self._image(m) if not isinstance(m, np.ndarray) else self._audio(m)
                  for m in media]
        for tag, emb in zip(_tags(text), embeds):
            text = text.replace(tag, tokenizer.unk_token * len(emb), 1)
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        ids = ids.to(self.device)
        x = self.llm.get_input_embeddings()(ids)
        slots = (ids[0] == tokenizer.unk_token_id).nonzero().flatten()
        if embeds:
            x[0, slots] = torch.cat(embeds).to(x.dtype)
        return x

    @torch.inference_mode()
    def chat(self, image: Any = None, msgs: Any = None, max_new_tokens: int = 4096,
             do_sample: bool = True, max_slice_nums: int | None = None,
             enable_thinking: bool = False, use_tts_template: bool = False,
             generate_audio: bool = False, omni_mode: bool = False,
             return_prompt: bool = False, **kwargs: Any) -> Any:
        tokenizer = AutoTokenizer.from_pretrained(self.config._name_or_path,
                                                  trust_remote_code=True)
        msgs = json.loads(msgs) if isinstance(msgs, str) else deepcopy(msgs)
        text, media = self._prompt(tokenizer, msgs, omni_mode, enable_thinking,
                                   use_tts_template)
        x = self._embed(tokenizer, text, media)
        eos = [tokenizer.convert_tokens_to_ids(t) for t in self.terminators]
        out = self.llm.generate(inputs_embeds=x, attention_mask=torch.ones(x.shape[:2],
                                                                           device=self.device),
                                max_new_tokens=max_new_tokens, do_sample=do_sample,
                                eos_token_id=eos, pad_token_id=eos[-1])
        answer = tokenizer.decode(out[0], skip_special_tokens=True).split("<|tts_eos|>")[0]
        return (answer, text) if return_prompt else answer


def _tags(text: str) -> list[str]:
    """The media tags of ``text`` in order of appearance."""
    found: list[str] = []
    i = 0
    while True:
        hits = [(text.find(t, i), t) for t in ("<image>./</image>", "<audio>./</audio>")]
        hits = [h for h in hits if h[0] >= 0]
        if not hits:
            return found
        pos, tag = min(hits)
        found.append(tag)
        i = pos + len(tag)
