"""SALMONN 13B (Tang et al., ICLR 2024) as a DEAF answer model (DEAF §3.1: the seventh model).

Upstream's own inference, from the SALMONN repository (``bytedance/SALMONN``, branch
``salmonn``, the commit ``images/deaf-salmonn/image.yaml`` pins), whose root is on the
image's path (package ``models``, imported as ``salmonn_models``: :func:`upstream`).
:class:`Salmonn` loads, prompts and decodes as ``cli_inference.py`` does.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError, EnvironmentMissing
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models.roles import Frames, OmniAnswer, OptionLogprob
from madbench_common.models.weights import hf_path, url_file, weights_root

__all__ = ["BEATS_FILE", "BERT", "CKPT_FILE", "CKPT_REPO", "DECODE", "GENERATE", "IMAGE",
           "PROMPT_TEMPLATE", "VICUNA", "WHISPER", "Salmonn", "check_hub_cache",
           "model_config", "prepare_sample", "upstream", "upstream_salmonn"]

log = logging.getLogger("madbench")
IMAGE = "deaf-salmonn"
CKPT_REPO, CKPT_FILE = "tsinghua-ee/SALMONN", "salmonn_v1.pth"
WHISPER = "openai/whisper-large-v2"
VICUNA = "lmsys/vicuna-13b-v1.1"
BERT = "bert-base-uncased"
BEATS_FILE = "BEATs_iter3_plus_AS2M_finetuned_on_AS2M_cpt2.pt"
TINY_REVISION = "0" * 40
"""The snapshot revision :mod:`madbench_common.models.tiny.salmonn` writes (a fetched
checkpoint has its hub commit)."""
_RATE = 16000

DECODE: dict[str, Any] = {
    "freeze_whisper": True, "freeze_beats": True,
    "use_speech_Qformer": True, "freeze_speech_QFormer": False, "window_level_Qformer": True,
    "num_speech_query_token": 1, "second_per_window": 0.333333, "second_stride": 0.333333,
    "speech_llama_proj_model": "", "freeze_speech_llama_proj": False,
    "lora": True, "lora_rank": 8, "lora_alpha": 32, "lora_dropout": 0.1,
    "multi_prompt": True, "prompt_template": "USER: {}\nASSISTANT:",
    "max_txt_len": 300, "end_sym": "</s>",
}
"""``configs/decode_config.yaml``, section ``model`` (paths aside). Its ``prompt_path`` and
``test_prompt_path`` name training prompt files that inference never reads: left empty."""
GENERATE: dict[str, Any] = {
    "max_new_tokens": 200, "num_beams": 4, "do_sample": False, "min_length": 1,
    "temperature": 1.0, "top_p": 0.9, "repetition_penalty": 1.0, "length_penalty": 1.0,
}
"""``configs/decode_config.yaml``, section ``generate``."""
PROMPT_TEMPLATE = DECODE["prompt_template"]
SPEECH = "<Speech><SpeechHere></Speech> "
"""What ``cli_inference.py`` puts before the question (the audio goes at ``<SpeechHere>``)."""


_PACKAGE = "salmonn_models"


def upstream(module: str = "") -> Any:
    """The repository's package ``models`` (or its submodule ``module``), imported as
    ``salmonn_models``: other code on the path (the test suite's ``tests/models``, other
    repositories' ``models``) shadows the name ``models``, so the package is loaded from
    the path entry that holds ``models/salmonn.py`` (its imports are relative)."""
    import importlib
    import importlib.util
    import sys

    if _PACKAGE not in sys.modules:
        pkg = next((Path(e or ".") / "models" for e in sys.path
                    if (Path(e or ".") / "models" / "salmonn.py").is_file()
                    and (Path(e or ".") / "models" / "Qformer.py").is_file()), None)
        if pkg is None:
            raise EnvironmentMissing(
                "SALMONN needs the bytedance/SALMONN repository on the path (models/salmonn.py "
                f"not found on sys.path); it is in image {IMAGE!r}, or run make adapter-test "
                f"IMAGE={IMAGE}")
        spec = importlib.util.spec_from_file_location(
            _PACKAGE, pkg / "__init__.py", submodule_search_locations=[str(pkg)])
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[_PACKAGE] = package
        try:
            spec.loader.exec_module(package)
        except BaseException:
            del sys.modules[_PACKAGE]
            raise
    return importlib.import_module(f"{_PACKAGE}.{module}" if module else _PACKAGE)


def upstream_salmonn() -> Any:
    """The repository's ``SALMONN`` class (``models/salmonn.py``)."""
    return upstream("salmonn").SALMONN


def check_hub_cache(root: Path) -> None:
    """The Q-Former's ``BertConfig.from_pretrained("bert-base-uncased")`` reads the Hugging
    Face cache transformers was started with: it must be ``<root>/huggingface/hub``."""
    from transformers.utils import hub

    cache = Path(hub.TRANSFORMERS_CACHE).resolve()
    want = (Path(root) / "huggingface" / "hub").resolve()
    if cache != want:
        raise ConfigError(f"SALMONN reads {BERT} through the Hugging Face cache {cache}, not "
                          f"the weights root's {want}: set HF_HOME={want.parent} (as pods do)")


def model_config(vicuna: Path, whisper: Path, beats: Path) -> dict[str, Any]:
    """``decode_config.yaml``'s model section with the weights' paths (no ``ckpt``: loaded
    and checked by :class:`Salmonn`)."""
    return {**DECODE, "llama_path": str(vicuna), "whisper_path": str(whisper),
            "beats_path": str(beats), "ckpt": "", "prompt_path": ""}


def prepare_sample(audio: Audio, sample_rate: Hertz, extractor: Any) -> dict[str, Any]:
    """``utils.prepare_one_sample`` on an array: 16 kHz mono, padded to 1 s, cut at 30 s.

    Whisper's feature extractor makes the spectrogram; BEATs takes the raw 16 kHz samples
    with an all-false padding mask. DEAF's clips are 16 kHz already; others are resampled
    first."""
    import torch

    x = resample(np.asarray(audio, np.float32), sample_rate, _RATE).astype(np.float64)
    if len(x) < _RATE:
        x = np.concatenate((x, np.zeros(_RATE - len(x))))
    x = x[: _RATE * 30]
    spectrogram = extractor(x, sampling_rate=_RATE, return_tensors="pt")["input_features"]
    return {"spectrogram": spectrogram, "raw_wav": torch.from_numpy(x).unsqueeze(0),
            "padding_mask": torch.zeros(len(x), dtype=torch.bool).unsqueeze(0)}


class Salmonn:
    """SALMONN-13B v1 through the repository's own classes.

    Model: ``SALMONN.from_config`` with ``configs/decode_config.yaml``'s model section
    (:data:`DECODE`): the Whisper large-v2 encoder (the repository's ``WhisperModel``) and
    BEATs iter3+ AS2M cpt2 features, concatenated per frame and read by a window-level
    Q-Former (one query per 0.333 s window; BERT config of ``bert-base-uncased``, 2
    layers), projected into Vicuna 13B v1.1 (``LlamaForCausalLM``, float16) with LoRA
    (peft: r 8, α 32). On the CPU (the tiny test) LLaMA runs in float32: torch 2.0.1 has no
    float16 matmul on the CPU and upstream disables autocast there. Weights
    (``images/deaf-salmonn/weights.yaml``) are read offline (:func:`check_hub_cache`); a
    checkpoint written by :mod:`madbench_common.models.tiny.salmonn` marks the version
    ``+tiny-random``.
    """

    slug = "deaf-salmonn"
    reference = False
    modes = ("A",)
    requires_modules = ("torch", "transformers")
    """What the interpreter running it must import (checked before a run starts)."""

    def __init__(self, device: str | None = None, root: str | os.PathLike[str] | None = None,
                 num_beams: int = GENERATE["num_beams"], seed: int = 0) -> None:
        import torch

        base = weights_root(root)
        vicuna = hf_path(VICUNA, image=IMAGE, root=base)
        whisper = hf_path(WHISPER, image=IMAGE, root=base)
        ckpt = hf_path(CKPT_REPO, image=IMAGE, filename=CKPT_FILE, root=base)
        hf_path(BERT, image=IMAGE, filename="config.json", root=base)
        beats = url_file(BEATS_FILE, image=IMAGE, root=base)
        check_hub_cache(base)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.generate_cfg = {**GENERATE, "num_beams": int(num_beams)}
        # resize_token_embeddings gives the added [PAD] token random rows: seeded, so every
        # load of the same weights answers the same
        torch.manual_seed(seed)
        model = upstream_salmonn().from_config(model_config(vicuna, whisper, beats))
        self._load_checkpoint(model, ckpt)
        model.to(self.device)
        if self.device.type == "cpu":
            model.float()
        self.model = model.eval()
        from transformers import WhisperFeatureExtractor

        self.extractor = WhisperFeatureExtractor.from_pretrained(whisper)
        tiny = ckpt.parent.name == TINY_REVISION
        if tiny:
            log.warning("%s: %s is a tiny RANDOM checkpoint; its answers are noise", self.slug,
                        ckpt)
        self.version = (f"{CKPT_REPO}@{ckpt.parent.name[:12]}+{VICUNA.split('/')[1]}@"
                        f"{vicuna.name[:12]}" + ("+tiny-random" if tiny else ""))

    @staticmethod
    def _load_checkpoint(model: Any, path: Path) -> None:
        """``from_config``'s ``ckpt`` step (``load_state_dict(strict=False)``), made loud:
        a checkpoint none of whose keys fits, or one that leaves a trained part (Q-Former,
        projection, layer norms, LoRA) at its random initialisation, is refused, since the
        model would answer without error and without hearing; extra keys are logged."""
        import torch

        state = torch.load(path, map_location="cpu")["model"]
        result = model.load_state_dict(state, strict=False)
        if len(result.unexpected_keys) == len(state):
            raise ConfigError(f"{path}: none of its {len(state)} keys is a SALMONN parameter "
                              f"(e.g. {result.unexpected_keys[:3]}): not a SALMONN checkpoint")
        if result.unexpected_keys:
            log.warning("%s: %d keys match no SALMONN parameter and are ignored (e.g. %s)", path,
                        len(result.unexpected_keys), result.unexpected_keys[:3])
        trained = {k for k, p in model.named_parameters() if p.requires_grad}
        if missing := sorted(trained - set(state)):
            raise ConfigError(f"{path}: lacks {len(missing)} trained SALMONN weights (e.g. "
                              f"{missing[:3]}), which would stay random")

    def prompt(self, question: str) -> str:
        """``cli_inference.py``'s prompt around ``question``: ``"USER: {}\\nASSISTANT:"``
        around ``"<Speech><SpeechHere></Speech> " + question``."""
        return PROMPT_TEMPLATE.format(SPEECH + question.strip())

    def _embeds(self, samples: dict[str, Any], prompt: str) -> tuple[Any, Any]:
        """``SALMONN.generate``'s inputs: bos, the prompt with the audio tokens in it."""
        import torch

        m = self.model
        speech, atts = m.encode_speech(samples["spectrogram"], raw_wav=samples["raw_wav"],
                                       audio_padding_mask=samples["padding_mask"])
        speech, atts = m.prompt_wrap(speech, atts, [prompt], multi_prompt=True)
        bos = torch.ones([1, 1], dtype=torch.int32, device=speech.device) \
            * m.llama_tokenizer.bos_token_id
        llama = m.llama_model.model  # peft wraps the LLaMA once more with LoRA
        embed = llama.model.embed_tokens if m.lora else llama.embed_tokens
        return torch.cat([embed(bos), speech], dim=1), torch.cat([atts[:, :1], atts], dim=1)

    def generate(self, samples: dict[str, Any], prompt: str, max_new_tokens: int) -> str:
        """``SALMONN.generate`` for one sample, its stop token on this model's device.

        Upstream's ``SALMONN.generate`` hard-codes ``.cuda()`` for its stop token (``</s>``,
        id 2); this is its body with the device as a parameter. Decoding is
        ``decode_config.yaml``'s ``generate`` section (:data:`GENERATE`: beam search, 4
        beams, no sampling, so deterministic; the model's recommended setting, which DEAF
        §3.1 says it used) under float16 autocast on a GPU, as ``cli_inference.py`` runs it.
        The reply is the decoded text without special tokens (upstream prints ``</s>`` too).
        """
        import torch
        from transformers import StoppingCriteriaList

        StoppingCriteriaSub = upstream("utils").StoppingCriteriaSub

        embeds, attns = self._embeds(samples, prompt)
        cfg = {**self.generate_cfg, "max_new_tokens": int(max_new_tokens)}
        stop = StoppingCriteriaList([StoppingCriteriaSub(stops=[torch.tensor([2],
                                                                             device=embeds.device)])])
        out = self.model.llama_model.generate(
            inputs_embeds=embeds, attention_mask=attns, stopping_criteria=stop,
            max_new_tokens=cfg["max_new_tokens"], num_beams=cfg["num_beams"],
            do_sample=cfg["do_sample"], min_length=cfg["min_length"],
            temperature=cfg["temperature"], top_p=cfg["top_p"],
            repetition_penalty=cfg["repetition_penalty"], length_penalty=cfg["length_penalty"])
        text: str = self.model.llama_tokenizer.batch_decode(out, skip_special_tokens=True)[0]
        return text.strip()

    def _options(self, samples: dict[str, Any], prompt: str,
                 choices: Sequence[str]) -> tuple[OptionLogprob, ...]:
        import torch

        embeds, attns = self._embeds(samples, prompt)
        logits = self.model.llama_model(inputs_embeds=embeds, attention_mask=attns).logits
        logp = torch.log_softmax(logits[0, -1].float(), dim=-1)
        tok = self.model.llama_tokenizer
        out = []
        for c in choices:
            ids = tok(c, add_special_tokens=False)["input_ids"]
            if not ids:
                raise ValueError(f"choice {c!r} tokenises to nothing")
            out.append(OptionLogprob(c, int(ids[0]), float(logp[int(ids[0])])))
        return tuple(out)

    def answer(self, prompt: str, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0, choices: Sequence[str] = (),
               max_new_tokens: int = GENERATE["max_new_tokens"]) -> OmniAnswer:
        """SALMONN's reply to ``prompt`` about ``audio`` (and, given ``choices``, their
        first-token log-probabilities from a forward pass on the same input:
        ``logits="forward"``). ``max_new_tokens`` comes from the caller (upstream: 200)."""
        import contextlib

        import torch

        if frames is not None:
            raise ConfigError(f"{self.slug}: audio-only model; video frames are not taken")
        start = time.perf_counter()
        samples = {k: v.to(self.device) for k, v in
                   prepare_sample(audio, sample_rate, self.extractor).items()}
        text = self.prompt(prompt)
        cast = (torch.cuda.amp.autocast(dtype=torch.float16) if self.device.type == "cuda"
                else contextlib.nullcontext())
        with torch.inference_mode(), cast:
            reply = self.generate(samples, text, max_new_tokens)
            options = self._options(samples, text, choices) if choices else ()
        return OmniAnswer(reply, options, "forward" if choices else "",
                          time.perf_counter() - start)
