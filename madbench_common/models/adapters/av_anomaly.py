"""AV Anomaly (Feng et al. 2023) A-V deepfake detector (image ``det-av-anomaly``, Python 3.9).

Upstream ``cfeng16/audio-visual-forensics`` (MIT) at a pinned commit, on ``PYTHONPATH``:
the A-V synchronisation model (``backbone.select_backbone("r18")`` video encoder,
``audio_process.AudioEncoder``, ``model.MP_AViT`` fusion; ``sync_model.pth``), the two
decoder-only autoregressive models (``transformer_component.transformer_decoder``;
``dist_regressive_model.pth``, ``avfeature_regressive_model.pth``) and the A-V feature PCA
(``pca.pkl``). :class:`AvAnomalyDetector` repeats ``detect.py``'s steps with them.
"""

from __future__ import annotations

import hashlib
import pickle
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.models.av_prep import FPS, at_fps, face_track, int16_scale
from madbench_common.models.detector_base import EmbeddingDetector
from madbench_common.models.prep import check_audio, resample, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import url_file

__all__ = ["FILES", "MAX_LEN", "SHIFTS", "VIDEO_WINDOWS_KEPT", "AvAnomalyDetector", "build_models",
           "pca_transform"]

IMAGE, RATE, SIZE = "det-av-anomaly", 16000, 224
FILES = {"sync": "sync_model.pth", "dist": "dist_regressive_model.pth",
         "avfeature": "avfeature_regressive_model.pth", "pca": "pca.pkl"}
HOP = int(RATE / FPS)
"""Audio samples per video frame (``aud_fact``)."""
SHIFTS, VID_LEN, MAX_LEN = 31, 5, 50
"""Audio offsets −15 … +15 frames, frames per window, windows scored (``--max-len``)."""
_TRANSFORMER = {"image_size": 14, "patch_size": 0, "num_classes": 1, "dim": 512, "depth": 3,
                "heads": 4, "mlp_dim": 512, "dim_head": 128, "dropout": 0.1,
                "emb_dropout": 0.1, "max_visual_len": 5, "max_audio_len": 4}
_DECODER = {"input_dim_old": 31, "input_dim": 256, "compress_factor": 1, "num_heads": 16,
            "dropout_prob": 0.1, "max_len": 49, "layers": 2}
"""``detect.py`` ``main()``'s constructors."""
VIDEO_WINDOWS_KEPT = 2 * MAX_LEN
"""Video-encoder outputs kept (two clips' windows; 512×5×14×14 floats, 2 MB each)."""


def _upstream() -> dict[str, Any]:
    try:
        import audio_process
        import load_audio
        import model
        import transformer_component
        from backbone.select_backbone import select_backbone
    except ImportError as exc:
        raise ConfigError(f"AV Anomaly code not found ({exc}): image det-av-anomaly puts "
                          "cfeng16/audio-visual-forensics on PYTHONPATH") from None
    return {"model": model, "audio": audio_process, "load_audio": load_audio,
            "decoder": transformer_component.transformer_decoder, "backbone": select_backbone}


def build_models() -> dict[str, Any]:
    """``detect.py``'s networks, randomly initialised: sync parts and the two AR models."""
    up = _upstream()
    return {"vis_enc": up["backbone"](network="r18")[0], "aud_enc": up["audio"].AudioEncoder(),
            "sync": up["model"].MP_AViT(**_TRANSFORMER),
            "avfeature": up["model"].MP_av_feature_AViT(**_TRANSFORMER),
            "dist": up["decoder"](**_DECODER), "avfeature_reg": up["decoder"](**_DECODER)}


