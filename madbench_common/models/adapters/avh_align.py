"""AVH-Align (Smeu et al. 2025) A-V deepfake detector over AV-HuBERT (image ``det-avh-align``).

Upstream, each at a pinned commit on ``PYTHONPATH`` (Python 3.9): ``bit-ml/AVH-Align``
(``model.FusionModel``, ``checkpoints/AVH-Align_AV1M.pt``; CC BY-NC-SA 4.0),
``facebookresearch/av_hubert`` (package ``avhubert``) and its fairseq submodule
(``facebookresearch/fairseq`` at ``afc77bd``, Python code only). AV-HuBERT Large
(``self_large_vox_433h.pt``) is loaded with fairseq's ``checkpoint_utils`` as in
AVH-Align's ``deepfake_feature_extraction.py`` (:func:`load_avhubert`).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import expit

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.models.av_prep import FPS, at_fps, face_track
from madbench_common.models.detector_base import EmbeddingDetector
from madbench_common.models.prep import check_audio, resample, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import url_file

__all__ = ["AVHUBERT", "FUSION", "AvhAlignDetector", "audio_features", "import_avhubert",
           "load_avhubert"]

IMAGE, RATE, ROI, STACK = "det-avh-align", 16000, 96, 4
AVHUBERT, FUSION = "self_large_vox_433h.pt", "AVH-Align_AV1M.pt"


def import_avhubert() -> Any:
    """fairseq and the ``avhubert`` package (registers its task and models with fairseq).

    As AVH-Align's ``deepfake_feature_extraction.py`` does, numpy's removed aliases
    ``np.float`` and ``np.int`` are restored before fairseq is imported (its 2021 code names
    them at import). ``avhubert`` picks absolute or package-relative imports by
    ``len(sys.argv) == 1`` (a debugging switch); it is always imported as the package here.
    """
    for name, value in (("float", np.float64), ("int", np.int_)):
        if name not in np.__dict__:  # deepfake_feature_extraction.py's own numpy fix
            setattr(np, name, value)
    argv = sys.argv
    sys.argv = [*argv, "--"] if len(argv) == 1 else argv  # the package imports, not DBG's
    try:
        import avhubert
        from fairseq import checkpoint_utils  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"AV-HuBERT code not found ({exc}): image det-avh-align puts "
                          "av_hubert and its fairseq on PYTHONPATH") from None
    finally:
        sys.argv = argv
    return avhubert


def _labels_or_none(load: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``load_dictionaries`` that yields ``None`` dictionaries when the label files are absent.

    A fine-tuned checkpoint rebuilds its pre-training task from the stored config, whose
    ``label_dir`` is a path on the authors' cluster (an av_hubert GitHub issue); ``AVHubertModel``
    has a branch for ``None`` dictionaries ("assume will be used for fine-tuning").
    """
    def wrapped(task: Any) -> Any:
        try:
            return load(task)
        except FileNotFoundError:
            if task.cfg.fine_tuning:
                raise
            return [None] * len(task.cfg.labels)

    return wrapped


def load_avhubert(path: str) -> tuple[Any, Any]:
    """``load_model`` of ``deepfake_feature_extraction.py``: (AV-HuBERT model, task)."""
    avhubert = import_avhubert()
    from fairseq import checkpoint_utils

    cls = avhubert.hubert_pretraining.AVHubertPretrainingTask
    original = cls.load_dictionaries
    cls.load_dictionaries = _labels_or_none(original)
    try:
        models, _, task = checkpoint_utils.load_model_ensemble_and_task([path])
    finally:
        cls.load_dictionaries = original
    model = models[0]
    if hasattr(model, "decoder"):  # fine-tuned seq2seq: its encoder's AV-HuBERT
        model = model.encoder.w2v_model
    return model, task


