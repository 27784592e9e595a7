"""XLSR-Mamba (Xiao and Das 2024) anti-spoofing detector (image ``det-xlsr-mamba``).

Upstream ``swagshaw/XLSR-Mamba`` (MIT) at a pinned commit: ``model.py`` ``Model`` is a
fairseq XLS-R 300M front end (``xlsr2_300m.pt``, fine-tuned with the detector) →
``LL`` (1024 → 144) → ``first_bn`` → SELU → ``conformer``, the dual-column bidirectional
Mamba ``mamba_blocks.MixerModel`` (6 forward + 6 backward blocks, attention pooling per
column, ``LL`` 288 → 144, 2-way ``classifier``). Built exactly, with two documented
substitutions: a transformers front end (:func:`fairseq_to_hf`) and mamba_ssm's PyTorch
reference path (:func:`reference_mamba`).
"""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.models.detector_base import EmbeddingDetector
from madbench_common.models.prep import check_audio, resample, tile_to, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import TINY_ARCH_FILE, hf_path

__all__ = ["ARCH_FILE", "NB_SAMP", "RELEASED", "XlsrMambaDetector", "build_modules",
           "fairseq_to_hf", "merge_arch", "reference_mamba"]

IMAGE, REPO, WEIGHTS = "det-xlsr-mamba", "AustinXiao/XLSR-Mamba-LA", "model.safetensors"
RATE, NB_SAMP = 16000, 64600
ARCH_FILE = TINY_ARCH_FILE
"""Beside a tiny test checkpoint only (``madbench_arch.json``): its architecture arguments."""
"""Optional overrides beside the checkpoint (tiny test checkpoints only)."""
RELEASED: dict[str, Any] = {
    "emb_size": 144, "num_encoders": 12,
    "xlsr": {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
             "intermediate_size": 4096, "feat_extract_norm": "layer",
             "do_stable_layer_norm": True, "conv_bias": True,
             "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16,
             "apply_spec_augment": False, "layerdrop": 0.0},
}
"""``main.py`` defaults (``--emb-size 144 --num_encoders 12``: 6 blocks per column) and the
fairseq ``xlsr2_300m`` architecture as a ``Wav2Vec2Config``."""
_MAMBA = {"rms_norm": True, "residual_in_fp32": True, "fused_add_norm": True}
"""``model.py`` ``MambaConfig``; ``ssm_cfg`` gains ``use_fast_path=False`` (reference path)."""
_RULES = [
    (r"^feature_extractor\.conv_layers\.(\d+)\.0\.", r"feature_extractor.conv_layers.\1.conv."),
    (r"^feature_extractor\.conv_layers\.(\d+)\.2\.1\.",
     r"feature_extractor.conv_layers.\1.layer_norm."),
    (r"^feature_extractor\.conv_layers\.0\.2\.", "feature_extractor.conv_layers.0.layer_norm."),
    (r"^layer_norm\.", "feature_projection.layer_norm."),
    (r"^post_extract_proj\.", "feature_projection.projection."),
    (r"^mask_emb$", "masked_spec_embed"),
    (r"^encoder\.pos_conv\.0\.", "encoder.pos_conv_embed.conv."),
    (r"^encoder\.layers\.(\d+)\.self_attn\.", r"encoder.layers.\1.attention."),
    (r"^encoder\.layers\.(\d+)\.self_attn_layer_norm\.", r"encoder.layers.\1.layer_norm."),
    (r"^encoder\.layers\.(\d+)\.fc1\.", r"encoder.layers.\1.feed_forward.intermediate_dense."),
    (r"^encoder\.layers\.(\d+)\.fc2\.", r"encoder.layers.\1.feed_forward.output_dense."),
]
"""fairseq ``Wav2Vec2Model`` → transformers ``Wav2Vec2Model`` (unlisted names are equal)."""
_PRETRAINING_ONLY = ("quantizer.", "project_q.", "final_proj.", "target_glu.", "label_embs")


def fairseq_to_hf(state: dict[str, Any], weight_norm: tuple[str, str]) -> dict[str, Any]:
    """The fairseq XLS-R tensors under transformers' names (pre-training heads dropped).

    The front end is transformers' ``Wav2Vec2Model`` (XLS-R 300M config: layer-norm conv
    extractor, stable layer norm, conv bias) instead of fairseq, whose 2021 pins do not
    import on Python 3.11. The checkpoint's fairseq keys (``ssl_model.model.*``) map one to
    one (the names of transformers' own conversion script); pre-training-only tensors
    (quantizer, ``project_q``, ``final_proj``) are dropped, and a checkpoint that leaves
    any front-end or back-end weight unset is refused.

    ``weight_norm`` names the positional convolution's magnitude and direction in the
    target model (``weight_g``/``weight_v``, or the parametrization's ``original0/1``).
    """
    out: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(_PRETRAINING_ONLY):
            continue
        new = key
        for pattern, repl in _RULES:
            new = re.sub(pattern, repl, new)
        new = new.replace("pos_conv_embed.conv.weight_g", f"pos_conv_embed.conv.{weight_norm[0]}")
        new = new.replace("pos_conv_embed.conv.weight_v", f"pos_conv_embed.conv.{weight_norm[1]}")
        out[new] = value
    return out