def pca_transform(pca: Any, x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``pca.pkl``'s ``transform`` computed from its fitted arrays.

    The release is a scikit-learn 1.0.2 ``Pipeline`` (``StandardScaler`` → ``PCA``, 31
    components); newer scikit-learn cannot run that pickle's ``transform``
    (attributes added since), so each step's arithmetic is applied here as scikit-learn
    defines it: ``(x − mean_) / scale_``, then ``(x − mean_) · components_ᵀ`` (÷ √variance
    when whitened). A bare ``PCA`` or ``StandardScaler`` works too.
    """
    y = np.asarray(x, dtype=np.float64)
    for step in (s for _, s in pca.steps) if hasattr(pca, "steps") else (pca,):
        if hasattr(step, "components_"):
            y = (y - step.mean_) @ np.asarray(step.components_).T
            if getattr(step, "whiten", False):
                y = y / np.sqrt(step.explained_variance_)
        elif hasattr(step, "scale_"):
            if getattr(step, "with_mean", True) and step.mean_ is not None:
                y = y - step.mean_
            if getattr(step, "with_std", True) and step.scale_ is not None:
                y = y / step.scale_
        else:
            raise ConfigError(f"pca.pkl: unexpected step {type(step).__name__}")
    return y


def _mel_basis() -> Any:
    """``wav2filterbanks``'s own mel filter (librosa, 16 kHz, 512-point FFT, 80 bands)."""
    import librosa
    import torch

    return torch.from_numpy(librosa.filters.mel(sr=RATE, n_fft=512, n_mels=80, fmin=0,
                                                fmax=RATE // 2)).float()


class AvAnomalyDetector(EmbeddingDetector):
    """AV Anomaly: autoregressive anomaly score of A-V synchronisation (mode AV).

    Upstream's detection script ``detect.py`` (its ``test2``) cannot be imported (it parses
    ``sys.argv`` at import), so this class repeats its steps with the upstream modules
    (:meth:`inputs`, :meth:`_window`, :meth:`_anomaly`). Score (``--lam 0``, upstream's
    default): the delay sequence, zero-padded to 50 windows, through
    ``dist_regressive_model``; the mean over real windows of the summed KL divergence
    between the softmax of the next window's delay logits and the model's prediction.
    Higher means more anomalous (fake); it is unbounded, stored as ``sigmoid(raw)``.

    Frozen features (64-d, pooled over windows): the mean delay distribution (31), the
    mean L2-normalised PCA A-V feature (31), and the two autoregressive anomaly terms
    (delay KL, A-V feature MSE; their ``lam``-weighted sum is upstream's score). Mode
    ``AV`` only: the detector has no audio-only input.
    """

    slug, version = "det-av-anomaly", "1"
    reference = False
    modes: tuple[str, ...] = ("AV",)

    def __init__(self, cropper: str = "ref-haar-face", max_len: int = MAX_LEN) -> None:
        import torch

        from madbench_common.models.registry import load_model

        self.nets = build_models()
        sync = torch.load(url_file(FILES["sync"], image=IMAGE), map_location="cpu")
        for part in ("vis_enc", "aud_enc"):
            self._load(part, {k[len(part) + 1:]: v for k, v in sync.items()
                              if k.startswith(part + ".")})
        self._load("sync", {k[12:]: v for k, v in sync.items() if k.startswith("transformer.")})
        self._load("avfeature", {k[12:]: v for k, v in sync.items()
                                 if k.startswith("transformer.")})
        for part, name in (("dist", "dist"), ("avfeature_reg", "avfeature")):
            self._load(part, torch.load(url_file(FILES[name], image=IMAGE), map_location="cpu"))
        with url_file(FILES["pca"], image=IMAGE).open("rb") as f:
            self.pca = pickle.load(f)  # upstream's fitted PCA, from the weights volume
        self.device = torch_device()
        for net in self.nets.values():
            net.eval().to(self.device)
        self.mel = _mel_basis().to(self.device)
        self.wav2filterbanks = _upstream()["load_audio"].wav2filterbanks
        self.cropper, self.max_len = load_model(cropper), int(max_len)
        self._torch = torch
        self._video: OrderedDict[bytes, Any] = OrderedDict()
        self._video_lock = threading.Lock()

    def _load(self, part: str, state: dict[str, Any]) -> None:
        try:
            self.nets[part].load_state_dict(state)
        except RuntimeError as exc:
            raise ConfigError(f"AV Anomaly {part}: not the released checkpoint "
                              f"({str(exc).splitlines()[0]})") from None

    def inputs(self, audio: Audio | None, sample_rate: Hertz, frames: Frames | None,
               fps: float) -> tuple[Any, Any, str, int]:
        """(video 3×T×224×224 at 25 fps, padded int16-scale audio, fallback, windows).

        Video at 25 fps (``detect.py`` reads the file as is, expecting 25 fps), every frame
        resized to 224 × 224 (bicubic), values 0–255 unnormalised, as ``FakeAVceleb`` with
        ``resize=224``. Upstream was trained and tested on face-track videos; here the frame
        is the :class:`~madbench_common.models.roles.FaceCropper`'s face crop, and the whole
        frame where no face is found (recorded fallback). Audio at 16 kHz in int16 sample
        values (upstream reads a ``pcm_s16le`` WAV with ``scipy.io.wavfile``), truncated to
        whole video frames (640 samples each), then padded with 15 frames of zeros on each
        side. Windows: the first ``min(T − 4, 50)`` (``--max-len 50``).
        """
        if frames is None or fps <= 0:
            raise ValueError(f"{self.slug}: needs video frames and their fps (mode AV)")
        wav = int16_scale(resample(check_audio(audio, self.slug), sample_rate, RATE))
        video = at_fps(frames, fps)
        track = face_track(self.cropper, video, FPS, size=SIZE, region="face")
        t = min(len(video), wav.size // HOP)
        windows = min(t - VID_LEN + 1, self.max_len)
        if windows < 2:
            raise ValueError(f"{self.slug}: {t} frames at 25 fps; at least {VID_LEN + 1} needed")
        torch = self._torch
        v = torch.from_numpy(track.crops[:t].astype(np.float32)).permute(3, 0, 1, 2)
        a = torch.from_numpy(np.pad(wav[:t * HOP], 15 * HOP))
        return v, a, track.fallback, windows

    def _window(self, v: Any, a: Any, k: int) -> tuple[npt.NDArray[np.float64], Any]:
        """31 delay logits and the 1,024-d zero-offset A-V feature of window ``k``.

        5 video frames ``k … k+4`` against the 31 audio offsets −15 … +15 frames: each
        3,200-sample chunk through ``load_audio.wav2filterbanks`` (80-band log mel, 20 ms
        window, 10 ms hop) and the ``AudioEncoder``; ``MP_AViT`` scores each offset (31
        logits), and ``MP_av_feature_AViT`` at offset 0 gives the A-V feature (reduced to 31
        by the PCA afterwards). The video encoder runs once per window (upstream runs it 31
        times on the same frames): :meth:`_encode_video`.
        """
        torch, n = self._torch, self.nets
        seg = a[k * HOP:(k + VID_LEN + 30) * HOP]
        chunks = torch.stack([seg[i * HOP:(i + VID_LEN) * HOP] for i in range(SHIFTS)])
        fb = self.wav2filterbanks(chunks.to(self.device), mel_basis=self.mel,
                                  device=self.device)[0]
        aud = n["aud_enc"](fb.permute(0, 2, 1)[:, None])
        vid = self._encode_video(v[None, :, k:k + VID_LEN]).repeat(SHIFTS, 1, 1, 1, 1)
        logits = n["sync"](vid.clone(), aud.clone()).reshape(SHIFTS)
        feature = n["avfeature"](vid.clone(), aud.clone())[15]
        return logits.double().cpu().numpy(), feature.double().cpu().numpy()

    def _encode_video(self, clip: Any) -> Any:
        """``vis_enc`` of one window (1×3×5×224×224), from the last windows' outputs when
        the same frames were encoded before (keyed by a digest of the frames).

        A clip's R, S, E and Q samples and all their perturbed copies carry the same video
        stream (``perturb`` copies the video packets) and a shard takes them in a row, so
        each window's r18 pass (about 80 % of a CPU shard, py-spy) runs once per clip, not
        once per sample. The same input gives the same output, so results do not change.
        """
        key = (hashlib.blake2b(clip.numpy().tobytes(), digest_size=20).digest()
               + repr((tuple(clip.shape), str(clip.dtype))).encode())
        with self._video_lock:
            hit = self._video.get(key)
            if hit is not None:
                self._video.move_to_end(key)
                return hit
        out = self.nets["vis_enc"](clip.to(self.device))
        with self._video_lock:
            self._video[key] = out
            while len(self._video) > VIDEO_WINDOWS_KEPT:
                self._video.popitem(last=False)
        return out

    def _anomaly(self, seq: npt.NDArray[np.float64], model: str, kl: bool) -> float:
        """``test2``'s AR term: KL of softmaxed delays, or MSE of normalised A-V features."""
        torch, f = self._torch, self._torch.nn.functional
        n = len(seq)
        x = torch.from_numpy(np.pad(seq, ((0, MAX_LEN - n), (0, 0))))[None].float()
        mask = torch.zeros(1, MAX_LEN)
        mask[0, n:] = 1.0
        x, mask = x.to(self.device), mask.to(self.device)
        inp, target = x[:, :-1], x[:, 1:]
        if not kl:
            inp, target = f.normalize(inp, p=2.0, dim=2), f.normalize(target, p=2.0, dim=2)
        out = self.nets[model](inp, mask[:, :-1])
        if kl:
            term = f.kl_div(f.log_softmax(out, dim=2), f.softmax(target, dim=2),
                            reduction="none")
        else:
            term = f.mse_loss(out, target, reduction="none")
        return float(term[0, :n - 1].sum(dim=1).mean())

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode != "AV":
            raise ValueError(f"{self.slug} scores audio with video (mode AV), got {mode!r}")
        v, a, fallback, windows = self.inputs(audio, sample_rate, frames, fps)
        with self._torch.no_grad():
            out = [self._window(v, a, k) for k in range(windows)]
            delays = np.stack([o[0] for o in out])
            feats = pca_transform(self.pca, np.stack([o[1] for o in out]))
            kl = self._anomaly(delays, "dist", kl=True)
            mse = self._anomaly(feats, "avfeature_reg", kl=False)
        e = np.exp(delays - delays.max(axis=1, keepdims=True))
        unit = feats / np.maximum(np.linalg.norm(feats, axis=1, keepdims=True), 1e-12)
        vector = np.concatenate([(e / e.sum(axis=1, keepdims=True)).mean(0), unit.mean(0),
                                 [kl, mse]]).astype(np.float32)
        spec = InputSpec(audio_rate=RATE, audio_seconds=(windows + VID_LEN - 1 + 30) / FPS,
                         video_frames=windows + VID_LEN - 1, video_fps=FPS, video_size=SIZE,
                         crop=f"face crop resized to {SIZE}x{SIZE} (bicubic, 0-255); audio int16 "
                              f"scale, {windows} windows of 5 frames x 31 offsets (+-15 frames)",
                         pooling="mean over windows: delay distribution (31), PCA A-V "
                                 "feature (31); AR delay KL and A-V feature MSE (2)",
                         fallback=fallback)
        return Embedding(vector, spec, float(expit(kl)), "sigmoid(raw)")

