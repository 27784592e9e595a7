"""Tiny random omni checkpoints in the released layouts, for adapter tests and ``make image-test``.

Each ``install_tiny_*`` builds a small random model from transformers' own classes and
configs, saves it as the released checkpoint is laid out (composite config, processor
files, chat template) and installs it as a cached snapshot at the revision the adapter
pins, so the real offline loading, processor, forward pass and generation run; the outputs
are noise. The tokenizers are byte-level BPEs trained on the packaged prompts and their
answer words, so every option's first token is a real, distinct piece of the vocabulary.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from madbench_common.models.weights import TINY_MARKER, install_local_snapshot, tiny_layout

__all__ = ["GEMMA_CHAT_TEMPLATE", "QWEN_CHAT_TEMPLATE", "byte_bpe", "chatml",
           "install_tiny_gemma4", "install_tiny_qwen25omni", "install_tiny_tf5_omni", "main",
           "omni_texts", "staging"]


def chatml(markers: Mapping[str, str]) -> str:
    """A ChatML chat template: a system turn, each user turn's content parts in order (a
    part of type ``t`` in ``markers`` as ``markers[t]``, text as itself), the generation
    prompt."""
    media = "".join(f"{{% elif content['type'] == '{kind}' %}}{mark}"
                    for kind, mark in markers.items())
    return (
        "{% for message in messages %}"
        "{% if loop.first and message['role'] != 'system' %}"
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
        "<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
        "{% else %}{% for content in message['content'] %}"
        "{% if content['type'] == 'text' %}{{ content['text'] }}"
        f"{media}{{% endif %}}"
        "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


QWEN_CHAT_TEMPLATE = chatml({"image": "<|vision_bos|><|IMAGE|><|vision_eos|>",
                             "audio": "<|audio_bos|><|AUDIO|><|audio_eos|>",
                             "video": "<|vision_bos|><|VIDEO|><|vision_eos|>"})
"""ChatML with Qwen2.5-Omni's media markers, as the released ``chat_template.json`` lays a
conversation out (system turn, media then text in the user turn, generation prompt)."""
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "<start_of_turn>{{ role }}\n{% if message['content'] is string %}"
    "{{ message['content'] | trim }}{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' %}<|image|>{% elif item['type'] == 'video' %}<|video|>"
    "{% elif item['type'] == 'audio' %}<audio_soft_token>"
    "{% elif item['type'] == 'text' %}{{ item['text'] | trim }}{% endif %}{% endfor %}{% endif %}"
    "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
"""Gemma turns (``<start_of_turn>user`` … ``<end_of_turn>``, ``<start_of_turn>model``) with
Gemma 4's media placeholders, which the processor expands (audio soft tokens between
``<start_of_audio>``/``<end_of_audio>``, timestamped frames for video)."""
_GEMMA_SPECIALS = {"image_token": "<|image|>", "boi_token": "<start_of_image>",
                   "eoi_token": "<end_of_image>", "audio_token": "<audio_soft_token>",
                   "boa_token": "<start_of_audio>", "eoa_token": "<end_of_audio>"}
_QWEN_SPECIALS = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>",
                  "audio_eos_token": "<|audio_eos|>", "image_token": "<|IMAGE|>",
                  "video_token": "<|VIDEO|>", "vision_bos_token": "<|vision_bos|>",
                  "vision_eos_token": "<|vision_eos|>"}


def omni_texts() -> list[str]:
    """Texts the tiny tokenizers are trained on: every packaged question and answer form."""
    from madbench_common.benchmarks.madbench.prompts import packaged_prompts

    out = ["You are a helpful assistant.", "system user assistant"]
    for prompt in packaged_prompts():
        for q in prompt.questions:
            out.append(q.full_text)
            out += [f"Answer:{f}" if f.startswith(" ") else f for f in q.choices()] * 4
    return out


def byte_bpe(texts: list[str], specials: list[str], vocab_size: int = 600) -> Any:
    """A byte-level BPE ``tokenizers.Tokenizer`` with ``specials``, trained on ``texts``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(texts, trainer)
    return bpe


@contextmanager
def staging(root: str | os.PathLike[str], repo: str, revision: str,
            made_by: str = __name__) -> Iterator[Path]:
    """A folder that becomes ``repo``'s snapshot at ``revision`` (a commit, else a branch)
    once the block ends, marked as tiny and random by the module ``made_by``
    (:data:`~madbench_common.models.weights.TINY_MARKER`) so adapters can say so."""
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)
        (Path(tmp) / TINY_MARKER).write_text(json.dumps(
            {"random": True, "made_by": made_by,
             "note": "tiny randomly initialised model: its outputs are noise"}) + "\n")
        # the hub cache's layout: a commit-named snapshot, the branch a ref to it
        pinned = re.fullmatch(r"[0-9a-f]{40}", revision) is not None
        install_local_snapshot(root, repo, tmp, **({"revision": revision} if pinned
                                                   else {"ref": revision}))


def _snapshot_dir(root: str | os.PathLike[str], repo: str, revision: str) -> Path:
    folder = Path(root) / "huggingface" / "hub" / f"models--{repo.replace('/', '--')}"
    ref = folder / "refs" / revision
    return folder / "snapshots" / (ref.read_text().strip() if ref.is_file() else revision)


def _qwen_tokenizer() -> Any:
    from transformers import Qwen2TokenizerFast

    chat = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = byte_bpe(omni_texts(), [*chat, *_QWEN_SPECIALS.values()])
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


