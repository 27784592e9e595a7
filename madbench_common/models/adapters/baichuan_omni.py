"""Baichuan-Omni-1.5 as a zero-shot omni model (paper §4.2, §5): remote code + its git repo.

The modeling code comes from the git repository at a pinned commit, config, tokenizer and
weights from the hub snapshot (:func:`model_dir`); prompts follow the web demo's layout
(:func:`message`). The adapter tests run this loader, the processor, the forward and the
first-token scoring on a tiny random model of the upstream classes
(:mod:`madbench_common.models.tiny.baichuan`).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample, wav_bytes
from madbench_common.models._hf import torch_device
from madbench_common.models._omni_hf import checkpoint_version, greedy_reply, torch_dtype
from madbench_common.models._remote import install_remote_shims, writable_modules_cache
from madbench_common.models.roles import Frames, OmniAnswer
from madbench_common.models.weights import hf_path

__all__ = ["CODE_ENV", "IMAGE", "REPO", "REVISION", "SYSTEM_PROMPT", "BaichuanOmni15",
           "message", "model_dir", "sdpa_vision", "write_frames"]

IMAGE = "omni-baichuan15"
REPO = "baichuan-inc/Baichuan-Omni-1d5"
REVISION = "main"
CODE_ENV = "MADBENCH_BAICHUAN_CODE"
"""Folder of the git repository's ``baichuan-omni/model`` (default: the image's copy)."""
_DEFAULT_CODE = "/opt/upstream/baichuan-omni/baichuan-omni/model"
SAMPLE_RATE = 16000
MAX_AUDIO_SECONDS = 30.0
SYSTEM_PROMPT = "You are a helpful assistant."


def message(prompt: str, audio_path: str, video_path: str | None = None,
            system: str = SYSTEM_PROMPT) -> str:
    """The processor's input string: system, question turn with media, answer turn.

    The web demo's layout: ``<B_SYS>`` + system prompt, ``<C_Q>``, then
    ``<video_start_baichuan>{"local": mp4}<video_end_baichuan>`` for A-V (frames written at
    the stage's rate, default 1 fps, which the processor decodes at 1 fps),
    ``<audio_start_baichuan>{"path": wav}<audio_end_baichuan>`` (16 kHz WAV), the question,
    and ``<C_A>``. The demo's ``<audiotext_start_baichuan>`` (spoken reply) is left out:
    the reply is text.
    """
    parts = ["<B_SYS>", system, "<C_Q>"]
    if video_path is not None:
        parts += ["<video_start_baichuan>", json.dumps({"local": video_path}),
                  "<video_end_baichuan>"]
    parts += ["<audio_start_baichuan>", json.dumps({"path": audio_path}),
              "<audio_end_baichuan>", prompt, "<C_A>"]
    return "".join(parts)


def write_frames(frames: Frames, fps: float, path: Path) -> Path:
    """An H.264 MP4 of ``frames`` (T, H, W, 3) at ``fps`` (even sizes, as x264 needs)."""
    from fractions import Fraction

    import av

    arr = np.asarray(frames, np.uint8)
    h, w = arr.shape[1] // 2 * 2, arr.shape[2] // 2 * 2
    rate = Fraction(fps).limit_denominator(1000) if fps > 0 else Fraction(1)
    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        for img in arr[:, :h, :w]:
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(img),
                                                              format="rgb24")))
        out.mux(stream.encode())
    return path


def _flash_attn_installed() -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("flash_attn")
    except PackageNotFoundError:
        return False
    return True


def sdpa_vision(config: Any) -> Any:
    """``config`` with its visual/video encoders on SDPA where it names flash-attention 2 and
    the flash-attn package is not installed (transformers would refuse to build them).

    The release's config names flash-attention 2 for its NaViT visual encoder
    (``visual_config``/``video_config`` ``_attn_implementation``); transformers' own SDPA
    vision attention is the same block-diagonal attention."""
    if _flash_attn_installed():
        return config
    for part in ("visual_config", "video_config"):
        sub = getattr(config, part, None)
        if sub is not None and getattr(sub, "_attn_implementation", "") == "flash_attention_2":
            sub._attn_implementation = "sdpa"
    return config


def model_dir(code: Path, weights: Path, dest: Path) -> Path:
    """``dest`` with the repository's code (``*.py``) and links to every file of the hub
    snapshot (config, generation config, tokenizer, weights).

    The code comes from the git repository ``baichuan-inc/Baichuan-Omni-1.5`` at a pinned
    commit (``image.yaml`` ``upstream_src``, folder ``baichuan-omni/model``), reviewed
    there; everything else from the hub snapshot ``baichuan-inc/Baichuan-Omni-1d5`` (the
    release the weights belong to; the repository's ``tokenizer.json`` is also too large
    for the offline mirror)."""
    if not (code / "modeling_omni.py").exists():
        raise ConfigError(f"{code}: no modeling_omni.py; set {CODE_ENV} to the git repository's "
                          "baichuan-omni/model folder (make image IMAGE=omni-baichuan15 copies it)")
    if not (weights / "config.json").exists():
        raise ConfigError(f"{weights}: no config.json in the Baichuan-Omni-1d5 snapshot; fetch "
                          f"it again with: madbench weights fetch --image {IMAGE}")
    dest.mkdir(parents=True, exist_ok=True)
    for src in code.glob("*.py"):
        (dest / src.name).write_bytes(src.read_bytes())
    for src in weights.iterdir():
        if src.is_file() and src.suffix != ".py":
            os.symlink(src.resolve(), dest / src.name)
    return dest


class BaichuanOmni15:
    """Baichuan-Omni-1.5: greedy text reply plus first-token option log-probs.

    Loaded with ``AutoModelForCausalLM.from_pretrained(..., trust_remote_code=True)`` from
    :func:`model_dir`, the remote code in a writable modules cache. The upstream modules
    import ``flash_attn`` (CUDA build) and ``deepspeed``:
    :func:`~madbench_common.models._remote.install_remote_shims` answers
    ``flash_attn_varlen_func`` with SDPA per packed sequence and stubs the ZeRO hook, so the
    image needs neither (the LLM itself already uses SDPA at inference). Scores:
    ``model.generate(..., do_sample=False, output_logits=True)``, the first decoding step's
    logits at each option's first token (raw logits, before any processor).
    """

    slug = "omni-baichuan15"
    reference = False
    modes = ("A", "AV")

    def __init__(self, device: str | None = None, root: str | Path | None = None,
                 dtype: str | None = None) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        install_remote_shims()
        snap = hf_path(REPO, image=IMAGE, revision=REVISION, root=root)
        self._tmp = tempfile.TemporaryDirectory(prefix="mb-baichuan-")
        path = model_dir(Path(os.environ.get(CODE_ENV, _DEFAULT_CODE)), snap,
                         Path(self._tmp.name) / "model")
        self.device = torch_device(device)
        writable_modules_cache()
        config = sdpa_vision(AutoConfig.from_pretrained(path, trust_remote_code=True))
        self.model = AutoModelForCausalLM.from_pretrained(
            path, config=config, trust_remote_code=True,
            torch_dtype=torch_dtype(self.device, dtype)).to(self.device).eval()
        self.model.training = False
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=True)
        self.model.bind_processor(self.tokenizer, training=False,
                                  relative_path=str(Path(self._tmp.name) / "cache"))
        self.version = checkpoint_version(REPO, snap, "transformers")

    def _media(self, tmp: Path, audio: Audio, sample_rate: Hertz, frames: Frames | None,
               fps: float) -> tuple[str, str | None]:
        x = resample(np.asarray(audio, np.float32), sample_rate, SAMPLE_RATE)
        wav = tmp / "audio.wav"
        wav.write_bytes(wav_bytes(x[:int(MAX_AUDIO_SECONDS * SAMPLE_RATE)], SAMPLE_RATE))
        video = write_frames(frames, fps, tmp / "video.mp4") if frames is not None else None
        return str(wav), (str(video) if video is not None else None)

    def inputs(self, prompt: str, tmp: Path, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0) -> dict[str, Any]:
        """The processor's batch as ``generate`` keyword arguments, media checked present
        (the processor prints and swallows media errors, silently dropping a modality)."""
        wav, video = self._media(tmp, audio, sample_rate, frames, fps)
        ret = self.model.processor([message(prompt, wav, video)])
        if ret.audios is None or (video is not None and ret.videos is None):
            raise ValueError("Baichuan processor dropped the "
                             + ("audio" if ret.audios is None else "video"))
        dev = self.device
        kwargs: dict[str, Any] = {
            "input_ids": ret.input_ids.to(dev),
            "attention_mask": ret.attention_mask.to(dev) if ret.attention_mask is not None
            else None,
            "audios": ret.audios.to(dev), "encoder_length": ret.encoder_length.to(dev),
            "bridge_length": ret.bridge_length.to(dev)}
        if video is not None:
            import torch

            kwargs.update(videos=[torch.tensor(v, dtype=torch.float32).to(dev)
                                  for v in ret.videos],
                          videos_patch_nums=ret.videos_patch_nums, videos_grid=ret.videos_grid)
        return kwargs

    def generation_kwargs(self) -> dict[str, Any]:
        """Placeholder tokens suppressed; the end of text and the start of speech end it.

        The media placeholders (audio pad, image pad, video place) are suppressed because the
        forward cannot take one back without its media (it asserts);
        ``<audiogen_start_baichuan>`` ends the reply, as the web demo's ``stop_strings`` do
        (the spoken part of a reply is not asked for)."""
        cfg = self.model.config
        pads = [cfg.audio_config.audio_pad_token_id, cfg.visual_config.image_pad_token_id,
                cfg.video_config.video_place_token_id]
        eos = self.model.generation_config.eos_token_id
        eos = list(eos) if isinstance(eos, (list, tuple)) else [eos]
        return {"suppress_tokens": sorted(set(pads)),
                "eos_token_id": [*eos, cfg.audio_config.audiogen_start_token_id],
                "pad_token_id": self.tokenizer.pad_token_id}

    def answer(self, prompt: str, audio: Audio, sample_rate: Hertz,
               frames: Frames | None = None, fps: float = 0.0, choices: Sequence[str] = (),
               max_new_tokens: int = 16) -> OmniAnswer:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="mb-baichuan-q-") as tmp:
            batch = self.inputs(prompt, Path(tmp), audio, sample_rate, frames, fps)
            reply = greedy_reply(self.model, batch, self.tokenizer, choices, max_new_tokens,
                                 **self.generation_kwargs())
        return OmniAnswer(reply.text, reply.options, reply.logits,
                          time.perf_counter() - start)
