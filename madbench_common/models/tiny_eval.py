"""Tiny randomly initialised checkpoints in the real weights layout, for image and adapter tests.

``make image-test`` calls these inside a built image (``image_test.weights`` in
``image.yaml``) as ``function(weights_root)``; the adapter tests call them too. Each builds
the model from the upstream package's own classes and configs at a reduced size, with
random weights, and writes it where the adapter's real loading code looks
(:func:`~madbench_common.weights.install_local_snapshot` for hub repos, ``files/<image>/``
for URL files). Nothing here is a trained model; nothing is downloaded.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.weights import install_local_snapshot

__all__ = ["audio_torch", "cavmae_sync", "tf5"]

_TEXT = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
         "num_attention_heads": 2, "vocab_size": 16, "pad_token_id": 0, "bos_token_id": 1,
         "eos_token_id": 2, "cls_token_id": 1, "sep_token_id": 2}
_ENC = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
        "num_attention_heads": 2, "head_dim": 16}


def _tokenizer() -> Any:
    """A 4-token word-level tokenizer (PE-AV's processor requires one; embeddings don't use it)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel({"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3},
                                    unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", unk_token="[UNK]")


def _peav(dest: Path) -> None:
    import torch
    from transformers import (
        PeAudioFeatureExtractor,
        PeAudioVideoConfig,
        PeAudioVideoModel,
        PeAudioVideoProcessor,
        PeVideoVideoProcessor,
    )

    torch.manual_seed(0)
    dac = {"encoder_hidden_size": 4, "downsampling_ratios": [2, 8, 10, 12],
           "decoder_hidden_size": 4, "codebook_dim": 8, "hidden_size": 16}
    vision = {"architecture": "vit_pe_core_base_patch16_224", "num_classes": 16,
              "model_args": {"depth": 1, "embed_dim": 32, "num_heads": 2, "img_size": 32}}
    cfg = PeAudioVideoConfig(text_config=_TEXT, audio_video_config={
        "audio_config": {"dac_config": dac, **_ENC},
        "video_config": {"vision_config": vision, **_ENC}, **_ENC})
    PeAudioVideoModel(cfg).save_pretrained(dest)
    video = PeVideoVideoProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3,
                                  image_std=[0.5] * 3)
    PeAudioVideoProcessor(feature_extractor=PeAudioFeatureExtractor(), video_processor=video,
                          tokenizer=_tokenizer()).save_pretrained(dest)


def _wavlm(dest: Path) -> None:
    import torch
    from transformers import Wav2Vec2FeatureExtractor, WavLMConfig, WavLMModel

    torch.manual_seed(0)
    # total conv stride 320 (20 ms frames) as the released checkpoints: long clips stay short
    cfg = WavLMConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, conv_dim=(32, 32, 32), conv_stride=(5, 8, 8),
                      conv_kernel=(10, 8, 8), num_conv_pos_embeddings=16,
                      num_conv_pos_embedding_groups=2)
    WavLMModel(cfg).save_pretrained(dest)
    Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True).save_pretrained(dest)


def tf5(root: str | Path) -> Path:
    """Tiny PE-AV (``facebook/pe-av-base``) and WavLM (``microsoft/wavlm-base-plus``)."""
    with tempfile.TemporaryDirectory() as tmp:
        for repo, build in (("facebook/pe-av-base", _peav),
                            ("microsoft/wavlm-base-plus", _wavlm)):
            src = Path(tmp) / repo.split("/")[1]
            src.mkdir()
            build(src)
            install_local_snapshot(root, repo, src)
    return Path(root)


def _files(root: str | Path, image: str) -> Path:
    dest = Path(root) / "files" / image
    dest.mkdir(parents=True, exist_ok=True)
    return dest


BEATS_TINY = {"encoder_layers": 1, "encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64,
              "encoder_attention_heads": 2, "embed_dim": 32, "input_patch_size": 16,
              "conv_pos": 16, "conv_pos_groups": 2, "relative_position_embedding": True,
              "num_buckets": 32, "max_distance": 64, "gru_rel_pos": True, "deep_norm": True,
              "layer_norm_first": False}


def audio_torch(root: str | Path, **beats_cfg: Any) -> Path:
    """A tiny BEATs (upstream layout ``{"cfg", "model"}``) and AASIST at its published size."""
    import torch
    from AASIST import Model
    from BEATs import BEATs, BEATsConfig

    from madbench_common.models.aasist import MODEL_CONFIG, WEIGHTS
    from madbench_common.models.beats import CHECKPOINT

    dest = _files(root, "audio-torch")
    torch.manual_seed(0)
    cfg = BEATsConfig({**BEATS_TINY, **beats_cfg})
    torch.save({"cfg": cfg.__dict__, "model": BEATs(cfg).state_dict()}, dest / CHECKPOINT)
    torch.save(Model(MODEL_CONFIG).state_dict(), dest / WEIGHTS)
    return Path(root)


CAVMAE_TINY = {"embed_dim": 32, "modality_specific_depth": 1, "num_heads": 2,
               "decoder_embed_dim": 16, "decoder_depth": 1, "decoder_num_heads": 2}


def cavmae_sync(root: str | Path, keep: str = "") -> Path:
    """A tiny CAVMAESync saved as the release is (``module.`` keys) plus its arch sidecar."""
    import torch

    from madbench_common.models.cavmae_sync import ARCH_FILE, RELEASED, WEIGHTS, upstream_models

    torch.manual_seed(0)
    state = upstream_models().CAVMAESync(**{**RELEASED, **CAVMAE_TINY}).state_dict()
    dest = _files(root, "enc-cavmae-sync")
    torch.save({f"module.{k}": v for k, v in state.items() if k.startswith(keep)},
               dest / WEIGHTS)
    (dest / ARCH_FILE).write_text(json.dumps(CAVMAE_TINY))
    return Path(root)
