"""CLAP audio–prompt scores (transformers ``ClapModel``, ``laion/clap-htsat-unfused``).

The paper uses "CLAP-style audio-prompt matching scores" as diagnostic signals for the
generated environmental audio (§3.4). The score of a text is the cosine similarity of
CLAP's normalised audio and text embeddings (in [-1, 1], higher = better match). CLAP
sees 10 s at 48 kHz; a longer clip is covered by evenly spaced full windows whose
embeddings are averaged and renormalised. The unfused checkpoint's feature extractor
would crop longer audio at random (``rand_trunc``); the windows keep scores
deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models._hf import even_windows, model_version, snapshot, torch_device

__all__ = ["REPO", "REVISION", "ClapScorer", "text_token_limit"]

REPO = "laion/clap-htsat-unfused"
REVISION = "8fa0f1c6d0433df6e97c127f64b2a1d6c0dcda8a"


def text_token_limit(max_positions: int, pad_token_id: int, tokenizer_max: int) -> int:
    """Tokens a CLAP text tower takes: its RoBERTa positions start after the padding id
    (514 positions, pad 1: 512 tokens), and the tokenizer's own ``model_max_length`` when
    smaller. A longer prompt is truncated, not an index error: the rehearsal rejected
    every environment component so ("index 80 is out of bounds for dimension 1")."""
    limit = max_positions - pad_token_id - 1
    if 0 < tokenizer_max < limit:
        limit = tokenizer_max
    if limit < 2:
        raise ValueError(f"CLAP text config leaves {limit} token positions")
    return limit


class ClapScorer:
    """Cosine similarity of CLAP audio and text embeddings, one per text."""

    slug = "qc-clap"
    reference = False

    def __init__(self, device: str | None = None, root: str | Path | None = None) -> None:
        from transformers import ClapModel, ClapProcessor

        snap = snapshot(REPO, REVISION, root)
        self.device = torch_device(device)
        self._processor = ClapProcessor.from_pretrained(snap)
        self._model = ClapModel.from_pretrained(snap).to(self.device).eval()
        fusion = bool(self._model.config.audio_config.enable_fusion)
        self._truncation = "fusion" if fusion else "rand_trunc"
        self.version = model_version(REPO, REVISION, "transformers")

    def score_texts(self, audio: Audio, sample_rate: Hertz, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        text = self._text_embeddings(list(texts))
        return [float(s) for s in text @ self._audio_embedding(audio, sample_rate)]

    def _audio_embedding(self, audio: Audio, sample_rate: Hertz) -> np.ndarray:
        import torch

        fe = self._processor.feature_extractor
        rate = int(fe.sampling_rate)
        x = resample(np.asarray(audio, np.float32), sample_rate, rate)
        chunks = [x[s:e] for s, e in even_windows(len(x), int(fe.nb_max_samples))]
        inputs = fe(chunks, sampling_rate=rate, truncation=self._truncation, return_tensors="pt")
        with torch.inference_mode():
            out = self._model.get_audio_features(**inputs.to(self.device)).pooler_output
        vec = out.float().mean(dim=0).cpu().numpy()
        return vec / max(float(np.linalg.norm(vec)), 1e-12)

    def _text_embeddings(self, texts: list[str]) -> np.ndarray:
        import torch

        tok = self._processor.tokenizer
        cfg = self._model.config.text_config
        limit = text_token_limit(int(cfg.max_position_embeddings), int(cfg.pad_token_id),
                                 int(getattr(tok, "model_max_length", 0) or 0))
        inputs = tok(texts, padding=True, truncation=True, max_length=limit,
                     return_tensors="pt")
        with torch.inference_mode():
            out = self._model.get_text_features(**inputs.to(self.device)).pooler_output
        return out.float().cpu().numpy()
