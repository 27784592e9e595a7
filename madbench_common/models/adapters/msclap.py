"""Microsoft CLAP (Elizalde et al., ICASSP 2023) audio encoder, PyPI ``msclap`` (``enc-msclap``).

The paper's audio-only CLAP row (§4.2) cites "CLAP (Elizalde et al. 2023)": "CLAP:
learning audio concepts from natural language supervision", whose weights msclap calls
**2022** (CNN14 audio encoder, BERT-base text encoder, 1,024-d projection; 44.1 kHz, 5 s).
Weights, windows and pooling: :class:`MsClapEncoder`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.models.prep import check_audio, resample, tile_to, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import hf_path

__all__ = ["PAPER_VERSION", "VERSIONS", "MsClapEncoder", "windows"]

IMAGE = "enc-msclap"
WEIGHTS_REPO = "microsoft/msclap"
VERSIONS = {"2022": ("CLAP_weights_2022.pth", "google-bert/bert-base-uncased", "bert"),
            "2023": ("CLAP_weights_2023.pth", "openai-community/gpt2", "gpt")}
"""msclap version → (its weights file, its text tower's repository, the word msclap looks
for in the text model's path to choose its tokenizer keys)."""
PAPER_VERSION = "2022"


def windows(x: np.ndarray, n: int) -> np.ndarray:
    """Consecutive ``n``-sample windows of ``x``; the last is completed by repetition."""
    count = max(1, int(np.ceil(x.size / n)))
    out = [x[i * n:(i + 1) * n] for i in range(count)]
    return np.stack([w if w.size == n else tile_to(w, n) for w in out])


def _offline_wrapper(model_fp: str, text_path: str, use_cuda: bool, version: str) -> Any:
    """msclap's CLAPWrapper with the text model read from a local snapshot."""
    from msclap import CLAP

    class _Offline(CLAP):
        def read_config_as_args(self, *args: Any, **kwargs: Any) -> Any:
            ns = super().read_config_as_args(*args, **kwargs)
            ns.text_model = text_path  # the snapshot path keeps 'bert'/'gpt2', as msclap checks
            return ns

    return _Offline(model_fp=model_fp, version=version, use_cuda=use_cuda)


class MsClapEncoder:
    """CLAP clip embedding: mean of the projected embeddings of consecutive windows (mode A);
    msclap's 2022 weights (the paper's) unless ``msclap_version`` says ``2023``.

    ``msclap.CLAP(version="2022")`` with ``CLAP_weights_2022.pth`` from ``microsoft/msclap``
    and the BERT tower from ``google-bert/bert-base-uncased``, both resolved offline from
    the weights root (msclap itself would download them). ``version="2023"`` (HTSAT +
    GPT-2, 7 s; Elizalde et al., "Natural language supervision for general-purpose audio
    representations", ICASSP 2024) is a labelled option, not the paper's model. Input:
    mono audio resampled to 44.1 kHz and cut into consecutive windows of the version's
    duration (5 s for 2022; :func:`windows`). msclap crops one *random* window of a longer
    clip; here every window is embedded and the clip feature is the mean of the windows'
    projected audio embeddings (1,024-d), so features are deterministic and cover the clip.
    """

    slug = "enc-msclap"
    reference = False
    modes: tuple[str, ...] = ("A",)

    def __init__(self, revision: str | None = None, msclap_version: str = PAPER_VERSION
                 ) -> None:
        import torch

        if msclap_version not in VERSIONS:
            raise ConfigError(f"msclap_version {msclap_version!r}: one of {sorted(VERSIONS)}")
        weights_file, text_repo, marker = VERSIONS[msclap_version]
        self.msclap_version = msclap_version
        self.version = "2" if msclap_version == PAPER_VERSION else f"2+{msclap_version}"
        model_fp = hf_path(WEIGHTS_REPO, image=IMAGE, filename=weights_file, revision=revision)
        text = hf_path(text_repo, image=IMAGE)
        if marker not in str(text) or (marker == "bert" and "roberta" in str(text)):
            raise ConfigError(f"{text}: msclap finds its text model by {marker!r} in the path")
        self.device = torch_device()
        self.wrapper = _offline_wrapper(str(model_fp), str(text), self.device == "cuda",
                                        msclap_version)
        _check_loaded(self.wrapper.clap, torch.load(model_fp, map_location="cpu")["model"],
                      str(model_fp), msclap_version)
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


def _check_loaded(model: Any, state: dict[str, Any], path: str, version: str) -> None:
    """msclap loads with ``strict=False``; refuse a checkpoint that misses the audio tower."""
    missing = [k for k in model.state_dict() if k.startswith("audio_encoder.") and k not in state]
    if missing:
        raise ConfigError(f"{path}: not a CLAP {version} checkpoint ({len(missing)} "
                          f"audio-encoder weights missing, e.g. {missing[0]})")
