"""AudioX audio-to-audio generator (ZeyueT/AudioX @ ca179cc, ``HKUSTAudio/AudioX``; §3.4 ATA).

Upstream's script inference (README "Script Inference": ``get_pretrained_model`` +
``generate_diffusion_cond``), conditioned on the source environment ê **through AudioX's
own audio conditioner**, as upstream documents it (:meth:`AudioXA2A._window`,
:func:`audio_prompt`), on AudioX's fixed 10 s canvas (:class:`AudioXA2A`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.media.audio import resample
from madbench_common.models.env_common import (
    fit_output,
    negative_prompt_for,
    resolve_device,
    settings_record,
    stitch_windows,
    window_starts,
)
from madbench_common.models.roles import Frames
from madbench_common.models.weights import hf_path

__all__ = ["AudioXA2A", "audio_prompt", "fix_cross_attn_masks"]

IMAGE = "a2a-audiox"
REPO = "HKUSTAudio/AudioX"
CLIP_REPO = "openai/clip-vit-base-patch32"
T5_REPO = "t5-base"


def fix_cross_attn_masks(tensors: dict[str, Any]) -> dict[str, Any]:
    """Conditioning tensors whose masks match their token counts.

    At ca179cc AudioX's video conditioner returns a (B, 1) mask for 128 tokens and its
    audio conditioner a (B, 768) mask for 215 tokens (it sizes the mask by the channel
    axis). The positive path never reads them, but the negative-prompt path does
    (``DiffusionTransformer`` masks the negative tokens), and fails on the length
    mismatch. Both conditioners attend to all their tokens, so an all-ones mask of the
    right length is what they mean (``tests/known_issues/test_audiox_cond_masks.py``).
    """
    import torch

    out = {}
    for key, value in tensors.items():
        if isinstance(value, (list, tuple)) and len(value) == 2 and value[0].dim() == 3 \
                and value[1].shape[-1] != value[0].shape[1]:
            tokens = value[0]
            value = [tokens, torch.ones(tokens.shape[:2], device=tokens.device)]
        out[key] = value
    return out


def audio_prompt(env: Audio, rate: Hertz, model_rate: int, start: float, seconds: float) -> Any:
    """ê as AudioX's ``audio_prompt``: upstream ``load_and_process_audio`` on ê resampled
    to the model rate (the ``seconds`` from ``start``, zero-padded at the front when
    shorter), as a (2, samples) tensor."""
    import torch

    x = resample(np.asarray(env, np.float32), rate, model_rate)
    if len(x) == 0:
        raise ConfigError("a2a-audiox: empty source environment")
    first, size = int(model_rate * start), int(model_rate * seconds)
    part = x[first:first + size]
    part = np.concatenate([np.zeros(size - len(part), np.float32), part])
    return torch.from_numpy(np.stack([part, part]))


class AudioXA2A:
    """``EnvGenerator`` (a2a): AudioX regeneration of the source environment.

    AudioX works on a fixed 10 s stereo 44.1 kHz canvas (its video conditioner hard-codes
    10 s at 5 fps, its audio conditioner 215 latent frames). Clips under 10 s keep the
    first ``duration`` seconds (``trim``). A clip of 10–12 s gets a second canvas whose
    audio prompt is the *last* 10 s of ê (``seconds_start`` = duration − 10), cross-faded
    in where the first canvas ends (:func:`madbench_common.models.env_common.stitch_windows`;
    ``continued``) instead of a loop that would repeat the start out of sync with the
    video. Defaults (the paper fixes none): 250 steps, CFG 7, ``dpmpp-3m-sde``, σ_min 0.3
    and σ_max 500 (the README example).
    """

    slug = "a2a-audiox"
    version = "ca179cc"
    reference = False
    paradigm = "a2a"
    frame_request = None

    def __init__(self, device: str | None = None, steps: int = 250, cfg_scale: float = 7.0,
                 sampler: str = "dpmpp-3m-sde", sigma_min: float = 0.3, sigma_max: float = 500.0,
                 init_noise_level: float = 0.0, root: str | None = None) -> None:
        self.device, self.root = device, root
        self.params: dict[str, Any] = {
            "steps": int(steps), "cfg_scale": float(cfg_scale), "sampler_type": sampler,
            "sigma_min": float(sigma_min), "sigma_max": float(sigma_max),
            "init_noise_level": float(init_noise_level)}
        self.last_settings: dict[str, Any] = {}
        self._loaded: tuple[Any, dict[str, Any], str] | None = None

    def _load(self) -> tuple[Any, dict[str, Any], str]:
        if self._loaded is None:
            from stable_audio_tools import get_pretrained_model

            for repo in (REPO, CLIP_REPO, T5_REPO):
                hf_path(repo, image=IMAGE, root=self.root)
            device = resolve_device(self.device)
            model, config = get_pretrained_model(REPO)
            self._loaded = (model.to(device).eval(), config, device)
        return self._loaded

    def _canvas(self, env: Audio, rate: Hertz, model_rate: int, size: int) -> Any:
        """ê at the model rate, tiled to the canvas length, as a (2, size) tensor (the
        ``init_audio`` of the ``init_noise_level`` option)."""
        import torch

        x = resample(np.asarray(env, np.float32), rate, model_rate)
        if len(x) == 0:
            raise ConfigError(f"{self.slug}: empty source environment")
        x = np.resize(x, size) if len(x) < size else x[:size]
        return torch.from_numpy(np.stack([x, x]))

    def generate(self, *, sample_rate: Hertz, duration: Seconds, prompt: str,
                 frames: Frames | None = None, fps: float = 0.0,
                 source_env: Audio | None = None, seed: int = 0,
                 negative_prompt: str = "") -> Audio:
        if source_env is None or len(source_env) == 0:
            raise ConfigError(f"{self.slug}: audio-to-audio generation needs the source env")
        _, config, _ = self._load()
        rate, size = int(config["sample_rate"]), int(config["sample_size"])
        canvas = size / rate
        negative = negative_prompt_for(negative_prompt)
        n = round(duration * sample_rate)
        starts = window_starts(float(duration), canvas)
        outs = [self._window(source_env, sample_rate, start, prompt, negative, seed + i)
                for i, start in enumerate(starts)]
        if len(outs) == 1:
            result, fit = fit_output(outs[0], rate, sample_rate, n)
        else:
            parts = [fit_output(o, rate, sample_rate, round(canvas * sample_rate))[0]
                     for o in outs]
            result, fit = stitch_windows(parts, starts, sample_rate, n), "continued"
        init = float(self.params["init_noise_level"])
        self.last_settings = settings_record(
            seed=seed, native_rate=rate, native_seconds=outs[0].shape[-1] / rate, fit=fit,
            model=REPO, negative_prompt=negative, windows=starts,
            audio_prompt="source env (load_and_process_audio)",
            init_audio="source env tiled to the canvas" if init > 0 else "", **self.params)
        return result

    def _window(self, env: Audio, env_rate: Hertz, start: float, prompt: str, negative: str,
                seed: int) -> Any:
        """One 10 s canvas conditioned on ê from ``start``.

        ê goes in as ``audio_prompt`` (:func:`audio_prompt`) beside the scene prompt as
        ``text_prompt``, with the negative prompt as the negative conditioning (after
        :func:`fix_cross_attn_masks`, which repairs an upstream mask-length bug on that
        path). The video prompt is empty (zeros, AudioX's learned empty features), as
        upstream does without a video. Generation starts from noise at σ_max as in the
        README; ``init_noise_level`` > 0 additionally starts k-diffusion from ê's latents at
        that noise level (``init_audio``)."""
        import torch
        from stable_audio_tools.inference.generation import generate_diffusion_cond

        model, config, device = self._load()
        rate, size = int(config["sample_rate"]), int(config["sample_size"])
        seconds = size / rate
        video = torch.zeros((int(seconds * config.get("video_fps", 5)), 3, 224, 224))
        heard = audio_prompt(env, env_rate, rate, start, seconds)

        def cond(text: str) -> list[dict[str, Any]]:
            return [{"video_prompt": [video.unsqueeze(0)], "text_prompt": text,
                     "audio_prompt": heard.unsqueeze(0), "seconds_start": start,
                     "seconds_total": seconds}]

        p = dict(self.params)
        init_level = float(p.pop("init_noise_level"))
        init = {"init_audio": (rate, self._canvas(env, env_rate, rate, size)),
                "init_noise_level": init_level} if init_level > 0 else {}
        with torch.inference_mode():
            pos, neg = (fix_cross_attn_masks(model.conditioner(cond(text), device))
                        for text in (prompt, negative))
            out = generate_diffusion_cond(
                model, conditioning_tensors=pos, negative_conditioning_tensors=neg,
                sample_size=size, seed=int(seed), device=device, **init, **p)
        return out[0].float().cpu().numpy()
