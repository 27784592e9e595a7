"""AudioGen text-to-audio generator (audiocraft 1.3.0, ``facebook/audiogen-medium``; paper §3.4).

The upstream call and its settings: :class:`AudioGenTTA`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.models.env_common import fit_output, resolve_device, settings_record
from madbench_common.models.roles import Frames
from madbench_common.models.weights import hf_path

__all__ = ["AudioGenTTA"]

IMAGE = "env-audiogen"
REPO = "facebook/audiogen-medium"
T5 = "t5-large"


class AudioGenTTA:
    """``EnvGenerator`` (t2a): AudioGen from the scene prompt.

    ``AudioGen.get_pretrained(<snapshot dir>)`` (audiocraft loads ``state_dict.bin`` and
    ``compression_state_dict.bin`` from a local directory; the T5 text conditioner loads
    ``t5-large`` from the Hugging Face cache that ``HF_HOME`` names, the weights volume in
    pods), ``set_generation_params(duration=…)``, ``generate([prompt])``. Output is 16 kHz
    mono; clips longer than the model's 10 s window are continued by audiocraft's own
    windowed extension (``extend_stride``), so the fit is ``exact`` up to the codec frame
    (20 ms), which is trimmed. audiocraft has no negative prompt (classifier-free guidance
    contrasts the prompt with the null condition), so the exclusions stay in the positive
    prompt and ``last_settings`` records ``negative_prompt_used: false``. Sampling draws
    from torch's global generator, so ``generate`` seeds it. Defaults (audiocraft's; the
    paper fixes none): top-k 250, top-p 0, temperature 1.0, CFG coefficient 3.0, one-pass
    CFG, extension stride 2 s.
    """

    slug = "env-audiogen"
    version = "audiocraft-1.3.0"
    reference = False
    paradigm = "t2a"
    frame_request = None

    def __init__(self, repo: str = REPO, device: str | None = None, top_k: int = 250,
                 top_p: float = 0.0, temperature: float = 1.0, cfg_coef: float = 3.0,
                 extend_stride: float = 2.0, root: str | None = None) -> None:
        self.repo, self.device, self.root = repo, device, root
        self.params = {"use_sampling": True, "top_k": int(top_k), "top_p": float(top_p),
                       "temperature": float(temperature), "cfg_coef": float(cfg_coef),
                       "extend_stride": float(extend_stride)}
        self.last_settings: dict[str, Any] = {}
        self._model: Any = None

    @property
    def model(self) -> Any:
        if self._model is None:
            from audiocraft.models import AudioGen

            path = hf_path(self.repo, image=IMAGE, root=self.root)
            hf_path(T5, image=IMAGE, root=self.root)  # the text conditioner's weights
            self._model = AudioGen.get_pretrained(str(path), device=resolve_device(self.device))
        return self._model

    def generate(self, *, sample_rate: Hertz, duration: Seconds, prompt: str,
                 frames: Frames | None = None, fps: float = 0.0,
                 source_env: Audio | None = None, seed: int = 0,
                 negative_prompt: str = "") -> Audio:
        import torch

        model = self.model
        model.set_generation_params(duration=float(duration), **self.params)
        torch.manual_seed(int(seed))
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(int(seed))
        with torch.inference_mode():
            wav = model.generate([prompt]).float().cpu().numpy()
        audio = np.asarray(wav[0], np.float32)
        result, fit = fit_output(audio, model.sample_rate, sample_rate,
                                 round(duration * sample_rate))
        self.last_settings = settings_record(
            seed=seed, native_rate=model.sample_rate, native_seconds=audio.shape[-1]
            / model.sample_rate, fit=fit, model=self.repo, sampler="top-k",
            max_window=float(model.max_duration), negative_prompt_used=False, **self.params)
        return result