def audio_features(wav: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``load_audio`` of ``deepfake_feature_extraction.py`` (untrimmed): (T, 104) at 25 fps.

    16 kHz audio through ``python_speech_features.logfbank`` (26 bands, 25 ms / 10 ms), 4
    frames stacked to 104-d at 25 fps (zero-padded to a multiple of 4), layer-normalised
    per frame."""
    from python_speech_features import logfbank

    feats = logfbank(wav, samplerate=RATE).astype(np.float32)
    if len(feats) % STACK:
        feats = np.concatenate([feats, np.zeros((STACK - len(feats) % STACK, feats.shape[1]),
                                                dtype=np.float32)])
    import torch

    feats = torch.from_numpy(feats.reshape(-1, STACK * feats.shape[1]))
    return torch.nn.functional.layer_norm(feats, feats.shape[1:]).numpy()


def _fusion_class() -> Any:
    try:
        from model import FusionModel  # AVH-Align's repository root
    except ImportError as exc:
        raise ConfigError(f"AVH-Align code not found ({exc}): image det-avh-align puts "
                          "bit-ml/AVH-Align on PYTHONPATH") from None
    return FusionModel


class AvhAlignDetector(EmbeddingDetector):
    """AVH-Align: frame-level A-V alignment of AV-HuBERT features, logsumexp score (mode AV).

    Steps of upstream's ``deepfake_preprocess.py``, ``deepfake_feature_extraction.py`` and
    ``eval.py``: inputs (:meth:`inputs`); AV-HuBERT ``extract_finetune`` on audio alone and
    on video alone → per-frame 1,024-d features (the other modality zeroed), each
    L2-normalised per frame, through ``FusionModel`` → one logit per frame. Score:
    ``logsumexp(−output)`` over frames (``eval.py``), higher = more fake; unbounded, stored
    as ``sigmoid(raw)``. Frozen features (131-d): the mean over frames of ``FusionModel``'s
    last hidden layer (128-d, the input of its final linear layer), and the mean, maximum
    and standard deviation over frames of the per-frame output. Mode ``AV`` only.
    """

    slug, version = "det-avh-align", "1"
    reference = False
    modes: tuple[str, ...] = ("AV",)

    def __init__(self, cropper: str = "ref-haar-face") -> None:
        import torch

        from madbench_common.models.registry import load_model

        self.avhubert, task = load_avhubert(str(url_file(AVHUBERT, image=IMAGE)))
        import_avhubert()
        utils = importlib.import_module("avhubert.utils")  # the package's `utils` is fairseq's
        crop = int(task.cfg.image_crop_size)
        self.transform = utils.Compose([
            utils.Normalize(0.0, 255.0), utils.CenterCrop((crop, crop)),
            utils.Normalize(task.cfg.image_mean, task.cfg.image_std)])
        self.crop = crop
        self.fusion: Any = _fusion_class()()
        ckpt = torch.load(url_file(FUSION, image=IMAGE), map_location="cpu")
        try:
            self.fusion.load_state_dict(ckpt["state_dict"])
        except (KeyError, RuntimeError) as exc:
            raise ConfigError(f"{FUSION}: not the released AVH-Align checkpoint "
                              f"({str(exc).splitlines()[0]})") from None
        self.device = torch_device()
        self.avhubert.eval().to(self.device)
        self.fusion.eval().to(self.device)
        self._hidden = self._hook()
        self.cropper = load_model(cropper)
        self._torch = torch

    def _hook(self) -> Callable[[], Any]:
        seen: dict[str, Any] = {}
        self.fusion.mlp[-1].register_forward_hook(
            lambda _m, args, _o: seen.__setitem__("x", args[0]))
        return lambda: seen.pop("x")

    def inputs(self, audio: Audio | None, sample_rate: Hertz, frames: Frames | None,
               fps: float) -> tuple[Any, Any, str]:
        """(video 1×1×T×88×88, audio 1×104×T, fallback): both at 25 fps, same length.

        Video: upstream crops a 96 × 96 mouth patch around dlib's 68 landmarks after
        aligning to a mean face; here the :class:`~madbench_common.models.roles.FaceCropper`
        mouth crop at 96 × 96 (``region="mouth"``), or the whole frame resized where no face
        is found (upstream "passing whole video"; recorded fallback). Grey (``load_video``),
        then AV-HuBERT's transform: ÷ 255, centre crop 88 × 88, normalise with the task's
        image mean and std (0.421, 0.165). Audio: :func:`audio_features`. Video and audio
        are cut to the shorter of the two.
        """
        import cv2

        if frames is None or fps <= 0:
            raise ValueError(f"{self.slug}: needs video frames and their fps (mode AV)")
        wav = resample(check_audio(audio, self.slug), sample_rate, RATE)
        track = face_track(self.cropper, at_fps(frames, fps), FPS, size=ROI, region="mouth")
        grey = np.stack([cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in track.crops])
        video = self.transform(grey.astype(np.float32))
        aud = audio_features(wav)
        t = min(len(video), len(aud))
        if t < 1:
            raise ValueError(f"{self.slug}: no frame of audio and video to align")
        torch = self._torch
        v = torch.from_numpy(np.ascontiguousarray(video[:t], dtype=np.float32))[None, None]
        a = torch.from_numpy(aud[:t]).T.contiguous()[None]
        return v, a, track.fallback

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode != "AV":
            raise ValueError(f"{self.slug} scores audio with video (mode AV), got {mode!r}")
        v, a, fallback = self.inputs(audio, sample_rate, frames, fps)
        torch = self._torch
        with torch.no_grad():
            f_audio, _ = self.avhubert.extract_finetune(
                {"video": None, "audio": a.to(self.device)}, None, None)
            f_video, _ = self.avhubert.extract_finetune(
                {"video": v.to(self.device), "audio": None}, None, None)
            vis = f_video[0] / torch.linalg.norm(f_video[0], ord=2, dim=-1, keepdim=True)
            aud = f_audio[0] / torch.linalg.norm(f_audio[0], ord=2, dim=-1, keepdim=True)
            out = self.fusion(vis, aud)[:, 0]
            hidden = self._hidden()
            raw = float(torch.logsumexp(-out, dim=0))
        o = out.double().cpu().numpy()
        vector = np.concatenate([hidden.double().mean(0).cpu().numpy(),
                                 [o.mean(), o.max(), o.std()]]).astype(np.float32)
        t = int(v.shape[2])
        spec = InputSpec(audio_rate=RATE, audio_seconds=t / FPS, video_frames=t, video_fps=FPS,
                         video_size=self.crop,
                         crop=f"grey mouth crop {ROI}x{ROI}, centre {self.crop}x{self.crop}, "
                              "AV-HuBERT normalisation; audio 26-band log fbank x4 stacked",
                         pooling="mean over frames of FusionModel's 128-d last hidden layer; "
                                 "mean, max, std of the per-frame output",
                         fallback=fallback)
        return Embedding(vector, spec, float(expit(raw)), "sigmoid(raw)")
