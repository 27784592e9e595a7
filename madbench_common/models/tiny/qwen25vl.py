"""A tiny random Qwen2.5-VL in the layout of ``Qwen/Qwen2.5-VL-32B-Instruct`` (tests, image test).

Text model: hidden 32, 2 layers; vision tower: depth 2, hidden 32; the real patch (14),
merge (2) and temporal patch (2) sizes, so the real image/video processors apply. The
tokenizer is a merge-free byte-level BPE with Qwen's special tokens, and the chat
template renders Qwen's ``<|im_start|>`` format, so ``Qwen2_5_VLProcessor`` is built
offline exactly as ``from_pretrained`` builds the real one.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.tiny.vocab import bpe_vocab, write_bpe_files
from madbench_common.models.weights import install_local_snapshot, tiny_layout

__all__ = ["CHAT_TEMPLATE", "build_model", "build_processor", "install_tiny"]

REPO = "Qwen/Qwen2.5-VL-32B-Instruct"
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
            "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for c in m['content'] %}"
    "{% if c['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_processor() -> Any:
    """``Qwen2_5_VLProcessor`` from offline parts (needs torchvision for the processors)."""
    from transformers import (
        Qwen2_5_VLProcessor,
        Qwen2Tokenizer,
        Qwen2VLImageProcessor,
        Qwen2VLVideoProcessor,
    )

    vocab, merges = bpe_vocab([])
    tok = Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token=None, bos_token=None,
                         eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.add_special_tokens({"additional_special_tokens": list(SPECIALS)})
    small = {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 64}
    return Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(size=small),
                               video_processor=Qwen2VLVideoProcessor(size=small),
                               tokenizer=tok, chat_template=CHAT_TEMPLATE)


def build_model(processor: Any) -> Any:
    """The tiny ``Qwen2_5_VLForConditionalGeneration`` matching ``processor``'s token ids."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    tok = processor.tokenizer
    ids = {name: tok.convert_tokens_to_ids(name) for name in SPECIALS}
    text = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                "mrope_section": [2, 3, 3]},
            "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"]}
    vision = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 2,
              "out_hidden_size": 32, "fullatt_block_indexes": [1], "window_size": 112}
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision,
                              image_token_id=ids["<|image_pad|>"],
                              video_token_id=ids["<|video_pad|>"],
                              vision_start_token_id=ids["<|vision_start|>"],
                              vision_end_token_id=ids["<|vision_end|>"])
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    return model


RELEASE_FILES = ("config.json", "generation_config.json", "chat_template.json",
                 "preprocessor_config.json", "tokenizer.json", "tokenizer_config.json",
                 "vocab.json", "merges.txt", "model.safetensors.index.json",
                 "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors")
"""The Qwen2.5-VL-*-Instruct repos' files (sharded weights; the chat template as
``chat_template.json``; no separate video-processor or special-token files)."""


@tiny_layout({REPO: RELEASE_FILES})
def install_tiny(weights_root: str | Path) -> Path:
    """Save the tiny model + processor as the cached snapshot of the paper's Qwen2.5-VL, in
    the release's file layout."""
    import json

    processor = build_processor()
    model = build_model(processor)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        size = sum(p.numel() * p.element_size() for p in model.parameters())
        model.save_pretrained(tmp, max_shard_size=size * 3 // 4)  # two shards, as released
        processor.save_pretrained(tmp)
        # the release keeps the image processor's settings in preprocessor_config.json
        # (transformers 5 saves a processor_config.json instead)
        processor.image_processor.save_pretrained(tmp)
        write_bpe_files(folder, *bpe_vocab([]))  # the slow tokenizer's files, as released
        template = folder / "chat_template.jinja"
        if template.exists():  # newer transformers write the template as .jinja
            (folder / "chat_template.json").write_text(
                json.dumps({"chat_template": template.read_text()}, indent=1))
        for path in folder.iterdir():
            if path.name not in RELEASE_FILES:
                path.unlink()
        return install_local_snapshot(weights_root, REPO, tmp)
