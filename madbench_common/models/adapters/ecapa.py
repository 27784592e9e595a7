"""ECAPA-TDNN speaker embeddings (speechbrain ``spkrec-ecapa-voxceleb``) for the QC checks.

The paper measures speaker similarity with ECAPA (Desplanques et al. 2020; §3.3:
source–target similarity, source-speaker preservation, target similarity and leakage).
The adapter loads speechbrain's pretrained interface from the weights root, offline
(``pretrained_path`` points at the fetched snapshot; files are used in place, nothing is
linked or copied), and returns the 192-d embedding scaled to unit norm, so a dot product
is the cosine similarity speechbrain's verification uses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models._hf import model_version, snapshot, torch_device

__all__ = ["REPO", "REVISION", "EcapaEmbedder"]

REPO = "speechbrain/spkrec-ecapa-voxceleb"
REVISION = "0f99f2d0ebe89ac095bcc5903c4dd8f72b367286"
_RATE = 16000
_MIN_SAMPLES = _RATE // 10
"""Shorter inputs are zero-padded to 0.1 s: the filterbank front end needs whole frames."""


class EcapaEmbedder:
    """Unit-norm ECAPA-TDNN speaker embedding at 16 kHz."""

    slug = "qc-ecapa"
    reference = False

    def __init__(self, device: str | None = None, root: str | Path | None = None) -> None:
        from speechbrain.inference.speaker import EncoderClassifier
        from speechbrain.utils.fetching import LocalStrategy

        snap = snapshot(REPO, REVISION, root)
        self.device = torch_device(device)
        self._model = EncoderClassifier.from_hparams(
            source=str(snap), savedir=None, overrides={"pretrained_path": str(snap)},
            local_strategy=LocalStrategy.NO_LINK, run_opts={"device": str(self.device)})
        self.version = model_version(REPO, REVISION, "speechbrain")

    def embed(self, audio: Audio, sample_rate: Hertz) -> npt.NDArray[np.float32]:
        import torch

        x = resample(np.asarray(audio, np.float32), sample_rate, _RATE)
        x = np.pad(x, (0, max(0, _MIN_SAMPLES - len(x))))
        with torch.inference_mode():
            emb = self._model.encode_batch(torch.from_numpy(x)[None].to(self.device))
        vec = emb.reshape(-1).float().cpu().numpy().astype(np.float32)
        return vec / max(float(np.linalg.norm(vec)), 1e-12)
