"""ImageBind huge (Girdhar et al. 2023), frozen A-V encoder (image ``enc-imagebind``).

``imagebind`` is installed from ``facebookresearch/ImageBind`` at a pinned commit; the
model is ``ImageBindModel`` with ``imagebind_huge``'s arguments, loaded from
``imagebind_huge.pth`` through :func:`~madbench_common.models.weights.url_file`. Its
``data.py`` loaders read files with pytorchvideo/decord; this adapter applies the same
transforms to the arrays the feature stage decodes (:class:`ImageBindEncoder`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.prep import check_audio, fuse_av, l2_normalise, resample, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import TINY_ARCH_FILE, url_file

__all__ = ["ARCH_FILE", "HUGE", "ImageBindEncoder", "clip_starts"]

IMAGE, WEIGHTS, RATE = "enc-imagebind", "imagebind_huge.pth", 16000
ARCH_FILE = TINY_ARCH_FILE
"""Beside a tiny test checkpoint only (``madbench_arch.json``): its architecture arguments."""
HUGE: dict[str, Any] = {"vision_embed_dim": 1280, "vision_num_blocks": 32,
                        "vision_num_heads": 16, "text_embed_dim": 1024, "text_num_blocks": 24,
                        "text_num_heads": 16, "out_embed_dim": 1024, "audio_drop_path": 0.1,
                        "imu_drop_path": 0.7}
"""``imagebind_model.imagebind_huge``'s arguments at the pinned commit."""
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def clip_starts(duration: float, clip: float, count: int) -> list[float]:
    """pytorchvideo ``ConstantClipsPerVideoSampler`` starts: ``i · max(d − clip, 0) / n``."""
    step = max(duration - clip, 0.0) / count
    return [i * step for i in range(count)]


def spatial_crops(clip: npt.NDArray[np.float32], size: int) -> list[npt.NDArray[np.float32]]:
    """ImageBind's ``SpatialCrop(size, 3)`` of a (C, T, H, W) clip: start, centre, end."""
    h, w = clip.shape[2:]
    out = []
    for idx in range(3):
        y, x = int(np.ceil((h - size) / 2)), int(np.ceil((w - size) / 2))
        if h > w:
            y = 0 if idx == 0 else (h - size if idx == 2 else y)
        else:
            x = 0 if idx == 0 else (w - size if idx == 2 else x)
        out.append(clip[:, :, y:y + size, x:x + size])
    return out


def import_model_module() -> Any:
    """``imagebind.models.imagebind_model`` without running ``imagebind/__init__.py``.

    The package's ``__init__`` imports ``data.py``, which needs pytorchvideo (its git pin
    is not on PyPI; PyPI's 0.1.5 imports a torchvision module removed in 0.17) and
    decord. The model code needs neither, so the package is registered by its path.
    """
    import importlib
    import importlib.util
    import sys
    import types

    if "imagebind" not in sys.modules:
        spec = importlib.util.find_spec("imagebind")
        if spec is None or not spec.submodule_search_locations:
            from madbench_common.core.errors import ConfigError

            raise ConfigError("imagebind is not installed (image enc-imagebind installs "
                              "facebookresearch/ImageBind at its pinned commit)")
        pkg = types.ModuleType("imagebind")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["imagebind"] = pkg
    return importlib.import_module("imagebind.models.imagebind_model")


