"""AST AudioSet tagger (``MIT/ast-finetuned-audioset-10-10-0.4593``) for the QC event checks.

The paper uses "AST-based event checks" (§3.4) and excludes clips with "substantial
music or media playback" (§3.2); the tagger returns the probability of every one of the
527 AudioSet labels by name (``Music``, ``Speech``, ``Television``, ``Radio``, …), so QC
reads the classes it needs. AST sees 10.24 s at a time (1024 frames of 10 ms): a longer
clip is covered by evenly spaced full windows and each label's probability (sigmoid,
multi-label) is averaged over them, i.e. weighted by how much of the clip it fills.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from madbench_common.core.compat import zip_strict
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models._hf import even_windows, model_version, snapshot, torch_device

__all__ = ["REPO", "REVISION", "ASTTagger"]

REPO = "MIT/ast-finetuned-audioset-10-10-0.4593"
REVISION = "f826b80d28226b62986cc218e5cec390b1096902"
_HOP = 0.010
"""AST's filterbank frame shift (Kaldi fbank, 10 ms)."""


class ASTTagger:
    """Label → probability over the checkpoint's labels (AudioSet's 527)."""

    slug = "qc-ast"
    reference = False

    def __init__(self, device: str | None = None, root: str | Path | None = None) -> None:
        from transformers import ASTFeatureExtractor, ASTForAudioClassification

        snap = snapshot(REPO, REVISION, root)
        self.device = torch_device(device)
        self._extractor = ASTFeatureExtractor.from_pretrained(snap)
        self._model = ASTForAudioClassification.from_pretrained(snap).to(self.device).eval()
        self._labels = [self._model.config.id2label[i]
                        for i in range(self._model.config.num_labels)]
        self.version = model_version(REPO, REVISION, "transformers")

    def tag(self, audio: Audio, sample_rate: Hertz) -> dict[str, float]:
        import torch

        rate = int(self._extractor.sampling_rate)
        x = resample(np.asarray(audio, np.float32), sample_rate, rate)
        size = round(self._extractor.max_length * _HOP * rate)
        chunks = [x[s:e] for s, e in even_windows(len(x), size)]
        inputs = self._extractor(chunks, sampling_rate=rate, return_tensors="pt")
        with torch.inference_mode():
            logits = self._model(**inputs.to(self.device)).logits
        probs = torch.sigmoid(logits.float()).mean(dim=0).cpu().numpy()
        return {label: float(p) for label, p in zip_strict(self._labels, probs)}
