"""BEATs (Chen et al. 2023) frozen audio encoder, unilm ``beats/`` code (image ``audio-torch``).

The upstream code is not packaged: the image fetches ``microsoft/unilm`` ``beats/`` at a
pinned commit and puts it on ``PYTHONPATH`` (modules ``BEATs``, ``backbone``).
Checkpoint: ``BEATs_iter3_plus_AS2M.pt`` (the iter3+ self-supervised model pre-trained
on AudioSet-2M, not an AudioSet-fine-tuned classifier: a frozen representation as in
paper §4.2; the paper does not name the checkpoint). Input: 16 kHz mono, the whole clip;
BEATs computes its own 128-bin kaldi fbank (25 ms / 10 ms, normalised by its fixed
mean 15.41663 and std 6.55582). Feature: mean over patches of the last layer (768-d).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.models.prep import check_audio, resample, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import url_file

__all__ = ["BeatsEncoder"]

IMAGE, CHECKPOINT, RATE = "audio-torch", "BEATs_iter3_plus_AS2M.pt", 16000


class BeatsEncoder:
    """BEATs last-layer features, mean-pooled (mode A)."""

    slug, version = "audio-torch-beats", "1"
    reference = False
    modes: tuple[str, ...] = ("A",)

    def __init__(self) -> None:
        import torch
        from BEATs import BEATs, BEATsConfig  # upstream_src, on PYTHONPATH in the image

        path = url_file(CHECKPOINT, image=IMAGE)
        ckpt = torch.load(path, map_location="cpu", weights_only=False)
        cfg = BEATsConfig(ckpt["cfg"])
        if cfg.finetuned_model:
            raise ConfigError(f"{path}: a fine-tuned BEATs classifier; the frozen encoder "
                              "needs the pre-trained checkpoint")
        self.model: Any = BEATs(cfg)
        self.model.load_state_dict(ckpt["model"])
        self.device = torch_device()
        self.model.eval().to(self.device)
        self._torch = torch

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode != "A":
            raise ValueError(f"{self.slug} encodes audio only (mode A), got {mode!r}")
        x = resample(check_audio(audio, self.slug), sample_rate, RATE)
        if x.size < RATE // 10:
            raise ValueError(f"{self.slug}: {x.size} samples is too short for its 16x16 patches")
        wav = self._torch.from_numpy(x)[None].to(self.device)
        pad = self._torch.zeros_like(wav, dtype=self._torch.bool)
        with self._torch.no_grad():
            feats = self.model.extract_features(wav, padding_mask=pad)[0]
        spec = InputSpec(audio_rate=RATE, audio_seconds=x.size / RATE,
                         pooling=f"mean over {feats.shape[1]} patches of the last layer")
        return Embedding(feats[0].mean(dim=0).cpu().numpy().astype(np.float32), spec)

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> np.ndarray:
        return self.embed(mode=mode, audio=audio, sample_rate=sample_rate).vector
