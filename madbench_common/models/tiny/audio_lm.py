"""Tiny random checkpoints of DEAF's open audio LLMs in their released layouts, for tests and
the demo.

Each installer builds a small randomly initialised model from transformers' own classes
and configs, its processor (Whisper feature extractor, a byte-level BPE tokenizer with the
model's special tokens, the chat template) and saves it as a cached Hugging Face snapshot
at the revision the adapter reads, marked ``madbench_tiny_random.json``. The adapters'
real offline loading, processor, forward and generation then run on it. Their outputs
are noise. ``python -m madbench_common.models.tiny.audio_lm <weights root>`` installs all.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from madbench_common.models.tiny.omni import chatml, staging
from madbench_common.models.weights import TINY_MARKER, tiny_layout

_SAVED = ("config.json", "generation_config.json", "model.safetensors", "chat_template.jinja",
          "processor_config.json", "tokenizer.json", "tokenizer_config.json", TINY_MARKER)
"""What transformers 5 saves for each model and processor (the repos are fetched whole)."""

__all__ = ["install_tiny_af3", "install_tiny_deaf_tf5", "install_tiny_qwen2_audio",
           "install_tiny_qwen3_omni"]

_WORDS = ["What emotion does the speaker express in this recording?",
          "Where was this recording made? Describe the background environment you hear.",
          "What are the gender and the approximate age (young or elderly) of the speaker?",
          "What is the speaker mainly talking about?", "You are a helpful assistant.",
          "The speaker sounds happy, sad, angry or neutral. A young man, an elderly woman.",
          "It was recorded in a kitchen, on a busy street, in a park, on a bus."]
_CHAT = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _tokenizer(specials: dict[str, str]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=[*_CHAT, *specials.values()],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(_WORDS * 4, trainer)
    return Qwen2TokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                              pad_token="<|endoftext|>", extra_special_tokens=specials)


def _text_config(tok: Any, **extra: Any) -> dict[str, Any]:
    ids = tok.convert_tokens_to_ids
    return {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1,
            "max_position_embeddings": 4096, "eos_token_id": ids("<|im_end|>"),
            "pad_token_id": ids("<|endoftext|>"), "tie_word_embeddings": False, **extra}



def _seed(seed: int) -> None:
    import torch

    torch.manual_seed(seed)


@tiny_layout({"Qwen/Qwen2-Audio-7B-Instruct": _SAVED})
def install_tiny_qwen2_audio(root: str | os.PathLike[str], seed: int = 0) -> None:
    """A 1-layer Qwen2-Audio (16-dim Whisper-style encoder, 32-dim Qwen2 decoder)."""
    from transformers import (
        Qwen2AudioConfig,
        Qwen2AudioForConditionalGeneration,
        Qwen2AudioProcessor,
        WhisperFeatureExtractor,
    )

    from madbench_common.models.adapters.audio_lm import Qwen2Audio

    specials = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>",
                "audio_eos_token": "<|audio_eos|>"}
    tok = _tokenizer(specials)
    config = Qwen2AudioConfig(
        audio_config={"num_mel_bins": 128, "encoder_layers": 1, "encoder_attention_heads": 2,
                      "encoder_ffn_dim": 32, "d_model": 16, "max_source_positions": 1500},
        text_config=_text_config(tok), audio_token_index=tok.convert_tokens_to_ids("<|AUDIO|>"))
    _seed(seed)
    model = Qwen2AudioForConditionalGeneration(config)
    template = chatml({"audio": "Audio 1: <|audio_bos|><|AUDIO|><|audio_eos|>\n"})
    proc = Qwen2AudioProcessor(WhisperFeatureExtractor(feature_size=128), tok,
                               chat_template=template)
    with staging(root, Qwen2Audio.repo, Qwen2Audio.revision, __name__) as src:
        model.save_pretrained(src)
        proc.save_pretrained(src)


@tiny_layout({"nvidia/audio-flamingo-3-hf": _SAVED})
def install_tiny_af3(root: str | os.PathLike[str], seed: int = 0) -> None:
    """A 1-layer Audio Flamingo 3 (16-dim encoder, 32-dim Qwen2 decoder)."""
    from transformers import (
        AudioFlamingo3Config,
        AudioFlamingo3ForConditionalGeneration,
        AudioFlamingo3Processor,
        WhisperFeatureExtractor,
    )

    from madbench_common.models.adapters.audio_lm import AudioFlamingo3

    tok = _tokenizer({"audio_token": "<sound>"})
    config = AudioFlamingo3Config(
        audio_config={"num_mel_bins": 128, "num_hidden_layers": 1, "num_attention_heads": 2,
                      "intermediate_size": 32, "hidden_size": 16, "max_source_positions": 1500},
        text_config=_text_config(tok), audio_token_id=tok.convert_tokens_to_ids("<sound>"))
    _seed(seed)
    model = AudioFlamingo3ForConditionalGeneration(config)
    proc = AudioFlamingo3Processor(WhisperFeatureExtractor(feature_size=128), tok,
                                   chat_template=chatml({"audio": "<sound>"}))
    with staging(root, AudioFlamingo3.repo, AudioFlamingo3.revision, __name__) as src:
        model.save_pretrained(src)
        proc.save_pretrained(src)


@tiny_layout({"Qwen/Qwen3-Omni-30B-A3B-Instruct": _SAVED})
def install_tiny_qwen3_omni(root: str | os.PathLike[str], seed: int = 0) -> None:
    """A composite Qwen3-Omni with a 1-layer, 2-expert MoE thinker and no talker."""
    from transformers import (
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        Qwen3OmniMoeConfig,
        Qwen3OmniMoeForConditionalGeneration,
        Qwen3OmniMoeProcessor,
        WhisperFeatureExtractor,
    )

    from madbench_common.models.adapters.audio_lm import Qwen3Omni

    specials = {"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>",
                "audio_eos_token": "<|audio_end|>", "image_token": "<|image_pad|>",
                "video_token": "<|video_pad|>", "vision_bos_token": "<|vision_start|>",
                "vision_eos_token": "<|vision_end|>"}
    tok = _tokenizer(specials)
    ids = tok.convert_tokens_to_ids
    text = _text_config(tok, num_experts=2, num_experts_per_tok=1, moe_intermediate_size=32,
                        decoder_sparse_step=1, head_dim=16,
                        rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                         "mrope_section": [2, 3, 3], "interleaved": True})
    thinker = {
        "audio_config": {"num_mel_bins": 128, "encoder_layers": 1, "encoder_attention_heads": 2,
                         "encoder_ffn_dim": 32, "d_model": 16, "output_dim": 32,
                         "n_window": 50, "n_window_infer": 100, "downsample_hidden_size": 16,
                         "max_source_positions": 1500},
        "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 32,
                          "num_heads": 2, "out_hidden_size": 32, "patch_size": 16,
                          "spatial_merge_size": 2, "temporal_patch_size": 2,
                          "deepstack_visual_indexes": [0], "num_position_embeddings": 64},
        "text_config": text, "audio_token_id": ids("<|audio_pad|>"),
        "image_token_id": ids("<|image_pad|>"), "video_token_id": ids("<|video_pad|>"),
        "audio_start_token_id": ids("<|audio_start|>"),
        "vision_start_token_id": ids("<|vision_start|>")}
    config = Qwen3OmniMoeConfig(thinker_config=thinker, enable_audio_output=False,
                                im_start_token_id=ids("<|im_start|>"),
                                im_end_token_id=ids("<|im_end|>"))
    _seed(seed)
    model = Qwen3OmniMoeForConditionalGeneration(config)
    template = chatml({"audio": "<|audio_start|><|audio_pad|><|audio_end|>"})
    proc = Qwen3OmniMoeProcessor(Qwen2VLImageProcessor(), Qwen2VLVideoProcessor(),
                                 WhisperFeatureExtractor(feature_size=128), tok,
                                 chat_template=template)
    with staging(root, Qwen3Omni.repo, Qwen3Omni.revision, __name__) as src:
        model.save_pretrained(src)
        proc.save_pretrained(src)


@tiny_layout({}, (), install_tiny_qwen2_audio, install_tiny_af3, install_tiny_qwen3_omni)
def install_tiny_deaf_tf5(root: str | os.PathLike[str], seed: int = 0) -> None:
    """Every tiny checkpoint the deaf-tf5 image's adapters read."""
    install_tiny_qwen2_audio(root, seed)
    install_tiny_af3(root, seed)
    install_tiny_qwen3_omni(root, seed)


if __name__ == "__main__":
    install_tiny_deaf_tf5(sys.argv[1] if len(sys.argv) > 1 else os.environ["MADBENCH_WEIGHTS"])
