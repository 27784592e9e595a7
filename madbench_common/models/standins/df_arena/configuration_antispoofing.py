"""STAND-IN of DF-Arena's ``configuration_antispoofing.py``: the same config class and fields."""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig


class DF_Arena_1B_Config(PretrainedConfig):  # the release's class name
    model_type = "antispoofing"

    def __init__(self, num_labels: int = 2, sample_rate: int = 16000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_labels = num_labels
        self.sample_rate = sample_rate
        self.out_dim = 1024
