"""CAV-MAE Sync (Araujo et al. 2025), frozen A-V encoder (image ``enc-cavmae-sync``, Python 3.9).

Upstream ``edsonroteia/cav-mae-sync`` at a pinned commit (``src/`` on ``PYTHONPATH``; its
package ``models`` is imported as ``cavmae_sync_models``: ``CAVMAESync``), torch 1.13.1,
timm 0.4.5. Checkpoint, inputs and features: :class:`CavMaeSyncEncoder`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.models.prep import check_audio, fuse_av, l2_normalise, resample, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import TINY_ARCH_FILE, url_file

__all__ = ["RELEASED", "CavMaeSyncEncoder", "segment"]

IMAGE, WEIGHTS, RATE = "enc-cavmae-sync", "cav_mae_sync.pth", 16000
ARCH_FILE = TINY_ARCH_FILE
"""Beside a tiny test checkpoint only (``madbench_arch.json``): its architecture arguments."""
"""Optional constructor overrides beside the checkpoint (tiny test checkpoints only; the
released checkpoint has none and uses :data:`RELEASED`)."""
RELEASED: dict[str, Any] = {"audio_length": 416, "modality_specific_depth": 11,
                            "num_register_tokens": 8, "cls_token": True, "total_frame": 16,
                            "contrastive_heads": False}
"""``retrieval.py``'s construction of the released ``model_3388_25`` checkpoint."""
SPEC_LEN, MEAN, STD = 1024, -5.081, 4.4849
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def segment(frame: int, frames: int, length: int, target: int) -> tuple[int, int]:
    """``map_frame_to_spectrogram``: the fbank rows paired with video frame ``frame``."""
    pos = round(frame * length / frames)
    start = max(0, pos - target // 2)
    end = start + target
    if end > length:
        end = length
        start = max(0, end - target)
    return start, end


def upstream_models() -> Any:
    """Upstream ``src/models`` imported under a unique name (``cavmae_sync_models``).

    Upstream names its package ``models``, which other code on the path (the test suite's
    ``tests/models``) shadows, so it is loaded from the ``PYTHONPATH`` entry that holds
    ``models/cav_mae_sync.py``.
    """
    import importlib.util
    import sys
    from pathlib import Path

    name = "cavmae_sync_models"
    if name in sys.modules:
        return sys.modules[name]
    for entry in sys.path:
        pkg = Path(entry or ".") / "models"
        if (pkg / "cav_mae_sync.py").is_file():
            spec = importlib.util.spec_from_file_location(
                name, pkg / "__init__.py", submodule_search_locations=[str(pkg)])
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            return module
    raise ConfigError("CAV-MAE Sync code not found: image enc-cavmae-sync puts the pinned "
                      "edsonroteia/cav-mae-sync src/ on PYTHONPATH")


class CavMaeSyncEncoder:
    """CAV-MAE Sync CLS features over 16 synchronised frame/audio pairs (modes A, AV).

    The released checkpoint (``pretrained_models/get_pretrained_model.sh`` →
    ``cav_mae_sync.pth``) is the one ``src/retrieval.py`` evaluates as ``model_3388_25`` /
    ``sync_pretrain_registers_cls_4s``: ``CAVMAESync(audio_length=416,
    modality_specific_depth=11, num_register_tokens=8, cls_token=True, total_frame=16,
    contrastive_heads=False)``, saved from ``DataParallel`` (``module.`` prefixes) and
    loaded as upstream does (``strict=False``, but a checkpoint that leaves any encoder
    weight unset is refused). Inputs as the retrieval dataloader (``dataloader_sync.py``,
    mode ``retrieval``): :meth:`audio_input`, :meth:`video_input`. Upstream's recipe
    assumes 10 s clips: for shorter or longer clips the audio segments (fixed 0.64 s steps
    over 10.24 s) and the frames (spread over the clip) drift apart; the recipe is kept as
    published. Features: the 16 frames' CLS tokens (``forward_feat`` → ``cls_a``,
    ``cls_v``, as retrieval uses them), each L2-normalised, averaged over frames. ``A`` =
    the audio mean (768-d; the audio stream never sees the video); ``AV`` =
    ``[a; v; a ⊙ v]`` (2,304-d, :func:`~madbench_common.models.prep.fuse_av`).
    """

    slug, version = "enc-cavmae-sync", "1"
    reference = False
    modes: tuple[str, ...] = ("A", "AV")

    def __init__(self, arch: dict[str, Any] | None = None) -> None:
        import json

        import torch

        path = url_file(WEIGHTS, image=IMAGE)
        sidecar = path.with_name(ARCH_FILE)
        overrides = arch or (json.loads(sidecar.read_text()) if sidecar.exists() else {})
        self.arch = {**RELEASED, **overrides}
        self.model: Any = upstream_models().CAVMAESync(**self.arch)
        state = torch.load(path, map_location="cpu")
        state = {k[len("module."):] if k.startswith("module.") else k: v
                 for k, v in state.items()}
        missing = [k for k in self.model.state_dict()
                   if k not in state and not k.startswith("decoder")]
        if missing:
            raise ConfigError(f"{path}: not the released CAV-MAE Sync checkpoint for "
                              f"{self.arch} ({len(missing)} encoder weights missing, e.g. "
                              f"{missing[0]})")
        self.model.load_state_dict(state, strict=False)
        self.device = torch_device()
        self.model.eval().to(self.device)
        self._torch = torch

    @property
    def n_frames(self) -> int:
        return int(self.arch["total_frame"])

    def audio_input(self, audio: Audio | None, sample_rate: Hertz) -> tuple[Any, float]:
        """(16, 416, 128) normalised fbank segments and the clip's seconds.

        Audio at 16 kHz, mean removed; kaldi fbank (128 mel, htk, hanning, 10 ms shift, no
        dither), zero-padded or cut to 1,024 frames (10.24 s); for frame ``i`` of 16, the
        416-frame (4.16 s) segment centred at ``round(i · 1024 / 16)`` (:func:`segment`),
        normalised with mean −5.081 and std 4.4849."""
        import torchaudio

        x = resample(check_audio(audio, self.slug), sample_rate, RATE)
        if x.size < 400:
            raise ValueError(f"{self.slug}: audio shorter than one 25 ms frame")
        wav = self._torch.from_numpy(x - x.mean())[None]
        fbank = torchaudio.compliance.kaldi.fbank(
            wav, htk_compat=True, sample_frequency=RATE, use_energy=False,
            window_type="hanning", num_mel_bins=128, dither=0.0, frame_shift=10)
        pad = SPEC_LEN - fbank.shape[0]
        fbank = self._torch.nn.functional.pad(fbank, (0, 0, 0, pad)) if pad > 0 \
            else fbank[:SPEC_LEN]
        target = int(self.arch["audio_length"])
        segs = [fbank[slice(*segment(i, self.n_frames, SPEC_LEN, target))]
                for i in range(self.n_frames)]
        return (self._torch.stack(segs) - MEAN) / STD, x.size / RATE

    def video_input(self, frames: Frames | None, fps: float, seconds: float) -> Any:
        """(16, 3, 224, 224): frames at ``i · duration / 16``, resized, centre-cropped.

        16 frames evenly spaced over the clip (the nearest frame the stage decoded), short
        side resized to 224 (bicubic), centre crop 224, ImageNet mean/std."""
        if frames is None or len(frames) == 0 or fps <= 0:
            raise ValueError(f"{self.slug}: this input mode needs video frames and their fps")
        duration = max(seconds, len(frames) / fps)
        times = np.arange(len(frames)) / fps
        picks = [int(np.argmin(np.abs(times - i * duration / self.n_frames)))
                 for i in range(self.n_frames)]
        f = self._torch.from_numpy(np.asarray(frames)[picks].astype(np.float32) / 255.0)
        f = f.permute(0, 3, 1, 2)
        h, w = f.shape[2:]
        scale = 224 / min(h, w)
        size = (224, round(w * scale)) if h <= w else (round(h * scale), 224)
        f = self._torch.nn.functional.interpolate(f, size=size, mode="bicubic",
                                                  align_corners=False).clamp(0, 1)
        y, x = (f.shape[2] - 224) // 2, (f.shape[3] - 224) // 2
        f = f[:, :, y:y + 224, x:x + 224]
        mean = self._torch.tensor(IMAGENET_MEAN)[:, None, None]
        std = self._torch.tensor(IMAGENET_STD)[:, None, None]
        return (f - mean) / std

    def _cls(self, a: Any, v: Any) -> tuple[np.ndarray, np.ndarray]:
        with self._torch.no_grad():
            out = self.model.forward_feat(a.to(self.device), v.to(self.device))
        cls_a, cls_v = out[2], out[3]
        norm = self._torch.nn.functional.normalize
        return (norm(cls_a.reshape(self.n_frames, -1), dim=-1).mean(0).cpu().numpy(),
                norm(cls_v.reshape(self.n_frames, -1), dim=-1).mean(0).cpu().numpy())

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode not in self.modes:
            raise ValueError(f"{self.slug}: mode {mode!r} not in {self.modes}")
        a, seconds = self.audio_input(audio, sample_rate)
        spec: dict[str, Any] = {
            "audio_rate": RATE, "audio_seconds": seconds,
            "crop": f"{self.n_frames} fbank segments of {self.arch['audio_length']} frames",
            "pooling": f"mean of L2-normalised CLS tokens over {self.n_frames} frames"}
        if mode == "A":  # the audio stream is independent of the video: a blank frame set
            v = self._torch.zeros(self.n_frames, 3, 224, 224)
            return Embedding(l2_normalise(self._cls(a, v)[0]), InputSpec(**spec))
        v = self.video_input(frames, fps, seconds)
        spec |= {"video_frames": self.n_frames, "video_fps": fps, "video_size": 224,
                 "crop": spec["crop"] + "; frames: short side 224 (bicubic), centre crop 224"}
        ca, cv = self._cls(a, v)
        return Embedding(fuse_av(ca, cv), InputSpec(**spec))

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> np.ndarray:
        return self.embed(mode=mode, audio=audio, sample_rate=sample_rate, frames=frames,
                          fps=fps).vector

