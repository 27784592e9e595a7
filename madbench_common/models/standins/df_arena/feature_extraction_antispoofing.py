"""STAND-IN of DF-Arena's ``feature_extraction_antispoofing.py``, with the release's behaviour:
the first 64,600 samples, tile-repeated when shorter, returned as a 1-D ``input_values``."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from transformers import SequenceFeatureExtractor

MAX_LEN = 64600


class AntispoofingFeatureExtractor(SequenceFeatureExtractor):
    model_input_names = ["input_values"]  # noqa: RUF012 (transformers' class attribute)

    def __init__(self, feature_size: int = 1, sampling_rate: int = 16000,
                 padding_value: float = 0.0, return_attention_mask: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(feature_size=feature_size, sampling_rate=sampling_rate,
                         padding_value=padding_value, **kwargs)
        self.return_attention_mask = return_attention_mask

    def __call__(self, audio: Any, sampling_rate: int | None = None,
                 return_tensors: Any = True, **kwargs: Any) -> dict[str, Any]:
        return {"input_values": torch.Tensor(self.pad(np.asarray(audio), MAX_LEN))}

    def pad(self, x: Any, max_len: int) -> Any:
        if x.shape[0] >= max_len:
            return x[:max_len]
        repeats = int(max_len / x.shape[0]) + 1
        return np.tile(x, (1, repeats))[:, :max_len][0]
