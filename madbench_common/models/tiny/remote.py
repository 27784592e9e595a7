"""Tiny snapshots for models whose code is hub remote code only: DF-Arena-1B and MiniCPM-o 4.5.

Their architectures exist only as ``trust_remote_code`` files that cannot be read offline,
so these builders write a snapshot in the release's layout whose remote-code files are the
stand-ins of :mod:`madbench_common.models.standins` (same file, class and entry-point
names, same return values), with random weights, so the adapters' real loading, pre-
processing, output parsing and the stages' rows run offline. Each snapshot carries
:data:`STANDIN_MARKER` and the tiny-random marker (reported as ``+tiny-random``). What
they compute is noise from a stand-in architecture, never the paper's model.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.core.compat import working_dir
from madbench_common.models.weights import (
    STANDIN_MARKER,
    TINY_MARKER,
    install_local_snapshot,
    tiny_layout,
)

__all__ = ["DF_ARENA_FILES", "MINICPMO_CHAT_TEMPLATE", "MINICPMO_FILES", "STANDIN_MARKER",
           "XLSR_1B", "XLSR_1B_TINY", "df_arena", "minicpmo"]

XLSR_1B = "facebook/wav2vec2-xls-r-1b"
"""The config DF-Arena's backbone loads by name (``Wav2Vec2Config.from_pretrained``)."""
XLSR_1B_TINY: dict[str, Any] = {
    "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
    "intermediate_size": 64, "conv_dim": [16, 16, 16], "conv_stride": [5, 8, 8],
    "conv_kernel": [10, 8, 8], "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 2, "feat_extract_norm": "layer",
    "do_stable_layer_norm": True,
}
"""A 2-layer, 32-wide XLS-R (the release: 48 layers, 1,280 wide) with a 320-sample stride."""
DF_ARENA_FILES = ("configuration_antispoofing.py", "feature_extraction_antispoofing.py",
                  "backbone.py", "modeling_antispoofing.py")
"""The stand-in remote-code files (the release also has conformer.py and pipeline_antispoofing.py,
which its AutoModel path does not need here)."""
MINICPMO_FILES = ("configuration_minicpmo.py", "modeling_minicpmo.py")
"""The stand-in remote-code files (the release also has its processor, image processor,
SigLIP, TTS and utility modules, which the stand-in's chat does not need)."""
MINICPMO_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if not enable_thinking %}<think>\n\n</think>\n\n{% endif %}"
    "{% if use_tts_template %}<|tts_bos|>{% endif %}{% endif %}"
)
"""ChatML with Qwen3's empty think block when thinking is off and ``<|tts_bos|>`` opening the
reply under the TTS template, as the release's template lays out a generation prompt."""
_STANDINS = Path(__file__).resolve().parents[1] / "standins"


def _marker(dest: Path, release: str) -> None:
    (dest / TINY_MARKER).write_text(json.dumps(
        {"random": True, "made_by": "madbench_common.models.tiny.remote",
         "note": "tiny randomly initialised stand-in: its outputs are noise"}) + "\n")
    (dest / STANDIN_MARKER).write_text(json.dumps(
        {"stand_in_for": release, "random": True,
         "made_by": "madbench_common.models.tiny.remote",
         "note": "stand-in remote code with random weights: hub-only code cannot be read "
                 "offline; outputs are noise, not the paper's model"}, indent=1) + "\n")


def _df_arena_model(stage: Path) -> Any:
    """The stand-in model, its XLS-R config found by name as the release's backbone finds it
    (here: a folder named like the repo id under the working directory)."""
    import torch
    from transformers import Wav2Vec2Config

    from madbench_common.models.standins.df_arena.modeling_antispoofing import (
        DF_Arena_1B_Antispoofing,
    )

    local = stage / XLSR_1B
    local.mkdir(parents=True)
    Wav2Vec2Config(**XLSR_1B_TINY).save_pretrained(local)
    torch.manual_seed(0)
    with working_dir(stage):
        from madbench_common.models.standins.df_arena.configuration_antispoofing import (
            DF_Arena_1B_Config,
        )

        return DF_Arena_1B_Antispoofing(DF_Arena_1B_Config())


