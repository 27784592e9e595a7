"""IndexTTS2 (Zhou et al. 2026) as the paper's second same- and cross-identity TTS (§3.3).

Upstream: ``index-tts/index-tts`` at the commit pinned in ``images/tts-indextts2/image.yaml``
(pyproject ``indextts`` 2.0.0; bilibili Model Use License). Duration control goes through
the s2mel length regulator (:class:`LengthControl`); the text normaliser's grammars are
built into the image (:func:`check_normalizer_cache`).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from madbench_common.core.compat import zip_strict
from madbench_common.core.errors import EnvironmentMissing
from madbench_common.core.types import Audio, Hertz, Seconds
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
from madbench_common.models.weights import hf_path

__all__ = ["IndexTTS2CrossTTS", "IndexTTS2Generator", "IndexTTS2SameTTS", "LengthControl",
           "build_normalizer_cache", "check_normalizer_cache", "normalizer_grammars",
           "plan_frames"]

IMAGE = "tts-indextts2"
REPO = "IndexTeam/IndexTTS-2"
_SR = 22050
_HOP = 256
_FRAMES_PER_CODE = 1.72
"""Upstream's s2mel target: mel frames per GPT code (infer_v2.py)."""
_RANGE = (0.67, 1.5)
"""Target/natural mel-length ratios the s2mel regulator is asked for; beyond: WSOLA."""
_MIN_REF_SECONDS = 1.0
_SAMPLING = {"do_sample": True, "top_p": 0.8, "top_k": 30, "temperature": 0.8,
             "length_penalty": 0.0, "num_beams": 3, "repetition_penalty": 10.0,
             "max_mel_tokens": 1500}


def normalizer_grammars() -> list[Path]:
    """The grammar FSTs upstream's ``TextNormalizer.load`` reads on Linux: the Chinese ones
    in ``indextts/utils/tagger_cache`` (built there on first load) and the English ones in
    the ``tn`` package (shipped in the WeTextProcessing wheel)."""
    import indextts.utils.front as front
    import tn

    cache = Path(front.__file__).resolve().parent / "tagger_cache"
    english = Path(tn.__file__).resolve().parent
    return [cache / "zh_tn_tagger.fst", cache / "zh_tn_verbalizer.fst",
            english / "en_tn_tagger.fst", english / "en_tn_verbalizer.fst"]


def check_normalizer_cache(grammars: list[Path] | None = None) -> None:
    """Fail (exit 3) before loading when a grammar is missing where it cannot be written.

    Upstream's ``TextNormalizer.load`` (``indextts/utils/front.py``) builds its Chinese
    grammar FSTs in ``indextts/utils/tagger_cache`` beside the module on first load, and no
    constructor argument moves that folder. Pods run as uid 10001 on a read-only root, so
    the image builds them when it is made (``python -m
    madbench_common.models.adapters.indextts2 build-normalizer`` in
    ``images/tts-indextts2/Dockerfile``) and a missing grammar here is an
    :class:`~madbench_common.core.errors.EnvironmentMissing` naming the file.

    Upstream builds a missing grammar in place (``os.makedirs`` + ``Fst.write``); on a
    read-only image root that raises inside the constructor. Where the folder is writable
    (a development venv) upstream is left to build it.
    """
    for path in grammars if grammars is not None else normalizer_grammars():
        if path.is_file():
            continue
        folder = next(p for p in path.parents if p.exists())
        if not os.access(folder, os.W_OK):
            raise EnvironmentMissing(
                f"IndexTTS2 text normaliser grammar {path} is missing and {folder} is not "
                "writable (upstream builds it there on first load); build it into the image "
                "with: python -m madbench_common.models.adapters.indextts2 build-normalizer")


def build_normalizer_cache() -> list[Path]:
    """Build upstream's normaliser grammars in place (image build time, as root); return
    them. Raises if upstream left one missing."""
    from indextts.utils.front import TextNormalizer

    TextNormalizer(enable_glossary=True).load()
    grammars = normalizer_grammars()
    missing = [p for p in grammars if not p.is_file()]
    if missing:
        raise EnvironmentMissing(f"TextNormalizer.load() did not write {missing}")
    return grammars


def plan_frames(natural: int, target: int) -> tuple[int, str]:
    """The s2mel target length for ``natural`` frames when ``target`` are wanted, and the
    duration-control label: the model alone, or the model clamped plus a time-stretch."""
    lo, hi = math.ceil(natural * _RANGE[0]), math.floor(natural * _RANGE[1])
    frames = min(max(target, lo), max(hi, lo))
    method = "model:s2mel_target_length"
    return frames, method if frames == target else method + "+time_stretch"