def _missing_extension(name: str) -> types.ModuleType:
    """A stand-in for a CUDA extension that was not built: any use raises."""
    module = types.ModuleType(name)

    def _fail(attr: str) -> Any:
        raise RuntimeError(f"{name}.{attr}: mamba_ssm's CUDA extension is not built in this "
                           "image; the adapter runs the PyTorch reference path")

    module.__getattr__ = _fail  # type: ignore[method-assign]
    return module


def _fused_ref(ref: Callable[..., Any], x: Any, weight: Any, bias: Any, residual: Any = None,
               prenorm: bool = False, residual_in_fp32: bool = False, eps: float = 1e-6) -> Any:
    """``rms_norm_fn``/``layer_norm_fn``'s signature over the reference norm (fp32 upcast)."""
    return ref(x, weight, bias, residual=residual, eps=eps, prenorm=prenorm, upcast=True)


def reference_mamba() -> Any:
    """Import ``mamba_blocks`` with mamba_ssm's PyTorch reference path wired in.

    ``mamba_ssm`` is upstream's Python code (v1.2.2, same module API and parameter names as
    the pinned 1.1.4, but causal-conv1d optional) without its CUDA extension, so the Mamba
    blocks run upstream's PyTorch reference path on CPU and GPU: ``Mamba(use_fast_path=
    False)`` with ``torch`` ``conv1d``, ``selective_scan_ref`` for the selective scan and
    ``rms_norm_ref`` for the fused add + RMSNorm (``upcast=True``, fp32). Numerics equal
    the kernels' up to fp32 rounding.

    ``mamba_ssm`` imports its compiled ``selective_scan_cuda`` unconditionally; where it is
    absent a stand-in that raises on use is registered, and the scan, the causal
    convolution and the fused norms are pointed at upstream's reference functions.
    """
    if "selective_scan_cuda" not in sys.modules:
        try:
            import selective_scan_cuda  # noqa: F401  (a CUDA build, where one exists)
        except ImportError:
            sys.modules["selective_scan_cuda"] = _missing_extension("selective_scan_cuda")
    try:
        import mamba_blocks  # XLSR-Mamba's repo root (upstream_src), on PYTHONPATH
        from mamba_ssm.modules import mamba_simple
        from mamba_ssm.ops.selective_scan_interface import selective_scan_ref
        from mamba_ssm.ops.triton.layernorm import layer_norm_ref, rms_norm_ref
    except ImportError as exc:
        raise ConfigError(f"XLSR-Mamba code not found ({exc}): image det-xlsr-mamba puts "
                          "swagshaw/XLSR-Mamba and state-spaces/mamba on PYTHONPATH") from None
    mamba_simple.selective_scan_fn = selective_scan_ref
    mamba_simple.causal_conv1d_fn = None
    for module in (mamba_simple, mamba_blocks):
        module.rms_norm_fn = partial(_fused_ref, rms_norm_ref)
        module.layer_norm_fn = partial(_fused_ref, layer_norm_ref)
    return mamba_blocks


def merge_arch(over: dict[str, Any]) -> dict[str, Any]:
    """:data:`RELEASED` with ``over``'s entries (``xlsr`` merged key by key)."""
    return {**RELEASED, **over, "xlsr": {**RELEASED["xlsr"], **over.get("xlsr", {})}}


def build_modules(arch: dict[str, Any]) -> tuple[Any, Any]:
    """(front end, back end) of ``model.py`` ``Model`` for ``arch``, randomly initialised.

    The back end is a ``ModuleDict`` whose names (``LL``, ``first_bn``, ``conformer``) are
    the checkpoint's top-level keys; the SELU between them has no weights.
    """
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    blocks = reference_mamba()
    emb, cfg = int(arch["emb_size"]), Wav2Vec2Config(**arch["xlsr"])
    head = torch.nn.ModuleDict({
        "LL": torch.nn.Linear(cfg.hidden_size, emb),
        "first_bn": torch.nn.BatchNorm2d(num_features=1),
        "conformer": blocks.MixerModel(d_model=emb, n_layer=int(arch["num_encoders"]) // 2,
                                       ssm_cfg={"use_fast_path": False}, **_MAMBA),
    })
    return Wav2Vec2Model(cfg), head


