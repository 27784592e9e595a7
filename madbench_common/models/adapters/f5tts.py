"""F5-TTS (Chen et al. 2025) as the paper's same- and cross-identity TTS generator (§3.3).

Upstream: PyPI ``f5-tts`` 1.1.22 (SWivid/F5-TTS, code MIT; the F5TTS_v1_Base weights are
CC-BY-NC-4.0), loaded from the weights root (:class:`F5TTSGenerator`). Duration control is
the model's own (:meth:`F5TTSGenerator._synthesise`); long texts are sampled serially so
one seed gives one audio (:func:`_serial_chunks`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.media.audio import resample
from madbench_common.models.speech_prep import (
    GenerationFailed,
    GenerationReport,
    ReportingGenerator,
    check_text,
    fit_speech,
    guard_oom,
    prepare_reference,
    same_and_cross,
    seed_all,
)
from madbench_common.models.weights import TINY_ARCH_FILE, hf_path, tiny_layout

__all__ = ["F5CrossTTS", "F5SameTTS", "F5TTSGenerator", "SerialExecutor",
           "write_tiny_checkpoint"]

IMAGE = "tts-f5"
REPO = "SWivid/F5-TTS"
VOCOS_REPO = "charactr/vocos-mel-24khz"
_SR = 24000
_HOP = 256
ARCH_FILE = TINY_ARCH_FILE
TINY_ARCH = {"dim": 64, "depth": 2, "heads": 2, "ff_mult": 2, "text_dim": 32, "conv_layers": 1}
_TINY_VOCOS = {
    "feature_extractor": {"class_path": "vocos.feature_extractors.MelSpectrogramFeatures",
                          "init_args": {"sample_rate": 24000, "n_fft": 1024, "hop_length": 256,
                                        "n_mels": 100, "padding": "center"}},
    "backbone": {"class_path": "vocos.models.VocosBackbone",
                 "init_args": {"input_channels": 100, "dim": 32, "intermediate_dim": 64,
                               "num_layers": 1}},
    "head": {"class_path": "vocos.heads.ISTFTHead",
             "init_args": {"dim": 32, "n_fft": 1024, "hop_length": 256, "padding": "center"}},
}
_MIN_REF_SECONDS = 1.0
"""Shorter references are refused (``reference_too_short``): upstream's prompts are 3–12 s."""


def _quiet(*_: Any, **__: Any) -> None:
    """Upstream reports progress through ``show_info``; the stage logs its own."""


def _device(device: str | None) -> str:
    import torch

    return device or ("cuda" if torch.cuda.is_available() else "cpu")


