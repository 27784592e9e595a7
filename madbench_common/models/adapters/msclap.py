"""Microsoft CLAP (Elizalde et al. 2023) audio encoder, PyPI ``msclap`` (image ``enc-msclap``).

The paper's audio-only CLAP row (§4.2, Table 5) cites Elizalde et al., the Microsoft
CLAP; this adapter runs ``msclap.CLAP(version="2023")`` (HTSAT audio encoder, GPT-2
text encoder, 1,024-d projection) with its weights ``CLAP_weights_2023.pth`` from
``microsoft/msclap`` and the GPT-2 text tower from ``openai-community/gpt2``, both
resolved offline from the weights root (msclap itself would download them).

Input: mono audio resampled to 44.1 kHz (the 2023 config) and cut into consecutive
7 s windows; the last (or only) window is filled by repeating it from its start, as
msclap pads short clips. msclap crops one *random* 7 s window of a longer clip; here
every window is embedded and the clip feature is the mean of the windows' projected
audio embeddings (1,024-d), so features are deterministic and cover the whole clip.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.models.prep import check_audio, resample, tile_to, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import hf_path

__all__ = ["MsClapEncoder", "windows"]

IMAGE = "enc-msclap"
WEIGHTS_REPO, WEIGHTS_FILE = "microsoft/msclap", "CLAP_weights_2023.pth"
TEXT_REPO = "openai-community/gpt2"


def windows(x: np.ndarray, n: int) -> np.ndarray:
    """Consecutive ``n``-sample windows of ``x``; the last is completed by repetition."""
    count = max(1, int(np.ceil(x.size / n)))
    out = [x[i * n:(i + 1) * n] for i in range(count)]
    return np.stack([w if w.size == n else tile_to(w, n) for w in out])


def _offline_wrapper(model_fp: str, text_path: str, use_cuda: bool) -> Any:
    """msclap's CLAPWrapper with the text model read from a local snapshot."""
    from msclap import CLAP

    class _Offline(CLAP):
        def read_config_as_args(self, *args: Any, **kwargs: Any) -> Any:
            ns = super().read_config_as_args(*args, **kwargs)
            ns.text_model = text_path  # the snapshot path keeps 'gpt2' in it, as msclap checks
            return ns

    return _Offline(model_fp=model_fp, version="2023", use_cuda=use_cuda)


class MsClapEncoder:
    """CLAP 2023 clip embedding: mean of the projected embeddings of 7 s windows (mode A)."""

    slug, version = "enc-msclap", "1"
    reference = False
    modes: tuple[str, ...] = ("A",)

    def __init__(self, revision: str | None = None) -> None:
        import torch

        model_fp = hf_path(WEIGHTS_REPO, image=IMAGE, filename=WEIGHTS_FILE, revision=revision)
        text = hf_path(TEXT_REPO, image=IMAGE)
        if "gpt" not in str(text):
            raise ConfigError(f"{text}: msclap finds its GPT-2 text model by 'gpt' in the path")
        self.device = torch_device()
        self.wrapper = _offline_wrapper(str(model_fp), str(text), self.device == "cuda")
        _check_loaded(self.wrapper.clap, torch.load(model_fp, map_location="cpu")["model"],
                      str(model_fp))
        args = self.wrapper.args
        self.rate, self.seconds = int(args.sampling_rate), int(args.duration)
        self._torch = torch

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode != "A":
            raise ValueError(f"{self.slug} encodes audio only (mode A), got {mode!r}")
        x = resample(check_audio(audio, self.slug), sample_rate, self.rate)
        win = windows(x, self.rate * self.seconds)
        batch = self._torch.from_numpy(win)[:, None, :].to(self.device)
        emb = self.wrapper._get_audio_embeddings(batch).cpu().numpy()
        spec = InputSpec(audio_rate=self.rate, audio_seconds=float(win.size / self.rate),
                         crop=f"{len(win)} consecutive {self.seconds} s windows, last repeat-"
                              "padded", pooling="mean of the windows' projected embeddings")
        return Embedding(emb.mean(axis=0).astype(np.float32), spec)

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> np.ndarray:
        return self.embed(mode=mode, audio=audio, sample_rate=sample_rate).vector


def _check_loaded(model: Any, state: dict[str, Any], path: str) -> None:
    """msclap loads with ``strict=False``; refuse a checkpoint that misses the audio tower."""
    missing = [k for k in model.state_dict() if k.startswith("audio_encoder.") and k not in state]
    if missing:
        raise ConfigError(f"{path}: not a CLAP 2023 checkpoint ({len(missing)} audio-encoder "
                          f"weights missing, e.g. {missing[0]})")
