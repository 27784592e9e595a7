"""A tiny random AudioX in the layout of ``HKUSTAudio/AudioX`` (tests, image test).

``get_pretrained_model`` reads ``config.json`` and ``model.ckpt`` from the repo and builds
the model with ``create_model_from_config``; its conditioners load
``openai/clip-vit-base-patch32`` (video) and ``t5-base`` (text) by id. The config is
AudioX's shape at tiny widths (:func:`tiny_config`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.tiny.vocab import T5_TOKENIZER_FILES, write_t5_tokenizer
from madbench_common.models.weights import install_local_snapshot, tiny_layout

__all__ = ["CLIP_REPO", "REPO", "T5_REPO", "install_tiny", "tiny_config"]

REPO = "HKUSTAudio/AudioX"
CLIP_REPO = "openai/clip-vit-base-patch32"
T5_REPO = "t5-base"
_COND = 768
"""AudioX's conditioning width: its video conditioner returns 768-d tokens unprojected."""


def _oobleck(latent: int) -> dict[str, Any]:
    geometry = {"channels": 2, "c_mults": [1, 1, 1, 1, 1], "strides": [2, 4, 4, 8, 8]}
    return {"encoder": {"type": "oobleck", "config": {"in_channels": 2, "latent_dim": 2 * latent,
                                                      **geometry}},
            "decoder": {"type": "oobleck", "config": {"out_channels": 2, "latent_dim": latent,
                                                      **geometry}},
            "bottleneck": {"type": "vae"}, "latent_dim": latent, "downsampling_ratio": 2048,
            "io_channels": 2}


def tiny_config() -> dict[str, Any]:
    """AudioX's config.json layout at tiny widths.

    AudioX's shape: a ``diffusion_cond`` DiT over the latents of an Oobleck VAE (stereo
    44.1 kHz, 10 s = 441 000 samples, ×2048 downsampling: the 215 latent frames the audio
    conditioner hard-codes), cross-attention on video (CLIP at 5 fps), text (T5-base) and
    audio (the VAE's encoder), global conditioning on ``seconds_start``/``seconds_total``.
    The CLIP vision tower keeps the 768 width, 224 px input and 32 px patches AudioX's
    video conditioner hard-codes (1 layer); T5 keeps T5-base's 768 width (1 layer) and gets
    a SentencePiece vocabulary trained here."""
    vae = {"type": "autoencoder", "iterate_batch": True, "config": _oobleck(8)}
    conditioners = [
        {"id": "video_prompt", "type": "clip",
         "config": {"clip_model_name": "clip-vit-base-patch32", "video_fps": 5}},
        {"id": "text_prompt", "type": "t5", "config": {"t5_model_name": T5_REPO,
                                                       "max_length": 64}},
        {"id": "audio_prompt", "type": "audio_autoencoder",
         "config": {"sample_rate": 44100, "pretransform_config": vae}},
        {"id": "seconds_start", "type": "number", "config": {"min_val": 0, "max_val": 512}},
        {"id": "seconds_total", "type": "number", "config": {"min_val": 0, "max_val": 512}},
    ]
    return {
        "model_type": "diffusion_cond", "sample_size": 441000, "sample_rate": 44100,
        "audio_channels": 2, "video_fps": 5,
        "model": {
            "pretransform": vae,
            "conditioning": {"configs": conditioners, "cond_dim": _COND},
            "diffusion": {
                "type": "dit", "diffusion_objective": "v",
                "cross_attention_cond_ids": ["video_prompt", "text_prompt", "audio_prompt"],
                "global_cond_ids": ["seconds_start", "seconds_total"],
                "config": {"io_channels": 8, "embed_dim": 64, "depth": 2, "num_heads": 2,
                           "cond_token_dim": _COND, "global_cond_dim": 2 * _COND,
                           "project_cond_tokens": True,
                           "transformer_type": "continuous_transformer"},
            },
            "io_channels": 8,
        },
    }


def _install_clip(root: Path) -> None:
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    with tempfile.TemporaryDirectory() as tmp:
        CLIPVisionModelWithProjection(CLIPVisionConfig(
            hidden_size=768, intermediate_size=64, num_attention_heads=2, num_hidden_layers=1,
            image_size=224, patch_size=32, projection_dim=16,
        )).save_pretrained(tmp, safe_serialization=False)  # the release has only the .bin
        install_local_snapshot(root, CLIP_REPO, tmp)


def _install_t5(root: Path) -> None:
    """T5-base's release layout: config, safetensors weights, sentencepiece + tokenizer.json."""
    from transformers import T5Config, T5EncoderModel

    with tempfile.TemporaryDirectory() as tmp:
        size = write_t5_tokenizer(Path(tmp))
        T5EncoderModel(T5Config(vocab_size=size, d_model=768, d_ff=32, d_kv=8, num_heads=2,
                                num_layers=1)).save_pretrained(tmp, safe_serialization=True)
        install_local_snapshot(root, T5_REPO, tmp)


@tiny_layout({REPO: ("config.json", "model.ckpt"),
              CLIP_REPO: ("config.json", "pytorch_model.bin"),
              T5_REPO: ("config.json", "model.safetensors", *T5_TOKENIZER_FILES)})
def install_tiny(weights_root: str | Path) -> Path:
    """Install tiny CLIP and T5 snapshots, then AudioX's ``config.json`` + ``model.ckpt``."""
    import torch

    root = Path(weights_root)
    torch.manual_seed(0)
    _install_clip(root)
    _install_t5(root)
    from stable_audio_tools.models.factory import create_model_from_config

    config = tiny_config()
    model = create_model_from_config(json.loads(json.dumps(config)))
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(config, indent=1))
        torch.save({"state_dict": model.state_dict()}, Path(tmp) / "model.ckpt")
        return install_local_snapshot(root, REPO, tmp)
