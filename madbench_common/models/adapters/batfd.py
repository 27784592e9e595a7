"""BA-TFD+ (Cai et al. 2023) A-V temporal forgery localiser (image ``det-batfd``, Python 3.9).

Upstream ``ControlNet/LAV-DF`` (code CC BY-NC 4.0) at a pinned commit, on ``PYTHONPATH``:
``model.BatfdPlus``, a pytorch_lightning 1.7 ``LightningModule`` (MViTv2-B video encoder,
ViT-B audio encoder, frame classifiers, BSN++ boundary modules, cross-modal attention
fusion), loaded with ``BatfdPlus.load_from_checkpoint`` from the released
``batfd_plus_default.ckpt`` (its hyper-parameters travel in the checkpoint). Mode ``AV``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.models.av_prep import FPS, at_fps, face_track
from madbench_common.models.detector_base import EmbeddingDetector
from madbench_common.models.prep import check_audio, resample, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import url_file

__all__ = ["AUDIO_PAD", "FRAMES", "BatfdPlusDetector", "max_proposal", "upstream_class"]

IMAGE, WEIGHTS, RATE, SIZE = "det-batfd", "batfd_plus_default.ckpt", 16000, 96
FRAMES = 512
"""``num_frames`` (T) of ``config/batfd_plus_default.toml``: the padded clip length."""
AUDIO_PAD = int(FRAMES / FPS * RATE)


def upstream_class() -> Any:
    """``model.BatfdPlus`` from the LAV-DF repository root on ``PYTHONPATH``."""
    try:
        from model import BatfdPlus
    except ImportError as exc:
        raise ConfigError(f"LAV-DF code not found ({exc}): image det-batfd puts "
                          "ControlNet/LAV-DF on PYTHONPATH") from None
    return BatfdPlus


def max_proposal(bm_map: npt.ArrayLike, n_frames: int, start: npt.ArrayLike | None = None,
                 end: npt.ArrayLike | None = None) -> float:
    """The best proposal's confidence: ``bm_map[d, b]`` (× ``start[b]`` × ``end[b + d]``).

    The score of the first proposal after upstream's soft-NMS (``post_process.py`` keeps
    the best proposal's score). Proposals are ``inference.py`` ``gen_df_for_batfd_plus``'s:
    duration index ``d > 0`` and end ``b + d ≤ n_frames``; where the checkpoint has the
    complementary boundary generator, confidences are multiplied by the start and end
    probabilities as there.
    """
    bm = np.asarray(bm_map, dtype=np.float64)
    d, b = np.meshgrid(np.arange(bm.shape[0]), np.arange(bm.shape[1]), indexing="ij")
    valid = (d > 0) & (b + d <= n_frames)
    score = bm.copy()
    if start is not None and end is not None:
        valid &= b + d < bm.shape[1]
        e = np.asarray(end, dtype=np.float64)
        score = score * np.asarray(start, dtype=np.float64)[b] * e[np.minimum(b + d, e.size - 1)]
    if not valid.any():
        raise ValueError(f"no proposal fits in {n_frames} frames")
    return float(score[valid].max())


def _first(x: Any) -> Any:
    """The first batch item of a tensor as float64 numpy (``None`` stays ``None``)."""
    return None if x is None else x[0].double().cpu().numpy()


class BatfdPlusDetector(EmbeddingDetector):
    """BA-TFD+: maximum temporal-forgery proposal confidence and pooled features (mode AV).

    Inference is ``predict_step``'s: the forward pass, the BSN++ backward pass on
    time-reversed input, ``post_process_predict``; its steps are repeated here
    (:meth:`_predict`) so the encoders' outputs can be kept. Native score:
    :func:`max_proposal`, in [0, 1], stored as ``prob``. Frozen features (516-d): the mean
    over the clip's frames of the video and audio encoder features (256 + 256) and the
    mean and maximum of the video and audio frame classifiers' logits (4).
    """

    slug, version = "det-batfd", "1"
    reference = False
    modes: tuple[str, ...] = ("AV",)

    def __init__(self, cropper: str = "ref-haar-face") -> None:
        import torch
        import torchaudio

        from madbench_common.models.registry import load_model

        path = url_file(WEIGHTS, image=IMAGE)
        try:
            self.model: Any = upstream_class().load_from_checkpoint(str(path),
                                                                     map_location="cpu")
        except (RuntimeError, KeyError, TypeError) as exc:
            raise ConfigError(f"{path}: not a BA-TFD+ checkpoint ({str(exc).splitlines()[0]})"
                              ) from None
        if int(self.model.temporal_dim) != FRAMES:
            raise ConfigError(f"{path}: temporal_dim {self.model.temporal_dim} != {FRAMES}")
        self.device = torch_device()
        self.model.eval().to(self.device)
        self.mel = torchaudio.transforms.MelSpectrogram(n_fft=321, n_mels=64)
        self.cropper = load_model(cropper)
        self._torch = torch

    def inputs(self, audio: Audio | None, sample_rate: Hertz, frames: Frames | None,
               fps: float) -> tuple[Any, Any, int, str]:
        """(video 1×3×512×96×96, log mel 1×64×2048, frames in the clip, fallback).

        As the ``Lavdf`` dataset (``frame_padding=512``): video at 25 fps, every frame
        resized to 96 × 96 (values in [0, 1]), zero-padded (or cut) to 512 frames (20.48 s).
        LAV-DF clips are face-track crops of VoxCeleb2; here each frame is the
        :class:`~madbench_common.models.roles.FaceCropper`'s face crop (``region="face"``),
        or the whole frame resized where no face is found (what the data loader does with
        any video; recorded as the fallback). Audio at 16 kHz (first channel), zero-padded
        or cut to 327,680 samples, then ``log(MelSpectrogram(n_fft=321, n_mels=64) + 0.01)``
        → 64 × 2,048."""
        if frames is None or fps <= 0:
            raise ValueError(f"{self.slug}: needs video frames and their fps (mode AV)")
        wav = resample(check_audio(audio, self.slug), sample_rate, RATE)[:AUDIO_PAD]
        video = at_fps(frames, fps)[:FRAMES]
        track = face_track(self.cropper, video, FPS, size=SIZE, region="face")
        torch = self._torch
        v = torch.zeros(3, FRAMES, SIZE, SIZE)
        v[:, :len(video)] = torch.from_numpy(track.crops.astype(np.float32) / 255.0
                                             ).permute(3, 0, 1, 2)
        a = torch.from_numpy(np.pad(wav, (0, AUDIO_PAD - wav.size)))
        spec = torch.log(self.mel(a) + 0.01)
        if tuple(spec.shape) != (64, 2048):
            raise ValueError(f"{self.slug}: log mel {tuple(spec.shape)} != (64, 2048)")
        return v[None], spec[None], len(video), track.fallback

    def _predict(self, v: Any, a: Any) -> tuple[Any, Any, Any, Any]:
        """``predict_step`` (fusion map, start, end) plus the forward outputs."""
        m = self.model
        out = m(v, a)
        back = m.forward_back(self._torch.flip(v, dims=(2,)), self._torch.flip(a, dims=(2,)))
        bm, start, end = m.post_process_predict(out[0], out[1], out[2], out[3], out[4],
                                                back[0], back[1])
        return bm, start, end, out

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode != "AV":
            raise ValueError(f"{self.slug} scores audio with video (mode AV), got {mode!r}")
        v, a, n, fallback = self.inputs(audio, sample_rate, frames, fps)
        with self._torch.no_grad():
            bm, start, end, out = self._predict(v.to(self.device), a.to(self.device))
        score = max_proposal(_first(bm), n, _first(start), _first(end))
        v_cla, a_cla, v_feat, a_feat = (_first(out[i]) for i in (15, 16, 17, 18))
        vector = np.concatenate([
            v_feat[:, :n].mean(1), a_feat[:, :n].mean(1),
            [v_cla[0, :n].mean(), v_cla[0, :n].max(), a_cla[0, :n].mean(), a_cla[0, :n].max()],
        ]).astype(np.float32)
        spec = InputSpec(audio_rate=RATE, audio_seconds=AUDIO_PAD / RATE,
                         video_frames=n, video_fps=FPS, video_size=SIZE,
                         crop=f"face crop {SIZE}x{SIZE}, zero-padded to {FRAMES} frames; audio "
                              "64-band log mel (n_fft 321) over 327,680 samples",
                         pooling="mean over the clip's frames of video and audio encoder "
                                 "features (256+256); mean and max frame-classifier logits "
                                 "(video, audio)",
                         fallback=fallback)
        return Embedding(vector, spec, score, "prob")
