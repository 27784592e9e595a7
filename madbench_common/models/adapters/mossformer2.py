"""MossFormer2 separator (ClearVoice ``MossFormer2_SS_16K``): the paper's speech stem ŝ (§3.2).

The paper: "MossFormer2 (Zhao et al. 2024) estimates a speech stem ŝ from the mixed
waveform x", and ê = x − ŝ (the separate stage forms ê, so ŝ + ê = x exactly).
``MossFormer2_SS_16K`` is a two-speaker separation model with two outputs at 16 kHz;
which one is the speech, and at what level, the paper does not say. This adapter decides
(:func:`pick_speech`) and records the decision on the stems row.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models.roles import SeparatedSpeech
from madbench_common.models.weights import hf_path

__all__ = ["IMAGE", "REPO", "REVISION", "RULE", "MossFormer2Separator", "pick_speech",
           "read_dims"]

IMAGE = "separator-mossformer2"
REPO = "alibabasglab/MossFormer2_SS_16K"
REVISION = "407cb030cd66340918ebb6c8cc63b18f8592cdbe"
"""The commit that added ``last_best_checkpoint.pt`` (hub page, 2024-11-25)."""
RULE = "max_mean_silero_speech_prob"
_RATE = 16000
_LAYER = re.compile(r"^mask_net\.mdl\.intra_mdl\.mossformerM\.layers\.(\d+)\.")


class MossFormer2Separator:
    """ClearVoice MossFormer2_SS_16K; ŝ is the output Silero VAD rates most speech-like."""

    slug = "separator-mossformer2"
    reference = False

    def __init__(self, device: str | None = None, root: str | Path | None = None) -> None:
        from importlib.metadata import version

        import torch

        from madbench_common.models.reference.vad import SileroVAD

        snapshot = hf_path(REPO, image=IMAGE, revision=REVISION, root=root)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self._model, self.dims = _load(snapshot, self.device)
        self.version = f"MossFormer2_SS_16K@{REVISION[:12]}+clearvoice-{version('clearvoice')}"
        self._vad = SileroVAD()

    def separate(self, audio: Audio, sample_rate: Hertz) -> Audio:
        return self.separate_detailed(audio, sample_rate).speech

    def separate_detailed(self, audio: Audio, sample_rate: Hertz) -> SeparatedSpeech:
        """ŝ at ``sample_rate`` and as long as ``audio``, with the rule's figures.

        ClearVoice's packaged config decodes in 2-s windows stitched with no permutation or
        gain alignment, so the two outputs can swap between windows. The paper's clips are
        4–12 s (§3.2), so the model runs once over the whole clip instead (memory grows
        linearly with length)."""
        x = resample(np.asarray(audio, np.float32), sample_rate, _RATE)
        outputs = self._forward(x)
        choice = pick_speech(x, outputs, self._vad)
        speech = resample(choice.speech.astype(np.float32), _RATE, sample_rate)[: len(audio)]
        speech = np.pad(speech, (0, len(audio) - len(speech))).astype(np.float32)
        return SeparatedSpeech(speech, choice.rule, choice.source, choice.scores, choice.gains)

    def _forward(self, x: Audio) -> list[np.ndarray]:
        import torch

        with torch.inference_mode():
            out = self._model(torch.from_numpy(x)[None].to(self.device))
        return [o[0].float().cpu().numpy().astype(np.float64) for o in out]


def pick_speech(mixture: Audio, outputs: list[np.ndarray], vad: Any) -> SeparatedSpeech:
    """Apply the adapter's rule to separator ``outputs`` of ``mixture``.

    Gains: the model is trained scale-invariantly (SI-SNR), so its outputs carry no level.
    Both outputs are scaled jointly by least squares so that ``g₀·y₀ + g₁·y₁`` reconstructs
    the mixture best (the mixture-consistency principle the paper cites, Wisdom et al.
    2019); ŝ = g_k·y_k, and ê = x − ŝ keeps the other output plus what neither explains
    (recorded: ``source_gains``). Speech source (``source_rule =
    "max_mean_silero_speech_prob"``): each output, normalised to the mixture's RMS as
    ClearVoice's own decoder does, goes through Silero VAD; ŝ is the output with the
    highest mean speech probability over its 32 ms windows (ties: the lower index;
    recorded: ``source_scores``).

    ``vad`` needs ``speech_probs_many(audios, rate)`` (Silero's per-window probabilities).
    """
    x = np.asarray(mixture, np.float64)
    basis = np.stack(outputs, axis=1)
    gains = np.linalg.lstsq(basis, x, rcond=None)[0] if np.any(basis) else np.zeros(len(outputs))
    level = _rms(x)
    normed = [(y * (level / _rms(y)) if _rms(y) > 0 else y).astype(np.float32) for y in outputs]
    probs = vad.speech_probs_many(normed, _RATE)
    scores = tuple(float(np.mean(p)) if len(p) else 0.0 for p in probs)
    source = int(np.argmax(scores))
    return SeparatedSpeech(speech=gains[source] * outputs[source], rule=RULE, source=source,
                           scores=scores, gains=tuple(float(g) for g in gains))


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if x.size else 0.0


def read_dims(state: dict[str, Any]) -> dict[str, int]:
    """The ClearVoice MossFormer2 hyper-parameters that a state dict's shapes imply."""
    try:
        enc = state["enc.conv1d.weight"].shape
        seq = state["mask_net.conv1d_encoder.weight"].shape[0]
        out = state["mask_net.conv1d_out.weight"].shape[0]
    except KeyError as exc:
        raise ConfigError(f"not a MossFormer2 state dict: {exc} missing") from None
    layers = {int(m.group(1)) for k in state if (m := _LAYER.match(k))}
    return {"encoder_embedding_dim": int(enc[0]), "encoder_kernel_size": int(enc[2]),
            "mossformer_sequence_dim": int(seq), "num_spks": int(out // seq),
            "num_mossformer_layer": len(layers)}


def _packaged_args() -> argparse.Namespace:
    """ClearVoice's own inference config for MossFormer2_SS_16K (packaged YAML)."""
    from clearvoice.network_wrapper import network_wrapper

    wrapper = network_wrapper()
    wrapper.model_name = "MossFormer2_SS_16K"
    wrapper.load_args_ss()
    args: argparse.Namespace = wrapper.args
    return args


def _load(snapshot: Path, device: Any) -> tuple[Any, dict[str, int]]:
    """Build the model from ClearVoice's class and config; load the checkpoint strictly.

    ``alibabasglab/MossFormer2_SS_16K`` at a pinned commit, laid out as ClearVoice expects
    (``last_best_checkpoint`` names the checkpoint file, whose ``model`` entry is the state
    dict). ClearVoice's own loader downloads when a file is missing and silently skips
    tensors whose shapes differ; this one reads only the weights root, offline, and loads
    strictly. The dimensions are read from the checkpoint's tensor shapes (the same values
    for the released checkpoint; smaller for the tiny random checkpoints of the tests)."""
    import torch
    from clearvoice.models.mossformer2_ss.mossformer2 import MossFormer2_SS_16K

    pointer = snapshot / "last_best_checkpoint"
    if not pointer.is_file():
        raise ConfigError(f"{snapshot}: no last_best_checkpoint file (ClearVoice layout)")
    ckpt_file = snapshot / pointer.read_text().strip().splitlines()[0]
    if not ckpt_file.is_file():
        raise ConfigError(f"{pointer} names {ckpt_file.name}, which is not in the snapshot")
    ckpt = torch.load(ckpt_file, map_location="cpu", weights_only=True)
    raw = ckpt.get("model", ckpt) if isinstance(ckpt, dict) else ckpt
    state = {k.removeprefix("module."): v for k, v in raw.items()}
    dims = read_dims(state)
    args = _packaged_args()
    vars(args).update(dims)
    model = MossFormer2_SS_16K(args).model
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as exc:
        raise ConfigError(f"{ckpt_file}: does not fit MossFormer2_SS_16K: {exc}") from None
    return model.to(device).eval(), dims
