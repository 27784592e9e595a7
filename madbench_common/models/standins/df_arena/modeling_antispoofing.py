"""STAND-IN of DF-Arena's ``modeling_antispoofing.py``: the release's class and its forward,
which returns the plain dict ``{"logits": logits}`` (no ModelOutput, no tuple)."""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedModel

from .backbone import DF_Arena_1B
from .configuration_antispoofing import DF_Arena_1B_Config
from .feature_extraction_antispoofing import AntispoofingFeatureExtractor


class DF_Arena_1B_Antispoofing(PreTrainedModel):  # the release's class name
    config_class = DF_Arena_1B_Config

    def __init__(self, config: DF_Arena_1B_Config) -> None:
        super().__init__(config)
        self.feature_extractor = AntispoofingFeatureExtractor()
        self.backbone = DF_Arena_1B()
        self.post_init()

    def forward(self, input_values: torch.Tensor, attention_mask: Any = None
                ) -> dict[str, torch.Tensor]:
        return {"logits": self.backbone(input_values)}
