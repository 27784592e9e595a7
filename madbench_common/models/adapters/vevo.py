"""Vevo-Timbre (Zhang et al. 2025) as the paper's second voice-conversion generator (§3.3).

Upstream: Amphion (open-mmlab/Amphion, code MIT) at the commit pinned in
``images/vc-vevo/image.yaml``; Amphion is not a package, its root is on ``PYTHONPATH``.
Vevo-Timbre is ``VevoInferencePipeline.inference_fm`` (``models/vc/vevo/vevo_utils.py``):
HuBERT-large layer-18 features of source and timbre reference → content-style tokens
(``vq8192``) → flow-matching transformer conditioned on the reference's mel → Vocos at
24 kHz.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import soundfile as sf

from madbench_common.core.compat import working_dir
from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.media.audio import resample
from madbench_common.models.speech_prep import (
    GenerationReport,
    ReportingGenerator,
    conversion_inputs,
    fit_speech,
    guard_oom,
)
from madbench_common.models.weights import (
    TINY_ARCH_FILE,
    WeightsMissing,
    hf_path,
    url_file,
    weights_root,
)

__all__ = ["VevoTimbre", "amphion_root", "config_files", "routed_hubert", "sized_configs"]

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


def routed_hubert(device: Any, params: Mapping[str, Any] | None = None) -> Any:
    """Upstream's ``build_hubert_model`` with the checkpoint read from the weights root
    (``params``: a tiny checkpoint's overrides of the bundle's model parameters).

    Upstream downloads torchaudio's ``HUBERT_LARGE`` checkpoint from PyTorch's server at run
    time; here it is a URL item of the weights spec, and the same ``bundle.get_model()``
    call is pointed at the weights-root file (``dl_kwargs`` model_dir/file_name), so
    nothing is downloaded."""
    import torchaudio

    bundle = torchaudio.pipelines.HUBERT_LARGE
    if params:
        bundle = dataclasses.replace(bundle, _params={**bundle._params, **params})
    path = url_file(bundle._path, image=IMAGE)
    hubert = bundle.get_model(dl_kwargs={"model_dir": str(path.parent), "file_name": path.name,
                                         "progress": False})
    return hubert.eval().to(device)


def _hubert_file() -> str:
    import torchaudio

    return str(torchaudio.pipelines.HUBERT_LARGE._path)


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = (_merge(out[key], value) if isinstance(value, Mapping)
                    and isinstance(out.get(key), dict) else value)
    return out


def config_files(arch: Mapping[str, Any], folder: Path) -> dict[str, Path]:
    """The ``fmt`` and ``vocoder`` config files the pipeline reads: Amphion's own, or, for
    a tiny checkpoint's ``arch``, copies in ``folder`` with its widths and HuBERT statistics.

    Amphion's configs (``Vq8192ToMels.json``, ``Vocoder.json``, HuBERT statistics) are read
    from its source tree (the pipeline is built with Amphion's root as working directory,
    since the config names the statistics file relative to it). A tiny test checkpoint
    (:mod:`madbench_common.models.tiny.vevo`) carries ``madbench_arch.json`` at the snapshot
    root (never in a release): overrides of the two configs' widths, HuBERT's parameters
    and its feature statistics; every weight is still read by upstream's loaders."""
    import json5
    import numpy as np

    config = amphion_root() / "models/vc/vevo/config"
    own = {"fmt": config / "Vq8192ToMels.json", "vocoder": config / "Vocoder.json"}
    if not arch:
        return own
    folder.mkdir(parents=True, exist_ok=True)
    stats = folder / "hubert_stats.npz"
    np.savez(stats, mean=np.asarray(arch["hubert_stats"]["mean"], np.float32),
             std=np.asarray(arch["hubert_stats"]["std"], np.float32))
    out = {}
    for name, path in own.items():
        cfg = _merge(json5.loads(path.read_text()), arch.get(name, {}))
        if name == "fmt":
            cfg["model"]["representation_stat_mean_var_path"] = str(stats)
        out[name] = folder / path.name
        out[name].write_text(json.dumps(cfg))
    return out


@contextmanager
def sized_configs(arch: Mapping[str, Any], folder: Path) -> Iterator[dict[str, Any]]:
    """:func:`config_files` loaded with Amphion's ``load_config`` (tiny checkpoint writer)."""
    from utils.util import load_config

    with working_dir(amphion_root()):
        yield {k: load_config(str(v)) for k, v in config_files(arch, folder).items()}


def _arch(snapshot: Path) -> dict[str, Any]:
    path = snapshot / TINY_ARCH_FILE
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _snapshot_parts() -> dict[str, Path]:
    snap = hf_path(REPO, image=IMAGE)
    parts = {k: snap / v for k, v in _PARTS.items()}
    for name, path in parts.items():
        if not (path / "model.safetensors").exists():
            raise WeightsMissing(f"{REPO}/{_PARTS[name]}/model.safetensors", IMAGE,
                                 weights_root())
    return parts


class VevoTimbre(ReportingGenerator):
    """Vevo-Timbre behind the :class:`~madbench_common.models.roles.SpeechGenerator` role
    (``vc``).

    Weights come from the weights root only (``images/vc-vevo/weights.yaml``):
    ``amphion/Vevo`` (``tokenizer/vq8192``, ``acoustic_modeling/Vq8192ToMels``,
    ``acoustic_modeling/Vocoder``) and torchaudio's ``HUBERT_LARGE`` (:func:`routed_hubert`).
    The source's token sequence is not duration-reduced, so the output keeps the source's
    timing (50 tokens/s ↔ 50 mel frames/s): that is the duration control; any residual is
    a recorded WSOLA stretch. Sampler: 32 flow-matching steps (upstream
    ``infer_vevotimbre.py``); the paper states none.
    """

    slug = "vc-vevo"
    branch = "vc"
    version = "amphion@d3de90f/Vevo-vq8192-Vq8192ToMels-Vocoder"
    reference = False

    def __init__(self, *, device: str | None = None, flow_matching_steps: int = 32) -> None:
        """Build the pipeline from the weights root."""
        import models.vc.vevo.vevo_utils as vu
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.sampler = {"flow_matching_steps": flow_matching_steps}
        self.last_report: GenerationReport | None = None
        parts = _snapshot_parts()
        url_file(_hubert_file(), image=IMAGE)  # a missing HuBERT fails before any build
        arch = _arch(hf_path(REPO, image=IMAGE))
        vu.build_hubert_model = lambda dev: routed_hubert(dev, arch.get("hubert"))
        with tempfile.TemporaryDirectory(prefix="madbench-vevo-cfg-") as tmp, \
                working_dir(amphion_root()):
            cfg = config_files(arch, Path(tmp))
            self._pipe = vu.VevoInferencePipeline(
                content_style_tokenizer_ckpt_path=str(parts["tokenizer"]),
                fmt_cfg_path=str(cfg["fmt"]), fmt_ckpt_path=str(parts["fmt"]),
                vocoder_cfg_path=str(cfg["vocoder"]), vocoder_ckpt_path=str(parts["vocoder"]),
                device=torch.device(self.device))

    def generate(self, *, sample_rate: Hertz, duration: Seconds, ref_audio: Audio,
                 ref_text: str = "", text: str = "", source_audio: Audio | None = None,
                 seed: int = 0) -> Audio:
        """``source_audio`` (the source's active speech) in the timbre of ``ref_audio``."""
        src, ref = conversion_inputs(source_audio, ref_audio, sample_rate,
                                     min_seconds=_MIN_SECONDS, seed=seed)
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