class F5TTSGenerator(ReportingGenerator):
    """F5-TTS ``F5TTS_v1_Base`` behind the
    :class:`~madbench_common.models.roles.SpeechGenerator` role.

    Weights come from the weights root only (``images/tts-f5/weights.yaml``): ``SWivid/F5-TTS``
    ``F5TTS_v1_Base/model_1250000.safetensors`` and the Vocos vocoder
    ``charactr/vocos-mel-24khz``; the character vocabulary is the one packaged in the wheel
    (``f5_tts/infer/examples/vocab.txt``), which is what upstream's ``F5TTS()`` uses.
    Sampler defaults are upstream's (the paper does not state them): 32 NFE steps (Euler),
    CFG strength 2, sway sampling -1. Output 24 kHz (Vocos), resampled to the pipeline rate
    by :mod:`madbench_common.models.speech_prep`.
    """

    slug = "tts-f5"
    branch = "tts_same"
    version = "f5-tts==1.1.22/F5TTS_v1_Base@1250000"
    reference = False

    def __init__(self, *, device: str | None = None, nfe_step: int = 32,
                 cfg_strength: float = 2.0, sway_sampling_coef: float = -1.0,
                 model_name: str = "F5TTS_v1_Base", ckpt_step: int = 1250000) -> None:
        """Load the model and vocoder from the weights root."""
        self.device = _device(device)
        self.sampler = {"nfe_step": nfe_step, "cfg_strength": cfg_strength,
                        "sway_sampling_coef": sway_sampling_coef, "ode": "euler"}
        self.last_report: GenerationReport | None = None
        ckpt = hf_path(REPO, image=IMAGE, filename=f"{model_name}/model_{ckpt_step}.safetensors")
        vocos_dir = hf_path(VOCOS_REPO, image=IMAGE)
        self._model, self._vocoder = _load(model_name, ckpt, vocos_dir, self.device,
                                           _arch_overrides(ckpt))
        self._vocab: dict[str, int] = dict(self._model.vocab_char_map or {})

    def _supported(self, ch: str) -> bool:
        return ch in self._vocab or "\u3100" <= ch <= "\u9fff"  # CJK goes through pinyin

    def generate(self, *, sample_rate: Hertz, duration: Seconds, ref_audio: Audio,
                 ref_text: str = "", text: str = "", source_audio: Audio | None = None,
                 seed: int = 0) -> Audio:
        """``text`` in the voice of ``ref_audio`` (which says ``ref_text``), ``duration`` s."""
        words = check_text(text, what="text", supported=self._supported)
        ref_words = check_text(ref_text, what="ref_text", supported=self._supported)
        ref = prepare_reference(ref_audio, sample_rate, min_seconds=_MIN_REF_SECONDS)
        seed_all(seed)
        wave = self._synthesise(resample(ref, sample_rate, _SR), ref_words, words, duration)
        audio, self.last_report = fit_speech(
            wave, _SR, sample_rate=sample_rate, duration=duration,
            duration_control="model:fix_duration", settings={"seed": seed, **self.sampler})
        return audio

    def _synthesise(self, ref24: Audio, ref_text: str, text: str, duration: Seconds) -> Any:
        """One call. The reference (the source speaker's speech for same-identity, the
        target's for cross-identity) goes through upstream's ``preprocess_ref_audio_text``
        (clipped to ≤ 12 s at a pause, edges trimmed) with its transcript as ``ref_text``,
        always passed, since an empty ``ref_text`` makes upstream run Whisper.

        Duration control is the model's own: F5-TTS generates a mel of a given total length
        (reference + generated frames). We ask for exactly the reference's frames plus
        ``round(duration · 24000 / 256)`` frames (upstream's ``fix_duration`` in seconds,
        offset by half a frame so its ``int()`` lands on that count); the remaining
        correction (trailing silence the model leaves) is a WSOLA stretch, recorded. The
        seed seeds Python, NumPy and torch before sampling (as upstream's
        ``seed_everything`` does), so the same seed gives the same audio
        (:func:`_serial_chunks`).
        """
        from f5_tts.infer import utils_infer as ui

        with tempfile.TemporaryDirectory(prefix="madbench-f5-") as tmp:
            raw = Path(tmp) / "ref.wav"
            sf.write(raw, ref24, _SR, subtype="PCM_16")  # pydub reads 16-bit WAV without ffmpeg
            ref_file, ref_text = ui.preprocess_ref_audio_text(str(raw), ref_text, show_info=_quiet)
            try:
                ref_frames = sf.info(ref_file).frames // _HOP
                frames = ref_frames + round(duration * _SR / _HOP)
                with guard_oom(), _serial_chunks(ui):
                    wave, _, _ = ui.infer_process(
                        ref_file, ref_text, text, self._model, self._vocoder, "vocos",
                        show_info=_quiet, progress=None, fix_duration=(frames + 0.5) * _HOP / _SR,
                        device=self.device, **_infer_kwargs(self.sampler))
            finally:
                _forget_reference(ui, ref_file)
        if wave is None or not np.size(wave):
            raise GenerationFailed("empty_output", "F5-TTS returned no audio")
        return wave


class SerialExecutor:
    """A ``ThreadPoolExecutor`` stand-in that runs each task at ``submit``, in order, on
    the calling thread (so every chunk draws its noise from the seeded RNG in turn)."""

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as err:  # re-raised by result(), as a pool's future would
            future.set_exception(err)
        return future


@contextmanager
def _serial_chunks(ui: Any) -> Iterator[None]:
    """Upstream's chunk pool replaced by :class:`SerialExecutor` for one call.

    A text longer than upstream's ``max_chars`` (what fits in 22 s beside the reference at
    its speaking rate) is split into chunks by ``chunk_text``, and ``infer_batch_process``
    samples the chunks in a ``ThreadPoolExecutor``: the threads draw their noise from the
    one global torch RNG in whatever order they run, so one seed would give different
    audio (same-identity speech of ≥ 11.5 s splits). With the serial executor the chunks
    are sampled one after another on the calling thread, in order, from the seeded RNG;
    upstream's chunking, per-chunk duration split and cross-fade are unchanged.
    """
    pool = ui.ThreadPoolExecutor
    ui.ThreadPoolExecutor = SerialExecutor
    try:
        yield
    finally:
        ui.ThreadPoolExecutor = pool


