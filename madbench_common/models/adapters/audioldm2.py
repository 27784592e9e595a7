"""AudioLDM2 environment generators: text-to-audio and SDEdit audio-to-audio (paper §3.4).

Both settings run diffusers' ``AudioLDM2Pipeline`` on ``cvssp/audioldm2`` (16 kHz), loaded
with a workaround for diffusers#12630 (:func:`load_pipeline`): TTA (``env-audioldm2``,
:class:`AudioLDM2TTA`) and ATA (``env-audioldm2-ata``, :class:`AudioLDM2ATA`).
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
)
from madbench_common.models.roles import Frames
from madbench_common.models.weights import hf_path

__all__ = ["AudioLDM2ATA", "AudioLDM2TTA", "load_pipeline", "log_mel", "normalize_wav"]

IMAGE = "env-audioldm2"
REPO = "cvssp/audioldm2"
_N_FFT = 1024
_LOG_FLOOR = 1e-5


def load_pipeline(repo: str, device: str, dtype: str = "float32", root: str | None = None) -> Any:
    """The diffusers pipeline from the weights root, with the diffusers#12630 workaround.

    The checkpoints store the language model as a plain ``GPT2Model``, which has no
    ``_update_model_kwargs_for_generation`` on recent transformers; it is loaded as
    ``GPT2LMHeadModel`` (same weights, LM head tied) and passed to the pipeline.
    ``tests/known_issues/test_diffusers_12630.py`` pins both the failure and the workaround.
    """
    import torch
    from diffusers import AudioLDM2Pipeline
    from transformers import GPT2LMHeadModel

    path = hf_path(repo, image=IMAGE, root=root)
    torch_dtype = getattr(torch, dtype)
    lm = GPT2LMHeadModel.from_pretrained(path, subfolder="language_model", dtype=torch_dtype)
    pipe = AudioLDM2Pipeline.from_pretrained(path, language_model=lm, dtype=torch_dtype)
    pipe = pipe.to(device)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def normalize_wav(audio: Audio) -> Audio:
    """AudioLDM's input normalisation (upstream ``normalize_wav`` in haoheliu/AudioLDM2
    ``audioldm2/utilities/audio/tools.py``, applied by ``read_wav_file`` before every
    encoding): mean removed, then scaled to a peak of 0.5
    (the peak plus 1e-8, so silence stays silence)."""
    x = np.asarray(audio, np.float64)
    x = x - np.mean(x)
    x = x / (np.max(np.abs(x)) + 1e-8)
    return (x * 0.5).astype(np.float32)


def log_mel(audio: Audio, pipe: Any) -> Any:
    """AudioLDM's log-mel of mono ``audio`` at the vocoder rate: a (1, 1, T, n_mels) tensor.

    16 kHz, 1024-point STFT, hop = the vocoder's upsampling factor, 64 Slaney mel bands,
    ``log(max(mel, 1e-5))``.

    T is padded (with the log floor) up to a multiple of the VAE's downsampling factor.
    """
    import torch
    from transformers.audio_utils import mel_filter_bank

    cfg = pipe.vocoder.config
    rate, hop, n_mels = int(cfg.sampling_rate), int(np.prod(cfg.upsample_rates)), cfg.model_in_dim
    bank = mel_filter_bank(num_frequency_bins=_N_FFT // 2 + 1, num_mel_filters=n_mels,
                           min_frequency=0.0, max_frequency=rate / 2, sampling_rate=rate,
                           norm="slaney", mel_scale="slaney")
    x = torch.from_numpy(np.asarray(audio, np.float32))[None]
    pad = (_N_FFT - hop) // 2
    x = torch.nn.functional.pad(x[None], (pad, pad), mode="reflect")[0]
    spec = torch.stft(x, _N_FFT, hop_length=hop, win_length=_N_FFT,
                      window=torch.hann_window(_N_FFT), center=False, return_complex=True).abs()
    mel = torch.from_numpy(bank.T.astype(np.float32)) @ spec[0]
    logmel = torch.log(torch.clamp(mel, min=_LOG_FLOOR)).T  # (T, n_mels)
    factor = pipe.vae_scale_factor
    frames = int(np.ceil(logmel.shape[0] / factor) * factor)
    logmel = torch.nn.functional.pad(logmel, (0, 0, 0, frames - logmel.shape[0]),
                                     value=float(np.log(_LOG_FLOOR)))
    return logmel[None, None]


class _AudioLDM2Base:
    """Shared loading and settings of both AudioLDM2 settings.

    Defaults the paper does not fix: 200 DDIM steps and guidance 3.5 (diffusers' documented
    AudioLDM2 settings), one waveform per prompt (no CLAP re-ranking: the CLAP prompt score
    is a QC diagnostic).
    """

    slug = "env-audioldm2"
    version = "diffusers-0.42.1"
    reference = False
    paradigm = "t2a"
    frame_request = None

    def __init__(self, repo: str = REPO, device: str | None = None, steps: int = 200,
                 guidance: float = 3.5, dtype: str = "float32", root: str | None = None) -> None:
        self.repo, self.device, self.steps, self.guidance = repo, device, int(steps), guidance
        self.dtype, self.root = dtype, root
        self.last_settings: dict[str, Any] = {}
        self._pipe: Any = None

    @property
    def pipe(self) -> Any:
        if self._pipe is None:
            self._pipe = load_pipeline(self.repo, resolve_device(self.device), self.dtype,
                                       self.root)
        return self._pipe

    @classmethod
    def from_pipeline(cls, pipe: Any, **kwargs: Any) -> Any:
        """An adapter around an already-built pipeline (tests, notebooks)."""
        self = cls(**kwargs)
        self._pipe = pipe
        return self

    def _generator(self, seed: int) -> Any:
        import torch

        return torch.Generator(device="cpu").manual_seed(int(seed))

    def _settings(self, seed: int, native: int, fit: str, **extra: Any) -> dict[str, Any]:
        rate = int(self.pipe.vocoder.config.sampling_rate)
        scheduler = type(self.pipe.scheduler).__name__
        return settings_record(seed=seed, native_rate=rate, native_seconds=native / rate,
                               fit=fit, model=self.repo, scheduler=scheduler,
                               steps=self.steps, guidance=self.guidance, **extra)


class AudioLDM2TTA(_AudioLDM2Base):
    """``EnvGenerator`` (t2a): AudioLDM2 text-to-audio from the scene prompt.

    The pipeline's own call with the scene prompt, the negative prompt,
    ``audio_length_in_s`` = the clip duration and a seeded generator. The pipeline makes
    exactly the requested length (it pads the latent to the VAE's factor and cuts the
    waveform back), so the fit is ``exact``.
    """

    def generate(self, *, sample_rate: Hertz, duration: Seconds, prompt: str,
                 frames: Frames | None = None, fps: float = 0.0,
                 source_env: Audio | None = None, seed: int = 0,
                 negative_prompt: str = "") -> Audio:
        import torch

        negative = negative_prompt_for(negative_prompt)
        with torch.inference_mode():
            out = self.pipe(prompt, negative_prompt=negative, num_inference_steps=self.steps,
                            guidance_scale=self.guidance, audio_length_in_s=float(duration),
                            num_waveforms_per_prompt=1, generator=self._generator(seed),
                            output_type="np")
        audio = np.asarray(out.audios[0], np.float32)
        rate = int(self.pipe.vocoder.config.sampling_rate)
        result, fit = fit_output(audio, rate, sample_rate, round(duration * sample_rate))
        self.last_settings = self._settings(seed, len(audio), fit, negative_prompt=negative)
        return result


class AudioLDM2ATA(_AudioLDM2Base):
    """``EnvGenerator`` (a2a): SDEdit of the source environment towards the scene prompt.

    Neither diffusers nor the ``audioldm2`` package has audio-to-audio, so SDEdit (Meng et
    al. 2022) is written here: ê is brought to AudioLDM's input range exactly as upstream
    prepares every waveform it encodes (:func:`normalize_wav`; the VAE was trained on that
    range, so a quiet ê would enter it far below), turned into AudioLDM's log-mel
    (:func:`log_mel`), VAE-encoded (posterior mode), noised to ``strength`` of the DDIM
    schedule, denoised over the remaining steps with the scene prompt and negative prompt
    under classifier-free guidance, then decoded by the VAE and the HiFi-GAN vocoder.
    ``strength`` = 1 would ignore ê entirely, 0 would return it through the VAE; the
    default 0.6 keeps ê's temporal structure while the scene prompt sets the content.
    """

    slug = "env-audioldm2-ata"
    paradigm = "a2a"

    def __init__(self, *args: Any, strength: float = 0.6, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not 0.0 < strength <= 1.0:
            raise ConfigError(f"{self.slug}: SDEdit strength must be in (0, 1], got {strength}")
        self.strength = float(strength)

    def generate(self, *, sample_rate: Hertz, duration: Seconds, prompt: str,
                 frames: Frames | None = None, fps: float = 0.0,
                 source_env: Audio | None = None, seed: int = 0,
                 negative_prompt: str = "") -> Audio:
        if source_env is None or len(source_env) == 0:
            raise ConfigError(f"{self.slug}: audio-to-audio generation needs the source env")
        rate = int(self.pipe.vocoder.config.sampling_rate)
        src = normalize_wav(resample(np.asarray(source_env, np.float32), sample_rate, rate))
        negative = negative_prompt_for(negative_prompt)
        audio, used = self._sdedit(src, prompt, negative, seed)
        result, fit = fit_output(audio, rate, sample_rate, round(duration * sample_rate))
        self.last_settings = self._settings(seed, len(audio), fit, negative_prompt=negative,
                                            strength=self.strength, denoise_steps=used,
                                            method="sdedit", input_norm="audioldm_peak_0.5")
        return result

    def _sdedit(self, src: Audio, prompt: str, negative: str, seed: int) -> tuple[Audio, int]:
        """Encode ê's mel, noise it to ``strength``, denoise with the prompt; waveform out."""
        import torch

        pipe, gen = self.pipe, self._generator(seed)
        device, dtype = pipe._execution_device, pipe.vae.dtype
        with torch.inference_mode():
            mel = log_mel(src, pipe).to(device, dtype)
            latents = pipe.vae.encode(mel).latent_dist.mode() * pipe.vae.config.scaling_factor
            pipe.scheduler.set_timesteps(self.steps, device=device)
            start = max(1, min(self.steps, round(self.steps * self.strength)))
            timesteps = pipe.scheduler.timesteps[self.steps - start:]
            noise = torch.randn(latents.shape, generator=gen, dtype=torch.float32).to(device, dtype)
            latents = pipe.scheduler.add_noise(latents, noise, timesteps[:1])
            latents = self._denoise(latents, timesteps, prompt, negative, gen)
            mel_out = pipe.vae.decode(latents / pipe.vae.config.scaling_factor).sample
            wave = pipe.mel_spectrogram_to_waveform(mel_out)[0].numpy()
        return wave[: len(src)].astype(np.float32), len(timesteps)

    def _denoise(self, latents: Any, timesteps: Any, prompt: str, negative: str,
                 gen: Any) -> Any:
        """The pipeline's guided DDIM loop over ``timesteps`` (diffusers' __call__, step 7)."""
        import torch

        pipe = self.pipe
        cfg = self.guidance > 1.0
        embeds, mask, generated = pipe.encode_prompt(
            prompt, pipe._execution_device, 1, cfg, negative_prompt=negative)
        extra = pipe.prepare_extra_step_kwargs(gen, 0.0)
        for t in timesteps:
            model_in = torch.cat([latents] * 2) if cfg else latents
            model_in = pipe.scheduler.scale_model_input(model_in, t)
            noise = pipe.unet(model_in, t, encoder_hidden_states=generated,
                              encoder_hidden_states_1=embeds, encoder_attention_mask_1=mask,
                              return_dict=False)[0]
            if cfg:
                uncond, cond = noise.chunk(2)
                noise = uncond + self.guidance * (cond - uncond)
            latents = pipe.scheduler.step(noise, t, latents, **extra).prev_sample
        return latents