def _load_state(path: Any) -> dict[str, Any]:
    if str(path).endswith(".safetensors"):
        from safetensors.torch import load_file

        return dict(load_file(str(path)))
    import torch

    state = torch.load(path, map_location="cpu")
    return dict(state.get("state_dict", state))


def _split(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(front-end tensors without ``ssl_model.model.``, back-end tensors)."""
    front = {k[len("ssl_model.model."):]: v for k, v in state.items()
             if k.startswith("ssl_model.model.")}
    back = {k: v for k, v in state.items() if not k.startswith("ssl_model.")}
    return front, back


class XlsrMambaDetector(EmbeddingDetector):
    """XLSR-Mamba native P(spoof) and its 144-d pooled representation (mode A).

    Weights: the authors' LA checkpoint (``AustinXiao/XLSR-Mamba-LA``, trained on ASVspoof
    2019 LA with RawBoost 5; upstream evaluates In-the-Wild with it). Input, as upstream's
    In-the-Wild evaluation (``Dataset_in_the_wild_eval``): 16 kHz raw waveform (no
    normalisation), the first 64,600 samples, repeated from the start when shorter; the
    front end's last layer is read (``features_only``). Outputs: ``P(spoof) =
    softmax(logits)[0]`` (class 1 is bona fide; upstream writes the bona fide logit) and,
    as frozen features, the 144-d input of the 2-way classifier (the fused
    attention-pooled columns), captured by a hook.
    """

    slug, version = "det-xlsr-mamba", "1"
    reference = False
    modes: tuple[str, ...] = ("A",)

    def __init__(self, arch: dict[str, Any] | None = None, revision: str | None = None) -> None:
        import json

        import torch

        path = hf_path(REPO, image=IMAGE, filename=WEIGHTS, revision=revision)
        sidecar = path.with_name(ARCH_FILE)
        self.arch = merge_arch(arch or (json.loads(sidecar.read_text())
                                        if sidecar.exists() else {}))
        self.front, self.head = build_modules(self.arch)
        self._load(_load_state(path), str(path))
        self.device = torch_device()
        self.front.eval().to(self.device)
        self.head.eval().to(self.device)
        self._features = self._hook()
        self._torch = torch

    def _load(self, state: dict[str, Any], where: str) -> None:
        front, back = _split(state)
        names = set(self.front.state_dict())
        norm = (("parametrizations.weight.original0", "parametrizations.weight.original1")
                if any("parametrizations" in k for k in names) else ("weight_g", "weight_v"))
        front = fairseq_to_hf(front, norm)
        for module, part, what in ((self.front, front, "XLS-R front end"),
                                   (self.head, back, "Mamba back end")):
            missing, unexpected = module.load_state_dict(part, strict=False)
            missing = [k for k in missing if k != "masked_spec_embed"]
            if missing or unexpected:
                raise ConfigError(f"{where}: not the released XLSR-Mamba checkpoint for "
                                  f"{self.arch} ({what}: missing {missing[:3]}, unexpected "
                                  f"{list(unexpected)[:3]})")

    def _hook(self) -> Callable[[], np.ndarray]:
        seen: dict[str, Any] = {}
        classifier = self.head["conformer"].classifier
        classifier.register_forward_hook(lambda _m, args, _o: seen.__setitem__("x", args[0]))
        return lambda: np.asarray(seen.pop("x")[0].float().cpu().numpy(), dtype=np.float32)

    def logits(self, x: np.ndarray) -> Any:
        """Upstream ``Model.forward`` on one waveform (front end → LL → BN → SELU → Mamba)."""
        torch = self._torch
        with torch.no_grad():
            wav = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))[None]
            emb = self.front(wav.to(self.device)).last_hidden_state
            h = self.head["first_bn"](self.head["LL"](emb).unsqueeze(1))
            return self.head["conformer"](torch.nn.functional.selu(h).squeeze(1))[0]

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode != "A":
            raise ValueError(f"{self.slug} scores audio only (mode A), got {mode!r}")
        x = tile_to(resample(check_audio(audio, self.slug), sample_rate, RATE), NB_SAMP)
        logits = self.logits(x)
        p_spoof = float(self._torch.softmax(logits.float(), dim=-1)[0])
        spec = InputSpec(audio_rate=RATE, audio_seconds=NB_SAMP / RATE,
                         crop=f"first {NB_SAMP} samples after repeat padding",
                         pooling="input of the 2-way classifier (attention-pooled forward "
                                 "and backward Mamba columns, fused by LL)")
        return Embedding(self._features(), spec, p_spoof, "prob")
