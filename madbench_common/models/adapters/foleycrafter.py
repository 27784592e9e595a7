"""FoleyCrafter video-to-audio generator (open-mmlab/FoleyCrafter @ c2399fa; paper §3.4, VTA).

This is upstream's ``inference.py`` (``build_models`` + ``run_inference``) for one clip,
with the device a parameter (upstream moves the time condition and the CLIP inputs to
``"cuda"`` by hand) and the clip's frames instead of a video file
(:class:`FoleyCrafterV2A`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.models.env_common import (
    FrameRequest,
    fit_output,
    negative_prompt_for,
    resolve_device,
    settings_record,
    stitch_windows,
    window_starts,
)
from madbench_common.models.roles import Frames
from madbench_common.models.weights import hf_path

__all__ = ["FoleyCrafterV2A", "onset_condition"]

IMAGE = "v2a-foleycrafter"
FOLEYCRAFTER = "ymzhang319/FoleyCrafter"
AUFFUSION = "auffusion/auffusion-full-no-adapter"
IP_ADAPTER = "h94/IP-Adapter"
CANVAS_SECONDS = 10.0
COLUMNS, ROWS, RATE = 1024, 256, 16000


def onset_condition(probs: Any, seconds: float) -> Any:
    """Upstream's ±1 time condition over the 1024 columns from per-frame onset probabilities."""
    import torch

    n = len(probs)
    used = int(COLUMNS / CANVAS_SECONDS * seconds)
    cond = [-1.0 if probs[int(i / (COLUMNS / CANVAS_SECONDS * seconds) * n)] < 0.5 else 1.0
            for i in range(used)]
    cond += [-1.0] * (COLUMNS - len(cond))
    return torch.tensor(cond).view(1, 1, 1, COLUMNS).repeat(1, 1, ROWS, 1)


