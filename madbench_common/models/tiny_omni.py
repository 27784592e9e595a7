"""Tiny random omni checkpoints in the released layouts, for adapter tests and ``make image-test``.

Like :mod:`madbench_common.models.tiny`, each ``install_tiny_*`` builds a small randomly
initialised model from transformers' own classes and configs, saves it the way the
released checkpoint is laid out (composite config, processor files, chat template) and
installs it as a cached Hugging Face snapshot at the revision the adapter pins, so the
adapter's real offline loading code runs against it. The outputs of these models are
noise; they exist to run the real processor, forward pass and generation.

The tokenizers are byte-level BPEs trained on the packaged prompts and their answer
words, so every option's first token is a real, distinct piece of the vocabulary.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from madbench_common.weights import install_local_snapshot

__all__ = ["QWEN_CHAT_TEMPLATE", "install_tiny_qwen25omni", "main", "omni_texts"]

QWEN_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif content['type'] == 'audio' %}<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif content['type'] == 'video' %}<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""ChatML with Qwen2.5-Omni's media markers, as the released ``chat_template.json`` lays a
conversation out (system turn, media then text in the user turn, generation prompt)."""
_QWEN_SPECIALS = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>",
                  "audio_eos_token": "<|audio_eos|>", "image_token": "<|IMAGE|>",
                  "video_token": "<|VIDEO|>", "vision_bos_token": "<|vision_bos|>",
                  "vision_eos_token": "<|vision_eos|>"}


def omni_texts() -> list[str]:
    """Texts the tiny tokenizers are trained on: every packaged question and answer form."""
    from madbench_common.prompts import packaged_prompts

    out = ["You are a helpful assistant.", "system user assistant"]
    for prompt in packaged_prompts():
        for q in prompt.questions:
            out.append(q.full_text)
            out += [f"Answer:{f}" if f.startswith(" ") else f for f in q.choices()] * 4
    return out


def _bpe(texts: list[str], specials: list[str], vocab_size: int = 600) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(texts, trainer)
    return bpe


@contextmanager
def _staging(root: str | os.PathLike[str], repo: str, revision: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)
        install_local_snapshot(root, repo, tmp, revision=revision)


def _snapshot_dir(root: str | os.PathLike[str], repo: str, revision: str) -> Path:
    return (Path(root) / "huggingface" / "hub" / f"models--{repo.replace('/', '--')}"
            / "snapshots" / revision)


def _qwen_tokenizer() -> Any:
    from transformers import Qwen2TokenizerFast

    chat = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = _bpe(omni_texts(), [*chat, *_QWEN_SPECIALS.values()])
    return Qwen2TokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                              pad_token="<|endoftext|>", extra_special_tokens=_QWEN_SPECIALS)


def _qwen_config(tok: Any) -> Any:
    from transformers import Qwen2_5OmniConfig

    ids = tok.convert_tokens_to_ids
    thinker = {
        "audio_config": {"num_mel_bins": 128, "encoder_layers": 1, "encoder_attention_heads": 2,
                         "encoder_ffn_dim": 32, "d_model": 16, "output_dim": 32,
                         "n_window": 100, "max_source_positions": 1500},
        "vision_config": {"depth": 1, "hidden_size": 16, "intermediate_size": 32,
                          "num_heads": 2, "out_hidden_size": 32, "fullatt_block_indexes": [0],
                          "window_size": 112, "patch_size": 14, "spatial_merge_size": 2,
                          "temporal_patch_size": 2},
        "text_config": {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64,
                        "num_hidden_layers": 1, "num_attention_heads": 2,
                        "num_key_value_heads": 1, "max_position_embeddings": 4096,
                        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                            "mrope_section": [2, 3, 3]},
                        "eos_token_id": ids("<|im_end|>"), "pad_token_id": ids("<|endoftext|>"),
                        "tie_word_embeddings": False},
        "audio_token_index": ids("<|AUDIO|>"), "image_token_index": ids("<|IMAGE|>"),
        "video_token_index": ids("<|VIDEO|>"), "audio_start_token_id": ids("<|audio_bos|>"),
        "audio_end_token_id": ids("<|audio_eos|>"), "vision_start_token_id": ids("<|vision_bos|>"),
        "vision_end_token_id": ids("<|vision_eos|>"), "user_token_id": ids("user"),
    }
    return Qwen2_5OmniConfig(thinker_config=thinker, enable_audio_output=False)


def install_tiny_qwen25omni(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """A 1-layer, 32-dim Qwen2.5-Omni thinker (1-layer audio and vision towers) saved as the
    composite ``Qwen2_5OmniForConditionalGeneration`` checkpoint with the talker disabled,
    plus ``Qwen2_5OmniProcessor`` files (Whisper 128-mel features, Qwen2-VL image and video
    processors, a byte-BPE tokenizer with Qwen's media tokens) and an empty ``spk_dict.pt``."""
    import torch
    from transformers import (
        GenerationConfig,
        Qwen2_5OmniForConditionalGeneration,
        Qwen2_5OmniProcessor,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
        WhisperFeatureExtractor,
    )

    from madbench_common.models.qwen25omni import REPO, REVISION

    tok = _qwen_tokenizer()
    torch.manual_seed(seed)
    model = Qwen2_5OmniForConditionalGeneration(_qwen_config(tok))
    model.thinker.generation_config = GenerationConfig(
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
    processor = Qwen2_5OmniProcessor(
        image_processor=Qwen2VLImageProcessor(), video_processor=Qwen2VLVideoProcessor(),
        feature_extractor=WhisperFeatureExtractor(feature_size=128), tokenizer=tok,
        chat_template=QWEN_CHAT_TEMPLATE)
    with _staging(root, REPO, REVISION) as src:
        model.save_pretrained(src)
        processor.save_pretrained(src)
        torch.save({}, src / "spk_dict.pt")
    return _snapshot_dir(root, REPO, REVISION)


_INSTALLERS = {"qwen25omni": install_tiny_qwen25omni}


def main(argv: list[str] | None = None) -> int:
    """``python -m madbench_common.models.tiny_omni <model> <weights root>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in _INSTALLERS:
        print(f"usage: python -m madbench_common.models.tiny_omni {{{','.join(_INSTALLERS)}}} "
              "<weights root>", file=sys.stderr)
        return 2
    print(_INSTALLERS[args[0]](args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