def check_codes(codes: Any, stop_token: int) -> None:
    """Refuse a GPT output with no speech token before its stop token.

    Upstream trims each sequence at the stop token and carries on; a sequence that stops at
    once leaves zero codes, and the semantic-to-mel stage then fails inside a convolution
    ("padded input size per channel: (0)"). That is the generator producing nothing for
    this text and reference, as an empty waveform is (``empty_output``): a rejected row,
    not a fault of the machine."""
    if codes.shape[-1] == 0 or bool((codes[:, 0] == stop_token).all()):
        raise GenerationFailed("no_speech_tokens",
                               "IndexTTS2's GPT stopped before its first speech token")


class LengthControl:
    """Arms the s2mel length regulator after each GPT call and gives it the target length.

    The paper calls IndexTTS2 duration-controlled (a target token count for its GPT), but
    the released code at the pinned commit exposes no such input:
    ``UnifiedVoice.inference_speech`` always feeds the two fixed entries of its speed
    embedding and generates until the stop token (``max_mel_tokens`` only caps it, cutting
    speech). What it does expose is the semantic-to-mel stage's target length:
    ``s2mel.models['length_regulator'](S, ylens=…)``, which upstream sets to 1.72 mel
    frames per GPT code (22050/256 frames/s over 50 codes/s). The target is the requested
    duration's mel frames within ``[0.67, 1.5]`` of the natural length
    (``model:s2mel_target_length``); beyond that the regulator is clamped at the bound and
    the rest is a WSOLA stretch (``model:s2mel_target_length+time_stretch``). The text is
    kept in one segment, so there is one armed call.

    ``gpt_call`` wraps ``UnifiedVoice.inference_speech`` (and refuses codes with no speech
    token, :func:`check_codes`); ``regulator`` wraps the length
    regulator module. The regulator call made while armed (the one turning GPT codes
    into mel frames) gets ``plan_frames(natural, target)``; other calls (the reference
    prompt) pass through. ``log`` keeps (natural, used, method) per armed call.
    """

    def __init__(self, target_frames: int, stop_token: int = -1) -> None:
        self.target = target_frames
        self.stop_token = stop_token
        self.armed = False
        self.log: list[tuple[int, int, str]] = []

    def gpt_call(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            if self.stop_token >= 0:
                check_codes(out[0], self.stop_token)
            self.armed = True
            return out
        return wrapped

    def lengths(self, ylens: Any) -> Any:
        """``ylens`` for one regulator call: the planned target when armed, else as given."""
        if not self.armed or ylens is None:
            return ylens
        self.armed = False
        natural = int(ylens.reshape(-1)[0])
        frames, method = plan_frames(natural, self.target)
        self.log.append((natural, frames, method))
        return ylens.new_full(ylens.shape, frames)

    def regulator(self, module: Any) -> Any:
        """``module`` wrapped in a torch module (it lives in an ``nn.ModuleDict``)."""
        import torch

        control = self

        class _Armed(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = module

            def forward(self, x: Any, *args: Any, ylens: Any = None, **kwargs: Any) -> Any:
                return self.inner(x, *args, ylens=control.lengths(ylens), **kwargs)

        return _Armed()


class IndexTTS2Generator(ReportingGenerator):
    """IndexTTS2 behind the :class:`~madbench_common.models.roles.SpeechGenerator` role.

    Weights come from the weights root only (``images/tts-indextts2/weights.yaml``):
    ``IndexTeam/IndexTTS-2`` and the auxiliary models upstream's
    ``ensure_models_available`` would download, passed to ``IndexTTS2(aux_paths=…)`` as
    local paths (``facebook/w2v-bert-2.0``, ``amphion/MaskGCT`` semantic codec,
    ``funasr/campplus``, ``nvidia/bigvgan_v2_22khz_80band_256x``). The Qwen emotion model is
    not loaded (``use_qwen_emo=False``): the paper uses no emotion text; the speaker
    reference is also the emotion reference, as upstream does by default. Sampling is
    upstream's default (top-p 0.8, top-k 30, temperature 0.8, 3 beams, repetition penalty
    10; 25 s2mel diffusion steps, CFG 0.7); the seed seeds torch before sampling. Output
    22.05 kHz (BigVGAN v2). The row records the duration control used
    (:class:`LengthControl`) with the natural and target frame counts.
    """

    slug = "tts-indextts2"
    branch = "tts_same"
    version = "indextts@ee40fa7/IndexTTS-2"
    reference = False

    def __init__(self, *, device: str | None = None) -> None:
        import torch
        from indextts.infer_v2 import IndexTTS2

        self.device = device or ("cuda:0" if torch.cuda.is_available() else "cpu")
        self.last_report: GenerationReport | None = None
        model_dir = hf_path(REPO, image=IMAGE)
        check_normalizer_cache()
        aux = {"w2v_bert": str(hf_path("facebook/w2v-bert-2.0", image=IMAGE)),
               "semantic_codec": str(hf_path("amphion/MaskGCT", image=IMAGE,
                                             filename="semantic_codec/model.safetensors")),
               "campplus": str(hf_path("funasr/campplus", image=IMAGE,
                                       filename="campplus_cn_common.bin")),
               "bigvgan": str(hf_path("nvidia/bigvgan_v2_22khz_80band_256x", image=IMAGE))}
        self._tts = IndexTTS2(cfg_path=str(model_dir / "config.yaml"), model_dir=str(model_dir),
                              use_fp16=self.device.startswith("cuda"), device=self.device,
                              use_qwen_emo=False, aux_paths=aux)

    def _tokens(self, text: str) -> list[str]:
        tok = self._tts.tokenizer
        tokens = list(tok.tokenize(text))
        ids = tok.convert_tokens_to_ids(tokens)
        bad = [t for t, i in zip_strict(tokens, ids) if i == tok.unk_token_id]
        if bad:
            raise GenerationFailed("unsupported_characters",
                                   f"text has tokens the BPE model cannot encode: {bad[:10]}")
        if not tokens:
            raise GenerationFailed("empty_text", "text normalises to no tokens")
        return tokens

    def generate(self, *, sample_rate: Hertz, duration: Seconds, ref_audio: Audio,
                 ref_text: str = "", text: str = "", source_audio: Audio | None = None,
                 seed: int = 0) -> Audio:
        """``text`` in the voice of ``ref_audio``, ``duration`` s (``ref_text`` is unused:
        IndexTTS2 conditions on the reference audio alone)."""
        words = check_text(text, what="text")
        n_tokens = len(self._tokens(words))
        ref = prepare_reference(ref_audio, sample_rate, min_seconds=_MIN_REF_SECONDS)
        control = LengthControl(round(duration * _SR / _HOP), int(self._tts.stop_mel_token))
        seed_all(seed)
        rate, wave = self._synthesise(ref, sample_rate, words, n_tokens, control)
        natural, used, method = control.log[0] if control.log else (0, 0, "time_stretch")
        settings = {"seed": seed, **_SAMPLING, "s2mel_steps": 25, "s2mel_cfg": 0.7,
                    "natural_frames": natural, "s2mel_frames": used,
                    "target_frames": control.target}
        audio, self.last_report = fit_speech(wave, rate, sample_rate=sample_rate,
                                             duration=duration, duration_control=method,
                                             settings=settings)
        return audio

    def _synthesise(self, ref: Audio, rate: Hertz, text: str, n_tokens: int,
                    control: LengthControl) -> tuple[int, np.ndarray]:
        tts = self._tts
        tts.cache_spk_cond = tts.cache_emo_cond = None  # never reuse another reference
        gpt_fn, reg = tts.gpt.inference_speech, tts.s2mel.models["length_regulator"]
        tts.gpt.inference_speech = control.gpt_call(gpt_fn)
        tts.s2mel.models["length_regulator"] = control.regulator(reg)
        try:
            with tempfile.TemporaryDirectory(prefix="madbench-indextts2-") as tmp:
                path = Path(tmp) / "speaker.wav"
                sf.write(path, ref, rate, subtype="FLOAT")
                with guard_oom():
                    out = tts.infer(str(path), text, None, verbose=False,
                                    max_text_tokens_per_segment=max(120, n_tokens + 1),
                                    **_SAMPLING)
        finally:
            tts.gpt.inference_speech = gpt_fn
            tts.s2mel.models["length_regulator"] = reg
        if out is None:
            raise GenerationFailed("empty_output", "IndexTTS2 returned no audio")
        sr, pcm = out  # upstream yields (22050, int16 samples) when output_path is None
        return int(sr), np.asarray(pcm, np.float32).reshape(-1) / 32767.0


IndexTTS2SameTTS, IndexTTS2CrossTTS = same_and_cross(
    IndexTTS2Generator, "tts-indextts2", ("IndexTTS2SameTTS", "IndexTTS2CrossTTS"))


def _main(argv: list[str]) -> int:
    if argv != ["build-normalizer"]:
        print("usage: python -m madbench_common.models.adapters.indextts2 build-normalizer",
              file=sys.stderr)
        return 2
    for path in build_normalizer_cache():
        print(f"normaliser grammar: {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
