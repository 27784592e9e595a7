"""DF-Arena-1B (RAPTOR, Kulkarni et al. 2026) anti-spoofing detector (image ``det-df-arena``).

The checkpoint ``Speech-Arena-2025/DF_Arena_1B_V_1`` ships its model as Hugging Face
remote code (``auto_map``: ``AutoModel`` → ``modeling_antispoofing.DF_Arena_1B_Antispoofing``,
whose constructor attaches its ``AntispoofingFeatureExtractor`` as ``model.feature_extractor``;
``id2label`` 0 = spoof, 1 = bonafide): an XLS-R 1B front end with layer-attention pooling
and a 4-block Conformer head (1,148 M parameters). Its forward is not run offline (hub-only
code); the adapter tests load a stand-in snapshot (:mod:`madbench_common.models.tiny.remote`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.models._remote import writable_modules_cache
from madbench_common.models.detector_base import EmbeddingDetector
from madbench_common.models.prep import check_audio, resample, tile_to, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import hf_path

__all__ = ["NB_SAMP", "REPO", "DfArenaDetector", "classifier_hook", "logits_of", "p_spoof",
           "prepare"]

IMAGE, REPO, RATE, NB_SAMP = "det-df-arena", "Speech-Arena-2025/DF_Arena_1B_V_1", 16000, 64600


def prepare(audio: Audio | None, sample_rate: Hertz) -> npt.NDArray[np.float32]:
    """The model card's input: 16 kHz, first 64,600 samples, tile-repeated when shorter.

    The deterministic first 4.04 s (no random crop); the checkpoint's feature extractor
    follows in the model."""
    return tile_to(resample(check_audio(audio, "det-df-arena"), sample_rate, RATE), NB_SAMP)


def p_spoof(logits: npt.ArrayLike, id2label: dict[Any, str]) -> float:
    """``softmax(logits)`` at the label named ``spoof`` in the config's ``id2label``."""
    z = np.asarray(logits, dtype=np.float64).reshape(-1)
    labels = {int(k): str(v).lower() for k, v in id2label.items()}
    spoof = [i for i, name in labels.items() if name == "spoof"]
    if len(spoof) != 1 or len(labels) != z.size:
        raise ConfigError(f"DF-Arena config id2label {id2label} does not name one 'spoof' "
                          f"class among {z.size} logits")
    p = np.exp(z - z.max())
    return float(p[spoof[0]] / p.sum())


def logits_of(out: Any) -> Any:
    """The logits in the remote model's output: the release's ``forward`` returns a plain dict
    ``{"logits": …}``; a ``ModelOutput``, a tuple or a bare tensor are read too."""
    if isinstance(out, Mapping):  # the release's dict (and a ModelOutput, an OrderedDict)
        if "logits" not in out:
            raise ConfigError(f"DF-Arena model output has no 'logits' (keys: {sorted(out)})")
        return out["logits"]
    if hasattr(out, "logits"):
        return out.logits
    if isinstance(out, (tuple, list)) and out:
        return out[0]
    if hasattr(out, "shape"):
        return out
    raise ConfigError(f"DF-Arena model output of type {type(out).__name__} has no logits")


def classifier_hook(model: Any, n_classes: int) -> Callable[[], npt.NDArray[np.float32]]:
    """Hook the last ``nn.Linear`` with ``n_classes`` outputs; return a getter of its input."""
    import torch

    heads = [m for m in model.modules()
             if isinstance(m, torch.nn.Linear) and m.out_features == n_classes]
    if not heads:
        raise ConfigError(f"no {n_classes}-way linear classifier found in the DF-Arena model")
    seen: dict[str, Any] = {}
    heads[-1].register_forward_hook(lambda _m, args, _out: seen.__setitem__("x", args[0]))

    def get() -> npt.NDArray[np.float32]:
        x = seen.pop("x")
        return np.asarray(x.detach().float().cpu().numpy()[0], dtype=np.float32).reshape(-1)

    return get


class DfArenaDetector(EmbeddingDetector):
    """DF-Arena-1B native P(spoof) and the classifier's input as features (mode A).

    Loaded offline from the weights root with ``trust_remote_code=True``; the remote code
    is part of the fetched snapshot, and transformers' copy of it goes to a writable
    modules cache (:func:`~madbench_common.models._remote.writable_modules_cache`). The
    backbone builds the XLS-R front end from
    ``Wav2Vec2Config.from_pretrained("facebook/wav2vec2-xls-r-1b")``, which ``weights.yaml``
    therefore fetches too (its ``config.json``; offline, transformers finds it in the
    Hugging Face cache). Native score: ``P(spoof) = softmax(logits)[spoof]`` (the card's
    score is the bona fide probability, its complement). Frozen features: the input of the
    final 2-way linear classifier (the pooled class-token representation), captured with a
    forward hook (:func:`classifier_hook`), since the remote model returns only logits.
    """

    slug, version = "det-df-arena", "1"
    reference = False
    modes: tuple[str, ...] = ("A",)

    def __init__(self, revision: str | None = None) -> None:
        import torch
        from transformers import AutoModel

        path = hf_path(REPO, image=IMAGE, revision=revision)
        writable_modules_cache()
        self.model: Any = AutoModel.from_pretrained(path, trust_remote_code=True)
        # the release's model builds its own extractor (no preprocessor_config.json needed)
        self.extractor: Any = getattr(self.model, "feature_extractor", None)
        if not callable(self.extractor):
            raise ConfigError(f"{path}: the DF-Arena model has no feature_extractor (is this "
                              "the release's modeling_antispoofing.py?)")
        self.device = torch_device()
        self.model.eval().to(self.device)
        self.id2label = dict(self.model.config.id2label)
        self._features = classifier_hook(self.model, len(self.id2label))
        self._torch = torch

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode != "A":
            raise ValueError(f"{self.slug} scores audio only (mode A), got {mode!r}")
        x = prepare(audio, sample_rate)
        inputs = self.extractor(x, sampling_rate=RATE, return_tensors="pt")
        with self._torch.no_grad():
            out = self.model(**{k: v.to(self.device) for k, v in inputs.items()})
        logits = logits_of(out)
        spec = InputSpec(audio_rate=RATE, audio_seconds=NB_SAMP / RATE,
                         crop=f"first {NB_SAMP} samples, tile-repeated when shorter",
                         pooling="input of the final 2-way classifier (class token)")
        return Embedding(self._features(), spec,
                         p_spoof(logits[0].float().cpu().numpy(), self.id2label), "prob")
