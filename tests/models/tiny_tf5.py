"""Tiny random PE-AV and WavLM checkpoints from transformers' own configs, installed where
the enc-tf5 adapters find them (also run by the end-to-end test in the family venv)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from madbench_common.weights import install_local_snapshot

TEXT = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
            vocab_size=16, pad_token_id=0, bos_token_id=1, eos_token_id=2, cls_token_id=1,
            sep_token_id=2)
ENC = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
           head_dim=16)


def _tokenizer():  # the processor needs one; embeddings never use it
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel({"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "[UNK]": 3},
                                    unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", unk_token="[UNK]")


def _tiny_peav(dest: Path) -> None:
    from transformers import (
        PeAudioFeatureExtractor,
        PeAudioVideoConfig,
        PeAudioVideoModel,
        PeAudioVideoProcessor,
        PeVideoVideoProcessor,
    )

    torch.manual_seed(0)
    dac = dict(encoder_hidden_size=4, downsampling_ratios=[2, 8, 10, 12], decoder_hidden_size=4,
               codebook_dim=8, hidden_size=16)
    vision = dict(architecture="vit_pe_core_base_patch16_224", num_classes=16,
                  model_args=dict(depth=1, embed_dim=32, num_heads=2, img_size=32))
    cfg = PeAudioVideoConfig(text_config=TEXT, audio_video_config=dict(
        audio_config=dict(dac_config=dac, **ENC), video_config=dict(vision_config=vision, **ENC),
        **ENC))
    PeAudioVideoModel(cfg).save_pretrained(dest)
    video = PeVideoVideoProcessor(size={"height": 32, "width": 32}, image_mean=[0.5] * 3,
                                  image_std=[0.5] * 3)
    PeAudioVideoProcessor(feature_extractor=PeAudioFeatureExtractor(), video_processor=video,
                          tokenizer=_tokenizer()).save_pretrained(dest)


def _tiny_wavlm(dest: Path) -> None:
    from transformers import Wav2Vec2FeatureExtractor, WavLMConfig, WavLMModel

    torch.manual_seed(0)
    cfg = WavLMConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=64, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2),
                      conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                      num_conv_pos_embedding_groups=2)
    WavLMModel(cfg).save_pretrained(dest)
    Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True).save_pretrained(dest)



def install_tiny_tf5(root: Path, scratch: Path) -> Path:
    """Both tiny checkpoints under the weights root ``root`` (HF cache layout)."""
    for repo, build in (("facebook/pe-av-base", _tiny_peav),
                        ("microsoft/wavlm-base-plus", _tiny_wavlm)):
        src = scratch / repo.split("/")[1]
        src.mkdir(parents=True, exist_ok=True)
        build(src)
        install_local_snapshot(root, repo, src)
    return root


if __name__ == "__main__":
    install_tiny_tf5(Path(sys.argv[1]), Path(sys.argv[2]))