class ImageBindEncoder:
    """ImageBind audio (A) and vision (V) embeddings and their A-V fusion (AV).

    ImageBind has no joint A-V embedding. Fusion rule (the paper leaves it open):
    ``AV = [a; v; a ⊙ v]`` of the L2-normalised audio and vision embeddings (3,072-d;
    :func:`~madbench_common.models.prep.fuse_av`); ``A`` = the audio embedding (1,024-d).
    """

    slug, version = "enc-imagebind", "1"
    reference = False
    modes: tuple[str, ...] = ("A", "V", "AV")

    def __init__(self, arch: dict[str, Any] | None = None) -> None:
        import json

        import torch

        upstream = import_model_module()
        path = url_file(WEIGHTS, image=IMAGE)
        sidecar = path.with_name(ARCH_FILE)  # a tiny test checkpoint's architecture
        arch = arch or (json.loads(sidecar.read_text()) if sidecar.exists() else HUGE)
        self.model: Any = upstream.ImageBindModel(**arch)
        state = torch.load(path, map_location="cpu", weights_only=True)
        self.model.load_state_dict(state)
        self.device = torch_device()
        self.model.eval().to(self.device)
        self._torch, self._types = torch, upstream.ModalityType

    def _melspec(self, clip: npt.NDArray[np.float32]) -> Any:
        import torchaudio

        wav = self._torch.from_numpy(clip - clip.mean())[None]
        fbank = torchaudio.compliance.kaldi.fbank(
            wav, htk_compat=True, sample_frequency=RATE, use_energy=False,
            window_type="hanning", num_mel_bins=128, dither=0.0, frame_length=25,
            frame_shift=10).T
        pad = 204 - fbank.shape[1]
        fbank = self._torch.nn.functional.pad(fbank, (0, pad)) if pad > 0 else fbank[:, :204]
        return ((fbank - -4.268) / 9.138)[None]

    def audio_input(self, audio: Audio | None, sample_rate: Hertz) -> tuple[Any, float]:
        """(1, 3, 1, 128, 204) normalised fbank clips and the clip's seconds.

        As ``load_and_transform_audio_data``: 16 kHz; 3 clips of 2 s starting at
        ``i · max(d − 2, 0) / 3`` (:func:`clip_starts`); each clip mean-removed, 128-bin
        kaldi fbank (htk, hanning, 25/10 ms, no dither), cut or zero-padded to 204 frames,
        normalised with mean −4.268, std 9.138. The model averages the clips' embeddings."""
        x = resample(check_audio(audio, self.slug), sample_rate, RATE)
        if x.size < 400:  # one 25 ms fbank frame
            raise ValueError(f"{self.slug}: audio shorter than one 25 ms frame")
        seconds = x.size / RATE
        clips = [x[int(s * RATE):int((s + 2) * RATE)] for s in clip_starts(seconds, 2.0, 3)]
        return self._torch.stack([self._melspec(c) for c in clips])[None], seconds

    def video_input(self, frames: Frames | None, fps: float) -> Any:
        """(1, 15, 3, 2, 224, 224): 5 temporal clips × 3 spatial crops.

        As ``load_and_transform_video_data``: 5 clips of 2 s at the same starts; per clip
        the first and last decoded frame in ``[start, end)`` (``UniformTemporalSubsample(2)``
        over the stage's frames, decoded at its ``fps``: an approximation of the native
        frame rate), scaled to [0, 1], short side to 224 (bilinear), CLIP mean/std, then 3
        spatial crops (:func:`spatial_crops`) → 15 clips, averaged by the model."""
        if frames is None or len(frames) == 0 or fps <= 0:
            raise ValueError(f"{self.slug}: this input mode needs video frames and their fps")
        f = self._torch.from_numpy(np.asarray(frames, dtype=np.float32) / 255.0)
        f = f.permute(0, 3, 1, 2)  # T, C, H, W
        times = np.arange(len(frames)) / fps
        duration = len(frames) / fps
        clips = []
        for s in clip_starts(duration, 2.0, 5):
            idx = np.flatnonzero((times >= s) & (times < s + 2.0))
            idx = idx if idx.size else np.array([int(np.argmin(np.abs(times - s)))])
            pair = f[[int(idx[0]), int(idx[-1])]]
            h, w = pair.shape[2:]
            scale = 224 / min(h, w)
            size = (224, round(w * scale)) if h <= w else (round(h * scale), 224)
            pair = self._torch.nn.functional.interpolate(pair, size=size, mode="bilinear",
                                                         align_corners=False)
            mean = self._torch.tensor(CLIP_MEAN)[:, None, None]
            std = self._torch.tensor(CLIP_STD)[:, None, None]
            clip = ((pair - mean) / std).permute(1, 0, 2, 3).numpy()  # C, T, H, W
            clips += spatial_crops(clip, 224)
        return self._torch.from_numpy(np.stack(clips))[None]

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode not in self.modes:
            raise ValueError(f"{self.slug}: mode {mode!r} not in {self.modes}")
        inputs: dict[str, Any] = {}
        spec: dict[str, Any] = {"pooling": "model embedding, mean over clips (and crops)"}
        if mode in ("A", "AV"):
            inputs[self._types.AUDIO], seconds = self.audio_input(audio, sample_rate)
            spec |= {"audio_rate": RATE, "audio_seconds": seconds}
        if mode in ("V", "AV"):
            inputs[self._types.VISION] = self.video_input(frames, fps)
            spec |= {"video_frames": 10, "video_fps": fps, "video_size": 224,
                     "crop": "5 clips x 2 frames, short side 224, 3 spatial crops"}
        with self._torch.no_grad():
            out = self.model({k: v.to(self.device) for k, v in inputs.items()})
        get = {k: out[k][0].cpu().numpy() for k in out}
        if mode == "A":
            vec = l2_normalise(get[self._types.AUDIO])
        elif mode == "V":
            vec = l2_normalise(get[self._types.VISION])
        else:
            vec = fuse_av(get[self._types.AUDIO], get[self._types.VISION])
        return Embedding(vec.astype(np.float32), InputSpec(**spec))

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> np.ndarray:
        return self.embed(mode=mode, audio=audio, sample_rate=sample_rate, frames=frames,
                          fps=fps).vector
