"""Vevo-Timbre (Zhang et al. 2025) as the paper's second voice-conversion generator (§3.3).

Upstream: Amphion (open-mmlab/Amphion, code MIT) at the commit pinned in
``images/vc-vevo/image.yaml``; Amphion is not a package, its root is on ``PYTHONPATH``.
Vevo-Timbre is ``VevoInferencePipeline.inference_fm`` (``models/vc/vevo/vevo_utils.py``):
HuBERT-large layer-18 features of source and timbre reference → content-style tokens
(``vq8192``) → flow-matching transformer conditioned on the reference's mel → Vocos at
24 kHz. The source's token sequence is not duration-reduced, so the output keeps the
source's timing (50 tokens/s ↔ 50 mel frames/s): that is the duration control; any
residual is a recorded WSOLA stretch.

Weights come from the weights root only (``images/vc-vevo/weights.yaml``): ``amphion/Vevo``
(``tokenizer/vq8192``, ``acoustic_modeling/Vq8192ToMels``, ``acoustic_modeling/Vocoder``)
and torchaudio's ``HUBERT_LARGE`` checkpoint, which upstream downloads from PyTorch's
server at run time. Here it is a URL item of the weights spec: the adapter replaces
upstream's ``build_hubert_model`` with the same ``bundle.get_model()`` call pointed at the
weights-root file (``dl_kwargs`` model_dir/file_name), so nothing is downloaded. The
configs (``Vq8192ToMels.json``, ``Vocoder.json``, HuBERT statistics) are Amphion's own,
read from its source tree (the pipeline is built with Amphion's root as working
directory, since the config names the statistics file relative to it).

Sampler: 32 flow-matching steps (upstream ``infer_vevotimbre.py``); the paper states none.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import soundfile as sf

from madbench_common.audio import resample
from madbench_common.speech_prep import (
    GenerationFailed,
    GenerationReport,
    ReportingGenerator,
    fit_speech,
    guard_oom,
    prepare_reference,
    seed_all,
)
from madbench_common.types import Audio, Hertz, Seconds
from madbench_common.weights import WeightsMissing, hf_path, url_file, weights_root

__all__ = ["VevoTimbre", "amphion_root", "routed_hubert"]

IMAGE = "vc-vevo"
REPO = "amphion/Vevo"
_SR = 24000
_MIN_SECONDS = 0.5
_PARTS = {"tokenizer": "tokenizer/vq8192", "fmt": "acoustic_modeling/Vq8192ToMels",
          "vocoder": "acoustic_modeling/Vocoder"}


def amphion_root() -> Path:
    """The Amphion source tree the image put on ``PYTHONPATH``."""
    import models.vc.vevo.vevo_utils as vu

    return Path(vu.__file__).resolve().parents[3]


def routed_hubert(device: Any) -> Any:
    """Upstream's ``build_hubert_model`` with the checkpoint read from the weights root."""
    import torchaudio

    bundle = torchaudio.pipelines.HUBERT_LARGE
    path = url_file(bundle._path, image=IMAGE)
    hubert = bundle.get_model(dl_kwargs={"model_dir": str(path.parent), "file_name": path.name,
                                         "progress": False})
    return hubert.eval().to(device)


@contextmanager
def _working_dir(path: Path) -> Iterator[None]:
    """``contextlib.chdir`` (Python 3.11+) for the Python 3.9 images' sake."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _hubert_file() -> str:
    import torchaudio

    return str(torchaudio.pipelines.HUBERT_LARGE._path)


def _snapshot_parts() -> dict[str, Path]:
    snap = hf_path(REPO, image=IMAGE)
    parts = {k: snap / v for k, v in _PARTS.items()}
    for name, path in parts.items():
        if not (path / "model.safetensors").exists():
            raise WeightsMissing(f"{REPO}/{_PARTS[name]}/model.safetensors", IMAGE,
                                 weights_root())
    return parts


class VevoTimbre(ReportingGenerator):
    """Vevo-Timbre behind the :class:`~madbench_common.roles.SpeechGenerator` role (``vc``)."""

    slug = "vc-vevo"
    branch = "vc"
    version = "amphion@d3de90f/Vevo-vq8192-Vq8192ToMels-Vocoder"
    reference = False

    def __init__(self, *, device: str | None = None, flow_matching_steps: int = 32,
                 configs: Mapping[str, Path] | None = None) -> None:
        """Build the pipeline from the weights root (``configs`` overrides Amphion's
        ``fmt``/``vocoder`` config files; tests use it for tiny random models)."""
        import models.vc.vevo.vevo_utils as vu
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.sampler = {"flow_matching_steps": flow_matching_steps}
        self.last_report: GenerationReport | None = None
        parts = _snapshot_parts()
        url_file(_hubert_file(), image=IMAGE)  # a missing HuBERT fails before any build
        root = amphion_root()
        cfg = {"fmt": root / "models/vc/vevo/config/Vq8192ToMels.json",
               "vocoder": root / "models/vc/vevo/config/Vocoder.json", **(configs or {})}
        vu.build_hubert_model = routed_hubert
        with _working_dir(root):
            self._pipe = vu.VevoInferencePipeline(
                content_style_tokenizer_ckpt_path=str(parts["tokenizer"]),
                fmt_cfg_path=str(cfg["fmt"]), fmt_ckpt_path=str(parts["fmt"]),
                vocoder_cfg_path=str(cfg["vocoder"]), vocoder_ckpt_path=str(parts["vocoder"]),
                device=torch.device(self.device))

    def generate(self, *, sample_rate: Hertz, duration: Seconds, ref_audio: Audio,
                 ref_text: str = "", text: str = "", source_audio: Audio | None = None,
                 seed: int = 0) -> Audio:
        """``source_audio`` (the source's active speech) in the timbre of ``ref_audio``."""
        if source_audio is None:
            raise GenerationFailed("source_too_short", "voice conversion needs source_audio")
        src = prepare_reference(source_audio, sample_rate, min_seconds=_MIN_SECONDS,
                                what="source")
        ref = prepare_reference(ref_audio, sample_rate, min_seconds=_MIN_SECONDS)
        seed_all(seed)
        wave = self._convert(resample(src, sample_rate, _SR), resample(ref, sample_rate, _SR))
        audio, self.last_report = fit_speech(
            wave, _SR, sample_rate=sample_rate, duration=duration,
            duration_control="model:source_timing", settings={"seed": seed, **self.sampler})
        return audio

    def _convert(self, src24: Audio, ref24: Audio) -> Any:
        """Upstream ``inference_fm`` on 24 kHz WAVs (it reads paths with librosa)."""
        with tempfile.TemporaryDirectory(prefix="madbench-vevo-") as tmp:
            src_path, ref_path = Path(tmp) / "source.wav", Path(tmp) / "timbre_ref.wav"
            sf.write(src_path, src24, _SR, subtype="FLOAT")
            sf.write(ref_path, ref24, _SR, subtype="FLOAT")
            with guard_oom():
                out = self._pipe.inference_fm(
                    src_wav_path=str(src_path), timbre_ref_wav_path=str(ref_path),
                    flow_matching_steps=self.sampler["flow_matching_steps"])
        return out.numpy().reshape(-1)
