"""STAND-IN of MiniCPM-o 4.5's ``configuration_minicpmo.py``: a Qwen3 config with the
release's module switches and media placeholders."""

from __future__ import annotations

from typing import Any

try:
    from transformers import Qwen3Config
except ImportError:  # transformers < 4.51: images that import every module but never load
    # this stand-in (it is remote code of the omni-minicpmo45 image, on transformers 4.51)
    from transformers import PretrainedConfig as Qwen3Config


class MiniCPMOConfig(Qwen3Config):
    model_type = "minicpmo"

    def __init__(self, init_vision: bool = True, init_audio: bool = True,
                 init_tts: bool = True, audio_frame: int = 1600, image_patch: int = 8,
                 **kwargs: Any) -> None:
        self.init_vision = init_vision
        self.init_audio = init_audio
        self.init_tts = init_tts
        self.audio_frame = audio_frame
        self.image_patch = image_patch
        super().__init__(**kwargs)