@tiny_layout({"Speech-Arena-2025/DF_Arena_1B_V_1": (
    "config.json", "pytorch_model.bin", *DF_ARENA_FILES, STANDIN_MARKER, TINY_MARKER),
    XLSR_1B: ("config.json",)})
def df_arena(root: str | os.PathLike[str]) -> Path:
    """DF-Arena-1B's snapshot (stand-in remote code, ``pytorch_model.bin``, ``config.json``
    with the release's ``auto_map`` and labels) and the ``facebook/wav2vec2-xls-r-1b``
    config its backbone loads by name, both as cached hub snapshots."""
    from madbench_common.models.adapters.df_arena import REPO

    with tempfile.TemporaryDirectory() as tmp:
        stage, src = Path(tmp) / "stage", Path(tmp) / "snapshot"
        stage.mkdir()
        model = _df_arena_model(stage)
        model.save_pretrained(src, safe_serialization=False)
        install_local_snapshot(root, XLSR_1B, stage / XLSR_1B)
        for name in DF_ARENA_FILES:
            shutil.copy(_STANDINS / "df_arena" / name, src / name)
        config = json.loads((src / "config.json").read_text())
        config.update(
            architectures=["DF_Arena_1B_Antispoofing"], model_type="antispoofing",
            id2label={"0": "spoof", "1": "bonafide"}, label2id={"spoof": 0, "bonafide": 1},
            auto_map={
                "AutoConfig": "configuration_antispoofing.DF_Arena_1B_Config",
                "AutoModel": "modeling_antispoofing.DF_Arena_1B_Antispoofing"})
        (src / "config.json").write_text(json.dumps(config, indent=1) + "\n")
        _marker(src, REPO)
        return install_local_snapshot(root, REPO, src)


def _minicpmo_tokenizer() -> Any:
    from transformers import Qwen2TokenizerFast

    from madbench_common.models.tiny.omni import byte_bpe, omni_texts

    bpe = byte_bpe(omni_texts(), ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>",
                                  "<|tts_bos|>", "<|tts_eos|>", "<think>", "</think>"])
    return Qwen2TokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                              pad_token="<|endoftext|>", unk_token="<unk>",
                              chat_template=MINICPMO_CHAT_TEMPLATE)


@tiny_layout({"openbmb/MiniCPM-o-4_5": (
    "config.json", "model.safetensors", *MINICPMO_FILES, "tokenizer.json",
    "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json",
    STANDIN_MARKER, TINY_MARKER)})
def minicpmo(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """MiniCPM-o 4.5's snapshot: stand-in remote code (``MiniCPMO`` with a 1-layer, 32-wide
    ``Qwen3ForCausalLM`` as ``llm``), ``model.safetensors``, ``config.json`` with its
    ``auto_map``, a byte-level BPE tokenizer trained on the packaged prompts."""
    import torch

    from madbench_common.models.adapters.minicpmo import REPO
    from madbench_common.models.standins.minicpmo.configuration_minicpmo import MiniCPMOConfig
    from madbench_common.models.standins.minicpmo.modeling_minicpmo import MiniCPMO

    tok = _minicpmo_tokenizer()
    ids = tok.convert_tokens_to_ids
    config = MiniCPMOConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        max_position_embeddings=4096, tie_word_embeddings=False, sliding_window=None,
        bos_token_id=ids("<|im_start|>"), eos_token_id=ids("<|im_end|>"),
        pad_token_id=ids("<|endoftext|>"))
    torch.manual_seed(seed)
    model = MiniCPMO(config)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        model.save_pretrained(src)
        for name in MINICPMO_FILES:
            shutil.copy(_STANDINS / "minicpmo" / name, src / name)
        cfg = json.loads((src / "config.json").read_text())
        cfg.update(architectures=["MiniCPMO"], auto_map={
            "AutoConfig": "configuration_minicpmo.MiniCPMOConfig",
            "AutoModel": "modeling_minicpmo.MiniCPMO"})
        (src / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
        tok.save_pretrained(src)
        _marker(src, REPO)
        return install_local_snapshot(root, REPO, src)
