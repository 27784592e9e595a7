"""MMAudio video-to-audio generator (hkchengrex/MMAudio @ 974010a; paper §3.4, VTA).

Upstream's demo path with the clip's frames instead of a video file (:class:`MMAudioV2A`).
Loading is upstream's own: ``get_my_mmaudio`` + ``load_weights``, and the ``FeaturesUtils``
constructor (open_clip ``hf-hub:`` CLIP, ``Synchformer.load_state_dict``,
``AutoEncoderModule`` with ``BigVGAN.from_pretrained``); a tiny test checkpoint
(:mod:`madbench_common.models.tiny.mmaudio`) passes its widths through :func:`upstream_sizes`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.models.env_common import (
    FrameRequest,
    fit_output,
    frame_indices,
    negative_prompt_for,
    resolve_device,
    settings_record,
)
from madbench_common.models.roles import Frames
from madbench_common.models.weights import TINY_ARCH_FILE, hf_path, url_file

__all__ = ["VARIANTS", "MMAudioV2A", "upstream_sizes"]

IMAGE = "v2a-mmaudio"
REPO = "hkchengrex/MMAudio"
CLIP_REPO = "apple/DFN5B-CLIP-ViT-H-14-384"
BIGVGAN_44K_REPO = "nvidia/bigvgan_v2_44khz_128band_512x"
VARIANTS = {"small_16k": "16k", "small_44k": "44k", "medium_44k": "44k",
            "large_44k": "44k", "large_44k_v2": "44k"}
"""MMAudio network variant → VAE/vocoder mode."""


def _weights(variant: str, root: str | None) -> dict[str, Any]:
    """Local paths of everything the variant loads (raises WeightsMissing if absent).

    ``images/v2a-mmaudio/weights.yaml``: the network from ``hkchengrex/MMAudio``, the VAE
    and Synchformer from MMAudio's GitHub release (URL items), DFN5B CLIP and BigVGAN v2
    from the hub (loaded by id through ``HF_HOME``). Only ``large_44k_v2`` (the paper's, the
    registry's) is fetched; other variants need their files added to weights.yaml."""
    mode = VARIANTS[variant]
    for name in ("open_clip_config.json", "open_clip_pytorch_model.bin"):
        # open_clip only warns when the weights are missing and goes on with a random CLIP
        hf_path(CLIP_REPO, image=IMAGE, root=root, filename=name)
    if mode == "44k":
        for name in ("config.json", "bigvgan_generator.pt"):
            hf_path(BIGVGAN_44K_REPO, image=IMAGE, root=root, filename=name)
    return {"net": hf_path(REPO, image=IMAGE, filename=f"weights/mmaudio_{variant}.pth",
                           root=root),
            "vae": url_file("v1-16.pth" if mode == "16k" else "v1-44.pth", image=IMAGE,
                            root=root),
            "synchformer": url_file("synchformer_state_dict.pth", image=IMAGE, root=root),
            "bigvgan_16k": url_file("best_netG.pt", image=IMAGE, root=root)
            if mode == "16k" else None, "mode": mode}


def _arch(net_ckpt: Path) -> dict[str, Any]:
    """A tiny checkpoint's widths (``madbench_arch.json`` beside the network); ``{}`` for a
    release, which has none."""
    path = net_ckpt.parent / TINY_ARCH_FILE
    return dict(json.loads(path.read_text())) if path.exists() else {}


@contextmanager
def upstream_sizes(arch: Mapping[str, Any]) -> Iterator[None]:
    """While loading, give upstream's fixed-size constructors ``arch``'s widths:
    ``get_my_vae`` builds ``VAE(**arch["vae"])`` and MotionFormer (Synchformer) merges
    ``arch["synchformer_vit"]`` into the VIT section of its packaged YAML. Everything is
    still read from the files by upstream's code; with an empty ``arch`` nothing changes."""
    if not arch:
        yield
        return
    import mmaudio.ext.autoencoder.autoencoder as ae
    import mmaudio.ext.synchformer.motionformer as mf
    from mmaudio.ext.autoencoder.vae import VAE
    from omegaconf import OmegaConf

    vit = dict(arch.get("synchformer_vit") or {})

    class _SizedConf:
        @staticmethod
        def load(path: Any) -> Any:
            return OmegaConf.merge(OmegaConf.load(path), {"VIT": vit})

    saved = ae.get_my_vae, mf.OmegaConf
    ae.get_my_vae = lambda name, **kw: VAE(**{**arch["vae"], **kw})
    mf.OmegaConf = _SizedConf
    try:
        yield
    finally:
        ae.get_my_vae, mf.OmegaConf = saved


class MMAudioV2A:
    """``EnvGenerator`` (v2a): MMAudio from the clip's frames and the scene prompt.

    Upstream's demo path, with the clip's frames instead of a video file
    (:meth:`condition_frames`). The network's sequence lengths follow the clip duration
    (``update_seq_lengths``), so the model makes the clip's length (``exact``, or ``trim``
    of the latent frame rounding). Then ``mmaudio.eval_utils.generate`` runs Euler flow
    matching with the scene prompt, the negative prompt (MMAudio's CFG contrasts with it)
    and a seeded generator; the VAE decodes and the vocoder (BigVGAN v2 at 44.1 kHz; the 16
    kHz BigVGAN for ``small_16k``) makes the waveform, resampled to the pipeline rate.
    Defaults (upstream demo defaults; the paper fixes none): ``large_44k_v2``, 25 Euler
    steps, CFG strength 4.5, bfloat16 on GPU (float32 on CPU).
    """

    slug = "v2a-mmaudio"
    version = "974010a"
    reference = False
    paradigm = "v2a"
    frame_request = FrameRequest(fps=25.0, size=384, max_frames=325)

    def __init__(self, variant: str = "large_44k_v2", device: str | None = None,
                 steps: int = 25, cfg_strength: float = 4.5, dtype: str | None = None,
                 root: str | None = None) -> None:
        if variant not in VARIANTS:
            raise ConfigError(f"{self.slug}: unknown variant {variant!r}; one of {list(VARIANTS)}")
        self.variant, self.device, self.steps, self.cfg = variant, device, int(steps), cfg_strength
        self.dtype, self.root = dtype, root
        self.last_settings: dict[str, Any] = {}
        self._parts: tuple[Any, Any, Any] | None = None

    def _load(self) -> tuple[Any, Any, Any]:
        if self._parts is None:
            import torch
            from mmaudio.model.networks import MMAudio, get_my_mmaudio
            from mmaudio.model.sequence_config import CONFIG_16K, CONFIG_44K
            from mmaudio.model.utils.features_utils import FeaturesUtils

            w = _weights(self.variant, self.root)
            arch = _arch(w["net"])
            device = resolve_device(self.device)
            dtype = getattr(torch, self.dtype or ("bfloat16" if device != "cpu" else "float32"))
            net = MMAudio(**arch["net"]) if arch else get_my_mmaudio(self.variant)
            net = net.to(device, dtype).eval()
            net.load_weights(torch.load(w["net"], map_location=device, weights_only=True))
            with upstream_sizes(arch):
                features = FeaturesUtils(tod_vae_ckpt=str(w["vae"]),
                                         synchformer_ckpt=str(w["synchformer"]),
                                         enable_conditions=True, mode=w["mode"],
                                         bigvgan_vocoder_ckpt=w["bigvgan_16k"] and
                                         str(w["bigvgan_16k"]), need_vae_encoder=False)
            seq = CONFIG_16K if w["mode"] == "16k" else CONFIG_44K
            self._parts = (net, features.to(device, dtype).eval(), seq)
        return self._parts

    def condition_frames(self, frames: Frames, fps: float, duration: Seconds) -> tuple[Any, Any]:
        """(1, T, 3, 384, 384) CLIP frames in [0, 1] and (1, T', 3, 224, 224) sync frames
        in [-1, 1], on MMAudio's 8 and 25 fps grids (upstream's ``load_video`` transforms).

        The stage samples 25 fps, shorter side 384 (:attr:`frame_request`); CLIP frames are
        taken at 8 fps resized to 384 × 384, Synchformer frames at 25 fps resized to 224 on
        the shorter side, centre-cropped and scaled to [-1, 1], by nearest timestamp,
        repeating the last frame where the video is shorter than the clip (upstream would
        shorten the audio instead)."""
        import torch
        from mmaudio import eval_utils as eu
        from torchvision.transforms import v2

        clip_t = v2.Compose([v2.Resize((eu._CLIP_SIZE, eu._CLIP_SIZE),
                                       interpolation=v2.InterpolationMode.BICUBIC),
                             v2.ToImage(), v2.ToDtype(torch.float32, scale=True)])
        sync_t = v2.Compose([v2.Resize(eu._SYNC_SIZE, interpolation=v2.InterpolationMode.BICUBIC),
                             v2.CenterCrop(eu._SYNC_SIZE), v2.ToImage(),
                             v2.ToDtype(torch.float32, scale=True),
                             v2.Normalize(mean=[0.5, 0.5, 0.5], std=[0.5, 0.5, 0.5])])
        video = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)
        clip = video[frame_indices(len(frames), fps, eu._CLIP_FPS, duration)]
        sync = video[frame_indices(len(frames), fps, eu._SYNC_FPS, duration)]
        n_clip, n_sync = int(eu._CLIP_FPS * duration), int(eu._SYNC_FPS * duration)
        return clip_t(clip)[:n_clip].unsqueeze(0), sync_t(sync)[:n_sync].unsqueeze(0)

    def generate(self, *, sample_rate: Hertz, duration: Seconds, prompt: str,
                 frames: Frames | None = None, fps: float = 0.0,
                 source_env: Audio | None = None, seed: int = 0,
                 negative_prompt: str = "") -> Audio:
        import torch
        from mmaudio.eval_utils import generate
        from mmaudio.model.flow_matching import FlowMatching

        if frames is None or len(frames) == 0:
            raise ConfigError(f"{self.slug}: video-to-audio generation needs frames")
        net, features, base = self._load()
        seq = dataclasses.replace(base, duration=float(duration))
        net.update_seq_lengths(seq.latent_seq_len, seq.clip_seq_len, seq.sync_seq_len)
        clip, sync = self.condition_frames(frames, fps, float(duration))
        negative = negative_prompt_for(negative_prompt)
        rng = torch.Generator(device=features.device).manual_seed(int(seed))
        fm = FlowMatching(min_sigma=0, inference_mode="euler", num_steps=self.steps)
        with torch.inference_mode():
            wav = generate(clip, sync, [prompt], negative_text=[negative], feature_utils=features,
                           net=net, fm=fm, rng=rng, cfg_strength=self.cfg)
        audio = wav.float().cpu().numpy()[0]
        result, fit = fit_output(audio, seq.sampling_rate, sample_rate,
                                 round(duration * sample_rate))
        self.last_settings = settings_record(
            seed=seed, native_rate=seq.sampling_rate, native_seconds=audio.shape[-1]
            / seq.sampling_rate, fit=fit, model=f"{REPO}:{self.variant}", sampler="euler",
            steps=self.steps, cfg_strength=self.cfg, negative_prompt=negative,
            clip_frames=int(clip.shape[1]), sync_frames=int(sync.shape[1]), input_fps=fps)
        return result
