"""AASIST (Jung et al. 2022) anti-spoofing detector, clovaai/aasist (image ``audio-torch``).

The upstream code and its ASVspoof 2019 LA weights (``models/weights/AASIST.pth``) live
in the repository, fetched at a pinned commit: ``AASIST.py`` on ``PYTHONPATH``, the
weights through :func:`~madbench_common.models.weights.url_file`. The model config is
upstream's ``config/AASIST.conf`` ``model_config``. Input and outputs: :class:`AasistDetector`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.detector_base import EmbeddingDetector
from madbench_common.models.prep import check_audio, resample, tile_to, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import url_file

__all__ = ["MODEL_CONFIG", "AasistDetector"]

IMAGE, WEIGHTS, RATE = "audio-torch", "AASIST.pth", 16000
MODEL_CONFIG: dict[str, Any] = {
    "architecture": "AASIST", "nb_samp": 64600, "first_conv": 128,
    "filts": [70, [1, 32], [32, 32], [32, 64], [64, 64]], "gat_dims": [64, 32],
    "pool_ratios": [0.5, 0.7, 0.5, 0.5], "temperatures": [2.0, 2.0, 100.0, 100.0],
}
"""``config/AASIST.conf`` at the pinned commit."""


class AasistDetector(EmbeddingDetector):
    """AASIST native P(spoof) and its 160-d embedding (mode A).

    Input, as upstream's evaluation (``data_utils.pad``): 16 kHz mono, repeated from its
    start when shorter than 64,600 samples, then the **first** 64,600 samples (4.04 s);
    longer clips are truncated (upstream scores one fixed crop). Outputs: the 160-d last
    hidden state (``[T_max, T_avg, S_max, S_avg, master]``) as frozen features, and
    ``P(spoof) = softmax(logits)[0]`` (class 0 spoof, 1 bona fide; upstream writes the
    bona fide logit, which ranks the same way only up to the spoof logit).
    """

    slug, version = "audio-torch-aasist", "1"
    reference = False
    modes: tuple[str, ...] = ("A",)

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        import torch
        from AASIST import Model  # upstream_src, on PYTHONPATH in the image

        self.config = config or MODEL_CONFIG
        self.model: Any = Model(self.config)
        state = torch.load(url_file(WEIGHTS, image=IMAGE), map_location="cpu")
        self.model.load_state_dict(state)
        self.device = torch_device()
        self.model.eval().to(self.device)
        self._torch = torch

    def _input(self, mode: str, audio: Audio | None, sample_rate: Hertz) -> np.ndarray:
        """The upstream crop of one input (16 kHz, repeated, the first ``nb_samp``)."""
        if mode != "A":
            raise ValueError(f"{self.slug} scores audio only (mode A), got {mode!r}")
        n = int(self.config["nb_samp"])
        return tile_to(resample(check_audio(audio, self.slug), sample_rate, RATE), n)

    def _forward(self, crops: Sequence[np.ndarray]) -> list[Embedding]:
        """One forward over the stacked crops (all ``nb_samp`` long: no padding); in eval
        mode every layer works per clip (batch norm on its running statistics)."""
        n = int(self.config["nb_samp"])
        with self._torch.no_grad():
            hidden, logits = self.model(self._torch.from_numpy(np.stack(crops)).to(self.device))
            p_spoof = self._torch.softmax(logits, dim=-1)[:, 0].cpu().numpy()
        spec = InputSpec(audio_rate=RATE, audio_seconds=n / RATE,
                         crop=f"first {n} samples after repeat padding",
                         pooling="AASIST last hidden state (max/mean of GAT nodes + master)")
        vectors = hidden.cpu().numpy().astype(np.float32)
        return [Embedding(vectors[i], spec, float(p_spoof[i]), "prob") for i in range(len(crops))]

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        return self._forward([self._input(mode, audio, sample_rate)])[0]

    def embed_batch(self, inputs: Sequence[Mapping[str, Any]]) -> list[Embedding]:
        """:meth:`embed` of each input in one forward (every crop is ``nb_samp`` long)."""
        return self._forward([self._input(str(kw["mode"]), kw.get("audio"),
                                          kw.get("sample_rate", 16000)) for kw in inputs])
