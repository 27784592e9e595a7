"""PE-AV Base, WavLM and XLS-R through transformers 5 (image ``enc-tf5``): frozen encoders, §4.2.

PE-AV Base (``enc-tf5-pe-av-base``, Vyas et al. 2025; ``facebook/pe-av-base``,
``PeAudioVideoModel``), WavLM (``enc-tf5-wavlm``, Chen et al. 2022) and XLS-R 300M
(``enc-tf5-xlsr``, Babu et al. 2022; ``facebook/wav2vec2-xls-r-300m``; not a model of the
paper, added by following ``models/catalog/README.md``). Each class gives its recipe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.batching import equal_length_groups, map_groups
from madbench_common.models.prep import check_audio, fuse_av, l2_normalise, resample, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import hf_path

__all__ = ["PeAvEncoder", "WavLMEncoder", "XlsrEncoder"]

IMAGE = "enc-tf5"


class PeAvEncoder:
    """PE-AV Base audio, video and audio-video embeddings (modes A, V, AV).

    Audio is resampled to the feature extractor's rate (48 kHz) and reflect-padded to its
    hop (1,920) by ``PeAudioFeatureExtractor``; frames (decoded by the stage at its ``fps``,
    all of them up to ``max_frames``: the Base checkpoint takes variable-length video) go
    through ``PeVideoVideoProcessor`` (resize to the checkpoint's size, no crop, its
    mean/std). Embeddings are the model's pooled contrastive embeddings: ``A`` = the audio
    embedding; ``V`` = the video embedding; ``AV`` = ``[a; v; a⊙v; j]`` from one
    ``get_audio_video_embeds`` pass, where ``a``, ``v`` and the joint audio-video embedding
    ``j`` are L2-normalised (the shared fusion rule of
    :func:`~madbench_common.models.prep.fuse_av` plus PE-AV's native joint embedding).
    """

    slug, version = "enc-tf5-pe-av-base", "1"
    reference = False
    modes: tuple[str, ...] = ("A", "V", "AV")
    repo = "facebook/pe-av-base"

    def __init__(self, revision: str | None = None) -> None:
        import torch
        from transformers import AutoProcessor, PeAudioVideoModel

        path = hf_path(self.repo, image=IMAGE, revision=revision)
        self.processor: Any = AutoProcessor.from_pretrained(path)
        self.device = torch_device()
        self.model: Any = PeAudioVideoModel.from_pretrained(path).eval().to(self.device)
        self._torch = torch

    @property
    def audio_rate(self) -> int:
        return int(self.processor.feature_extractor.sampling_rate)

    def _audio(self, audio: Audio | None, sample_rate: Hertz) -> tuple[dict[str, Any], float]:
        x = resample(check_audio(audio, self.slug), sample_rate, self.audio_rate)
        inputs = self.processor.feature_extractor(x, sampling_rate=self.audio_rate,
                                                  return_tensors="pt")
        return ({"input_values": inputs["input_values"].to(self.device),
                 "padding_mask": inputs["padding_mask"].to(self.device)},
                inputs["input_values"].shape[-1] / self.audio_rate)

    def _video(self, frames: Frames | None) -> tuple[Any, int]:
        if frames is None or len(frames) == 0:
            raise ValueError(f"{self.slug}: this input mode needs video frames")
        vp = self.processor.video_processor
        resize = {"do_resize": True} if getattr(vp, "size", None) else {}
        out = vp(videos=[np.asarray(frames)], return_tensors="pt", **resize)
        pixels = out["pixel_values_videos"].to(self.device)
        return pixels, int(pixels.shape[-1])

    def _video_embeds(self, pixels: Any) -> Any:
        # transformers 5.24.0's PeAudioVideoModel.get_video_embeds calls a method that
        # PeVideoModel lacks (get_video_features is defined inside __init__); this computes
        # it as its own forward does (video_head over the video encoder's pooler output).
        # tests/known_issues tracks it.
        video = self.model.video_model
        return video.video_head(video.video_encoder(pixel_values_videos=pixels).pooler_output)

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode not in self.modes:
            raise ValueError(f"{self.slug}: mode {mode!r} not in {self.modes}")
        spec: dict[str, Any] = {"pooling": "model-pooled contrastive embedding (head over "
                                           "the encoder's pooler output)"}
        with self._torch.no_grad():
            if mode in ("A", "AV"):
                a_in, seconds = self._audio(audio, sample_rate)
                spec |= {"audio_rate": self.audio_rate, "audio_seconds": seconds}
            if mode in ("V", "AV"):
                pixels, side = self._video(frames)
                spec |= {"video_frames": int(pixels.shape[1]), "video_fps": fps,
                         "video_size": side, "crop": f"resize to {side}x{side} (no crop)"}
            if mode == "A":
                vec = l2_normalise(self.model.get_audio_embeds(**a_in)[0].cpu().numpy())
            elif mode == "V":
                vec = l2_normalise(self._video_embeds(pixels)[0].cpu().numpy())
            else:
                out = self.model.get_audio_video_embeds(
                    pixel_values_videos=pixels, return_audio_embeds=True,
                    return_video_embeds=True, **a_in)
                joint = l2_normalise(out.audio_video_embeds[0].cpu().numpy())
                vec = np.concatenate([fuse_av(out.audio_embeds[0].cpu().numpy(),
                                              out.video_embeds[0].cpu().numpy()), joint])
        return Embedding(vec.astype(np.float32), InputSpec(**spec))

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> np.ndarray:
        return self.embed(mode=mode, audio=audio, sample_rate=sample_rate, frames=frames,
                          fps=fps).vector


class _SpeechSSLEncoder:
    """A frozen speech SSL model through transformers, mean-pooled (mode A): the checkpoint's
    feature extractor at its rate, the mean over time of the last hidden state."""

    slug, version = "", "1"
    reference = False
    modes: tuple[str, ...] = ("A",)
    repo = ""
    model_class = ""
    """The transformers class that loads :attr:`repo` (``WavLMModel``, ``Wav2Vec2Model``)."""

    def __init__(self, revision: str | None = None) -> None:
        import torch
        import transformers
        from transformers import AutoFeatureExtractor

        path = hf_path(self.repo, image=IMAGE, revision=revision)
        self.extractor: Any = AutoFeatureExtractor.from_pretrained(path)
        self.device = torch_device()
        model = getattr(transformers, self.model_class)
        self.model: Any = model.from_pretrained(path).eval().to(self.device)
        self._torch = torch

    @property
    def pads(self) -> bool:
        """Whether a batch may pad its inputs to the longest with an attention mask: a
        layer-norm conv feature encoder (XLS-R, WavLM Large) normalises each frame alone
        and the encoder zeroes and masks the padded frames; a group norm over time (WavLM
        Base+, wav2vec 2.0 Base) would see the padding, so such a model batches only
        inputs of one length."""
        return getattr(self.model.config, "feat_extract_norm", "") == "layer"

    def _input_values(self, mode: str, audio: Audio | None, sample_rate: Hertz) -> Any:
        """The extractor's ``input_values`` (1 x samples) of one input, normalised alone."""
        if mode != "A":
            raise ValueError(f"{self.slug} encodes audio only (mode A), got {mode!r}")
        rate = int(self.extractor.sampling_rate)
        x = resample(check_audio(audio, self.slug), sample_rate, rate)
        return self.extractor(x, sampling_rate=rate, return_tensors="pt")["input_values"]

    def _pooled(self, hidden: Any, samples: int) -> Embedding:
        """The mean over time of one input's ``hidden`` (frames x width, its own frames)."""
        rate = int(self.extractor.sampling_rate)
        vec = hidden.mean(dim=0).cpu().numpy().astype(np.float32)
        spec = InputSpec(audio_rate=rate, audio_seconds=samples / rate,
                         pooling=f"mean over {hidden.shape[0]} frames of the last hidden state")
        return Embedding(vec, spec)

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        values = self._input_values(mode, audio, sample_rate)
        with self._torch.no_grad():
            hidden = self.model(values.to(self.device)).last_hidden_state
        return self._pooled(hidden[0], int(values.shape[-1]))

    def embed_batch(self, inputs: Sequence[Mapping[str, Any]]) -> list[Embedding]:
        """:meth:`embed` of each input, several per forward: padded to the longest with an
        attention mask and pooled over each input's own frames (:attr:`pads`), else in
        groups of equal length; equal to :meth:`embed` within
        :data:`~madbench_common.models.batching.EQUIVALENCE_ATOL`."""
        values = [self._input_values(str(kw["mode"]), kw.get("audio"),
                                     kw.get("sample_rate", 16000)) for kw in inputs]
        lengths = [int(v.shape[-1]) for v in values]
        groups = [list(range(len(values)))] if self.pads else equal_length_groups(lengths)
        return map_groups(groups, lambda group: self._forward([values[i] for i in group]),
                          len(values))

    def _forward(self, values: Sequence[Any]) -> list[Embedding]:
        torch = self._torch
        lengths = [int(v.shape[-1]) for v in values]
        batch = torch.zeros(len(values), max(lengths), dtype=values[0].dtype)
        mask = torch.zeros(len(values), max(lengths), dtype=torch.long)
        for i, (v, n) in enumerate(zip(values, lengths)):
            batch[i, :n], mask[i, :n] = v[0], 1
        kwargs = {"attention_mask": mask.to(self.device)} if min(lengths) < max(lengths) else {}
        frames = self.model._get_feat_extract_output_lengths(torch.tensor(lengths)).tolist()
        with torch.no_grad():
            hidden = self.model(batch.to(self.device), **kwargs).last_hidden_state
        return [self._pooled(hidden[i, :int(t)], n) for i, (t, n) in enumerate(zip(frames,
                                                                                  lengths))]

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> np.ndarray:
        return self.embed(mode=mode, audio=audio, sample_rate=sample_rate).vector


class WavLMEncoder(_SpeechSSLEncoder):
    """WavLM Base+ mean-pooled last hidden state (mode A).

    The paper does not name the size; ``microsoft/wavlm-base-plus`` (95 M parameters, a
    Base model like the others here). 16 kHz input through the checkpoint's
    ``Wav2Vec2FeatureExtractor``; the feature is the mean over time of the last hidden
    state (768-d). The paper fixes neither choice.
    """

    slug = "enc-tf5-wavlm"
    repo = "microsoft/wavlm-base-plus"
    model_class = "WavLMModel"


class XlsrEncoder(_SpeechSSLEncoder):
    """wav2vec 2.0 XLS-R 300M mean-pooled last hidden state (mode A); not a paper model.

    Its card says ``in_paper: false`` and reports mark its rows. It is the self-supervised
    front end of most recent audio anti-spoofing detectors (XLSR-Mamba's and DF-Arena's
    among them), so a logistic-regression head on its frozen features separates what the
    front end already hears from what those detectors' trained heads add. The same recipe
    as WavLM: 16 kHz, mean of the last hidden state (1,024-d).
    """

    slug = "enc-tf5-xlsr"
    repo = "facebook/wav2vec2-xls-r-300m"
    model_class = "Wav2Vec2Model"