def _infer_kwargs(sampler: Mapping[str, Any]) -> dict[str, Any]:
    return {k: sampler[k] for k in ("nfe_step", "cfg_strength", "sway_sampling_coef")}


def _forget_reference(ui: Any, ref_file: str) -> None:
    """Drop upstream's per-process reference cache entry and its temp file (no leak per call)."""
    for key in [k for k, v in ui._ref_audio_cache.items() if v == ref_file]:
        del ui._ref_audio_cache[key]
    if os.path.exists(ref_file):
        os.unlink(ref_file)


def _arch_overrides(ckpt: Path) -> dict[str, Any]:
    """Architecture overrides stored beside a checkpoint (``madbench_arch.json``).

    Real checkpoints have none and use the packaged config; the tiny random checkpoints
    of the adapter and image tests (:func:`write_tiny_checkpoint`) carry their widths here.
    """
    path = ckpt.parent / ARCH_FILE
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _load(model_name: str, ckpt: Path, vocos_dir: Path, device: str,
          arch: Mapping[str, Any]) -> tuple[Any, Any]:
    """Upstream's own loaders (``load_vocoder``/``load_model``) on local files."""
    from f5_tts.infer.utils_infer import load_model, load_vocoder
    from hydra.utils import get_class
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(str(files("f5_tts").joinpath(f"configs/{model_name}.yaml")))
    model_cls = get_class(f"f5_tts.model.{cfg.model.backbone}")
    model_arc = {**OmegaConf.to_container(cfg.model.arch), **arch}
    vocoder = load_vocoder("vocos", True, str(vocos_dir), device)
    model = load_model(model_cls, model_arc, str(ckpt), "vocos", "", "euler", True, device)
    return model, vocoder


F5SameTTS, F5CrossTTS = same_and_cross(
    F5TTSGenerator, "tts-f5", ("F5SameTTS", "F5CrossTTS"))


@tiny_layout({REPO: ("F5TTS_v1_Base/model_1250000.safetensors", f"F5TTS_v1_Base/{ARCH_FILE}"),
              VOCOS_REPO: ("config.yaml", "pytorch_model.bin")})
def write_tiny_checkpoint(root: str | os.PathLike[str]) -> None:
    """Tiny random F5 ``CFM(DiT)`` and Vocos, from upstream's classes, in the real layout.

    For tests and ``make image-test``: ``SWivid/F5-TTS`` ``F5TTS_v1_Base/model_1250000
    .safetensors`` (EMA keys, as released) with its widths in ``madbench_arch.json``, and
    ``charactr/vocos-mel-24khz`` ``config.yaml`` + ``pytorch_model.bin``, installed as
    cached hub snapshots under the weights root ``root``. Never a real model.
    """
    import torch
    import yaml
    from f5_tts.model import CFM, DiT
    from f5_tts.model.utils import get_tokenizer
    from safetensors.torch import save_file
    from vocos import Vocos

    from madbench_common.models.weights import install_local_snapshot

    torch.manual_seed(1234)
    vocab, size = get_tokenizer(str(files("f5_tts").joinpath("infer/examples/vocab.txt")),
                                "custom")
    cfm = CFM(transformer=DiT(**TINY_ARCH, text_num_embeds=size, mel_dim=100),
              mel_spec_kwargs={"n_fft": 1024, "hop_length": _HOP, "win_length": 1024,
                               "n_mel_channels": 100, "target_sample_rate": _SR,
                               "mel_spec_type": "vocos"}, vocab_char_map=vocab)
    with tempfile.TemporaryDirectory(prefix="madbench-f5-tiny-") as tmp:
        f5 = Path(tmp) / "f5" / "F5TTS_v1_Base"
        f5.mkdir(parents=True)
        save_file({f"ema_model.{k}": v.contiguous() for k, v in cfm.state_dict().items()},
                  str(f5 / "model_1250000.safetensors"))
        (f5 / ARCH_FILE).write_text(json.dumps(TINY_ARCH))
        install_local_snapshot(root, REPO, f5.parent)
        voc = Path(tmp) / "vocos"
        voc.mkdir()
        (voc / "config.yaml").write_text(yaml.safe_dump(_TINY_VOCOS))
        torch.save(Vocos.from_hparams(str(voc / "config.yaml")).state_dict(),
                   voc / "pytorch_model.bin")
        install_local_snapshot(root, VOCOS_REPO, voc)