# transformers 5 saves one processor_config.json where the releases (saved with 4.x) have
# preprocessor_config.json etc.: both are *.json in weights.yaml, and the loader reads either
@tiny_layout({"Qwen/Qwen2.5-Omni-7B": (
    "config.json", "generation_config.json", "model.safetensors", "processor_config.json",
    "chat_template.json", "spk_dict.pt", "tokenizer.json", "tokenizer_config.json",
    "vocab.json", "merges.txt", TINY_MARKER)})
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

    from madbench_common.models.adapters.qwen25omni import REPO, REVISION

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
    with staging(root, REPO, REVISION) as src:
        model.save_pretrained(src)
        processor.save_pretrained(src)
        _release_tokenizer_files(src, tok)
        torch.save({}, src / "spk_dict.pt")
    return _snapshot_dir(root, REPO, REVISION)


def _release_tokenizer_files(src: Path, tok: Any) -> None:
    """The file names of the Qwen2.5-Omni release, which transformers 5 saves differently:
    the chat template as ``chat_template.json`` (``{"chat_template": …}``, read as the
    legacy processor template) and the BPE's ``vocab.json`` and ``merges.txt`` beside
    ``tokenizer.json``."""
    jinja = src / "chat_template.jinja"
    (src / "chat_template.json").write_text(json.dumps({"chat_template": jinja.read_text()}))
    jinja.unlink()
    tok.backend_tokenizer.model.save(str(src))


def _gemma_tokenizer() -> Any:
    from transformers import GemmaTokenizerFast

    chat = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<|video|>"]
    bpe = byte_bpe(omni_texts(), [*chat, *_GEMMA_SPECIALS.values()])
    return GemmaTokenizerFast(tokenizer_object=bpe, bos_token="<bos>", eos_token="<eos>",
                              pad_token="<pad>", unk_token="<unk>",
                              extra_special_tokens=_GEMMA_SPECIALS)


def _gemma_config(tok: Any) -> Any:
    from transformers import Gemma4Config

    ids = tok.convert_tokens_to_ids
    text = {"vocab_size": len(tok), "hidden_size": 32, "intermediate_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
            "head_dim": 16, "vocab_size_per_layer_input": len(tok),
            "hidden_size_per_layer_input": 8, "sliding_window": 32,
            "layer_types": ["sliding_attention", "full_attention"],
            "max_position_embeddings": 4096, "pad_token_id": ids("<pad>"),
            "bos_token_id": ids("<bos>"), "eos_token_id": [ids("<eos>"), ids("<end_of_turn>")]}
    # The audio projection assumes 128 mel bins halved twice: first conv width 128.
    audio = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
             "subsampling_conv_channels": [128, 4], "output_proj_dims": 32}
    vision = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 8}
    return Gemma4Config(
        text_config=text, vision_config=vision, audio_config=audio,
        boi_token_id=ids("<start_of_image>"), eoi_token_id=ids("<end_of_image>"),
        image_token_id=ids("<|image|>"), video_token_id=ids("<|video|>"),
        boa_token_id=ids("<start_of_audio>"), eoa_token_index=ids("<end_of_audio>"),
        audio_token_id=ids("<audio_soft_token>"))


@tiny_layout({"google/gemma-4-E4B-it": (
    "config.json", "generation_config.json", "model.safetensors", "processor_config.json",
    "chat_template.jinja", "tokenizer.json", "tokenizer_config.json", TINY_MARKER)})
def install_tiny_gemma4(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """A 2-layer, 32-dim Gemma 4 (1-layer audio conformer and vision encoder) saved as
    ``Gemma4ForConditionalGeneration`` with ``Gemma4Processor`` files (Gemma 4's audio
    feature extractor, image and video processors at 70 soft tokens per frame, a byte-BPE
    Gemma tokenizer with Gemma 4's media tokens) and a Gemma-turn chat template."""
    import torch
    from transformers import (
        Gemma4AudioFeatureExtractor,
        Gemma4ForConditionalGeneration,
        Gemma4ImageProcessor,
        Gemma4Processor,
        Gemma4VideoProcessor,
    )

    from madbench_common.models.adapters.gemma4 import REPO, REVISION

    tok = _gemma_tokenizer()
    torch.manual_seed(seed)
    model = Gemma4ForConditionalGeneration(_gemma_config(tok))
    processor = Gemma4Processor(
        feature_extractor=Gemma4AudioFeatureExtractor(),
        image_processor=Gemma4ImageProcessor(max_soft_tokens=70), tokenizer=tok,
        video_processor=Gemma4VideoProcessor(max_soft_tokens=70),
        chat_template=GEMMA_CHAT_TEMPLATE)
    with staging(root, REPO, REVISION) as src:
        model.save_pretrained(src)
        processor.save_pretrained(src)
    return _snapshot_dir(root, REPO, REVISION)


@tiny_layout({}, (), install_tiny_qwen25omni, install_tiny_gemma4)
def install_tiny_tf5_omni(root: str | os.PathLike[str], seed: int = 0) -> list[Path]:
    """Both models of the ``omni-qwen25omni`` image (Qwen2.5-Omni and Gemma 4)."""
    return [install_tiny_qwen25omni(root, seed), install_tiny_gemma4(root, seed)]


_INSTALLERS = {"qwen25omni": install_tiny_qwen25omni, "gemma4": install_tiny_gemma4}


def main(argv: list[str] | None = None) -> int:
    """``python -m madbench_common.models.tiny.omni <model> <weights root>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in _INSTALLERS:
        print(f"usage: python -m madbench_common.models.tiny.omni {{{','.join(_INSTALLERS)}}} "
              "<weights root>", file=sys.stderr)
        return 2
    print(_INSTALLERS[args[0]](args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