class FoleyCrafterV2A:
    """``EnvGenerator`` (v2a): FoleyCrafter from the clip's frames and the scene prompt.

    FoleyCrafter always makes 10 s. Clips under 10 s keep the first ``duration`` seconds
    (upstream's own cut; recorded as ``trim``). A clip over 10 s (up to 12 s here) gets a
    second 10 s canvas conditioned on the *last* 10 s of its video, cross-faded in where
    the first canvas ends (:func:`madbench_common.models.env_common.stitch_windows`;
    ``continued``): upstream has no longer canvas, and a loop would repeat the start out
    of sync with the video, an artefact a detector could learn. Defaults (upstream
    ``inference.py``; the paper fixes none): 25 steps, guidance 7.5 (the pipeline
    default), semantic scale 1.0, temporal scale 0.2, 150 onset frames.
    """

    slug = "v2a-foleycrafter"
    version = "c2399fa"
    reference = False
    paradigm = "v2a"
    frame_request = FrameRequest(fps=15.0, size=224, max_frames=200)

    def __init__(self, device: str | None = None, steps: int = 25, guidance: float = 7.5,
                 semantic_scale: float = 1.0, temporal_scale: float = 0.2,
                 onset_frames: int = 150, root: str | None = None) -> None:
        self.device, self.steps, self.guidance = device, int(steps), float(guidance)
        self.semantic_scale, self.temporal_scale = float(semantic_scale), float(temporal_scale)
        self.onset_frames, self.root = int(onset_frames), root
        self.last_settings: dict[str, Any] = {}
        self._parts: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        """upstream ``build_models`` from the weights root, on ``self.device``."""
        if self._parts is None:
            import torch
            from foleycrafter.models.onset import torch_utils
            from foleycrafter.models.time_detector.model import VideoOnsetNet
            from foleycrafter.pipelines.auffusion_pipeline import Generator
            from foleycrafter.utils.util import build_foleycrafter
            from transformers import CLIPImageProcessor, CLIPVisionModelWithProjection

            fc = hf_path(FOLEYCRAFTER, image=IMAGE, root=self.root)
            base = hf_path(AUFFUSION, image=IMAGE, root=self.root)
            ipa = hf_path(IP_ADAPTER, image=IMAGE, root=self.root)
            device = resolve_device(self.device)
            vocoder = Generator.from_pretrained(str(fc), subfolder="vocoder").to(device)
            onset, _ = torch_utils.load_model(str(fc / "timestamp_detector.pth.tar"),
                                              VideoOnsetNet(False), device=device, strict=True)
            pipe = build_foleycrafter(str(base)).to(device)
            ckpt = torch.load(fc / "temporal_adapter.ckpt", map_location="cpu")
            ckpt = ckpt.get("state_dict", ckpt)
            pipe.controlnet.load_state_dict(
                {k.removeprefix("module."): v for k, v in ckpt.items()}, strict=False)
            pipe.load_ip_adapter(str(fc / "semantic"), subfolder="",
                                 weight_name="semantic_adapter.bin", image_encoder_folder=None)
            pipe.set_ip_adapter_scale(self.semantic_scale)
            pipe.set_progress_bar_config(disable=True)
            encoder = CLIPVisionModelWithProjection.from_pretrained(
                str(ipa), subfolder="models/image_encoder").to(device)
            self._parts = {"pipe": pipe, "vocoder": vocoder, "onset": onset.to(device).eval(),
                           "encoder": encoder.eval(), "processor": CLIPImageProcessor(),
                           "device": device}
        return self._parts

    def _frames(self, frames: Frames, fps: float, seconds: float, start: float = 0.0) -> Frames:
        """``onset_frames`` frames evenly spread over ``seconds`` of video from ``start``."""
        first = min(len(frames) - 1, round(start * fps))
        last = min(len(frames), first + max(1, round(seconds * fps))) - 1
        return frames[np.linspace(first, last, self.onset_frames, dtype=int)]

    def _conditions(self, frames: Frames, seconds: float) -> tuple[Any, Any]:
        """Temporal condition: the ``onset_frames`` (150) frames (as
        ``read_frames_with_moviepy(max_frame_nums=150)``), upstream's transform (resize 128,
        centre crop 112, ImageNet normalisation of the 0–255 values, exactly as upstream
        applies it), the onset detector's sigmoid, thresholded at 0.5 into ±1 over the 1024
        spectrogram columns of the 10 s canvas (columns past the clip are −1). Semantic
        condition: the IP-adapter's CLIP image embeddings of those frames, averaged,
        against a zero negative embedding."""
        import torch
        from torchvision import transforms as tv

        p = self._parts or self._load()
        transform = tv.Compose([tv.Resize((128, 128)), tv.CenterCrop((112, 112)),
                                tv.Normalize(mean=[0.485, 0.456, 0.406],
                                             std=[0.229, 0.224, 0.225])])
        video = transform(torch.FloatTensor(np.asarray(frames)).permute(0, 3, 1, 2))
        with torch.inference_mode():
            preds = torch.sigmoid(p["onset"]({"frames": video.unsqueeze(0).permute(0, 2, 1, 3, 4)
                                              .to(p["device"])}))
            time_cond = onset_condition(preds[0].cpu(), seconds).to(p["device"])
            images = p["processor"](images=list(frames), return_tensors="pt").to(p["device"])
            embeds = p["encoder"](**images).image_embeds.mean(dim=0, keepdim=True)[None, None]
        return time_cond, torch.cat([torch.zeros_like(embeds), embeds], dim=1)

    def generate(self, *, sample_rate: Hertz, duration: Seconds, prompt: str,
                 frames: Frames | None = None, fps: float = 0.0,
                 source_env: Audio | None = None, seed: int = 0,
                 negative_prompt: str = "") -> Audio:
        if frames is None or len(frames) == 0 or fps <= 0:
            raise ConfigError(f"{self.slug}: video-to-audio generation needs frames")
        p = self._load()
        negative = negative_prompt_for(negative_prompt)
        starts = window_starts(float(duration), CANVAS_SECONDS)
        seconds = min(float(duration), CANVAS_SECONDS)
        outs = [self._window(frames, fps, start, seconds, prompt, negative, seed + i)
                for i, start in enumerate(starts)]
        n = round(duration * sample_rate)
        if len(outs) == 1:
            result, fit = fit_output(outs[0], RATE, sample_rate, n)
        else:
            parts = [fit_output(o, RATE, sample_rate, round(CANVAS_SECONDS * sample_rate))[0]
                     for o in outs]
            result, fit = stitch_windows(parts, starts, sample_rate, n), "continued"
        self.last_settings = settings_record(
            seed=seed, native_rate=RATE, native_seconds=len(outs[0]) / RATE, fit=fit,
            model=FOLEYCRAFTER, scheduler=type(p["pipe"].scheduler).__name__, steps=self.steps,
            guidance=self.guidance, semantic_scale=self.semantic_scale,
            temporal_scale=self.temporal_scale, onset_frames=self.onset_frames,
            conditioned_seconds=seconds, windows=starts, negative_prompt=negative)
        return result

    def _window(self, frames: Frames, fps: float, start: float, seconds: float, prompt: str,
                negative: str, seed: int) -> Audio:
        """One 10 s canvas from the video's ``seconds`` from ``start``: the auffusion
        ControlNet pipeline (256 × 1024 spectrogram image, PNDM, the scene prompt and
        negative prompt, a seeded generator), ``denormalize_spectrogram`` and the HiFi-GAN
        vocoder (16 kHz, 160 000 samples)."""
        import torch
        from foleycrafter.pipelines.auffusion_pipeline import denormalize_spectrogram

        p = self._load()
        time_cond, embeds = self._conditions(self._frames(frames, fps, seconds, start), seconds)
        gen = torch.Generator(device=p["device"]).manual_seed(int(seed))
        with torch.inference_mode():
            sample = p["pipe"](prompt=prompt, negative_prompt=negative,
                               ip_adapter_image_embeds=embeds, image=time_cond,
                               controlnet_conditioning_scale=self.temporal_scale,
                               num_inference_steps=self.steps, guidance_scale=self.guidance,
                               height=ROWS, width=COLUMNS, output_type="pt", generator=gen)
            spec = denormalize_spectrogram(sample.images[0])
            wav = p["vocoder"].inference(spec, lengths=int(CANVAS_SECONDS * RATE))[0]
        return np.asarray(wav, np.float32) / 32768.0
