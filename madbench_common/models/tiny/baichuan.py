"""A tiny random Baichuan-Omni-1.5 in the release layout, from the upstream classes.

The model code is the git repository's ``baichuan-omni/model`` folder at the commit the
image pins (:data:`~madbench_common.models.adapters.baichuan_omni.CODE_ENV`). The tiny
config (:func:`tiny_config`) and tokenizer (:func:`_tokenizer`) build an
``OmniForCausalLM`` with random weights, saved as the hub snapshot
``baichuan-inc/Baichuan-Omni-1d5`` is laid out (config, generation config, tokenizer
files, sharded safetensors + index), marked tiny and random. Its outputs are noise.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.weights import TINY_MARKER, install_local_snapshot, tiny_layout

__all__ = ["TINY_LLM", "baichuan_omni", "code_dir", "tiny_config", "upstream_modeling"]

TINY_LLM: dict[str, Any] = {"hidden_size": 128, "intermediate_size": 128,
                            "num_hidden_layers": 1, "num_attention_heads": 2,
                            "num_key_value_heads": 1, "head_dim": 64}
"""One decoder layer; 128 wide, the least the audio head allows (``embed_size % 128 == 0``)."""
_AUDIO = {"d_model": 16, "encoder_layers": 1, "encoder_attention_heads": 2,
          "encoder_ffn_dim": 32, "decoder_layers": 1, "decoder_attention_heads": 2,
          "decoder_ffn_dim": 32, "audio_head_transformer_layers": 1}
_CODEBOOKS = [16, 8, 8]
_VOCODER = {"channels": [8, 8]}
_FLOW = {"prenet_in_dim": 16, "prenet_d_model": 16, "prenet_attention_heads": 2,
         "prenet_ffn_dim": 32, "prenet_nlayers": 1, "channels": [16], "attention_head_dim": 8,
         "n_blocks": 1, "num_mid_blocks": 1, "num_heads": 2}
_VISION = {"embed_dim": 16, "depth": 1, "num_heads": 2, "intermediate_size": 32,
           "num_attention_heads": 2, "num_hidden_layers": 1}
_SHARD = "1MB"
"""Small shards, so the snapshot has the release's ``model-0000N-of-0000M.safetensors`` +
``model.safetensors.index.json`` layout."""


def code_dir() -> Path:
    """The git repository's model folder: ``$MADBENCH_BAICHUAN_CODE``, else the image's copy,
    else (a checkout) the copy ``make adapter-test`` unpacks under ``images/``."""
    from madbench_common.models.adapters.baichuan_omni import _DEFAULT_CODE, CODE_ENV

    if os.environ.get(CODE_ENV):
        return Path(os.environ[CODE_ENV])
    checkout = (Path(__file__).resolve().parents[3] / "images" / "omni-baichuan15" / ".upstream"
                / "baichuan-omni" / "baichuan-omni" / "model")
    image = Path(_DEFAULT_CODE)
    return image if image.exists() or not checkout.exists() else checkout


def upstream_modeling(code: Path) -> Any:
    """``modeling_omni`` of the repository folder, imported as a package (relative imports)
    through the flash-attn/deepspeed shims."""
    from madbench_common.models._remote import install_remote_shims

    install_remote_shims()
    name = "mb_baichuan_upstream"
    if name not in sys.modules:
        link = Path(tempfile.mkdtemp(prefix="mb-baichuan-code-")) / name
        link.symlink_to(code.resolve(), target_is_directory=True)
        sys.path.insert(0, str(link.parent))
    return importlib.import_module(f"{name}.modeling_omni")


def _tokenizer(code: Path) -> tuple[Any, dict[str, int]]:
    """A byte-level BPE with the release's special tokens; returns it and the release's
    ``added_tokens.json`` (token → id). Trained with ``tokenizers`` on the packaged prompts
    and their answers, wrapped as the release's ``Qwen2Tokenizer``."""
    from transformers import Qwen2TokenizerFast

    from madbench_common.models.tiny.omni import byte_bpe, omni_texts

    added: dict[str, int] = json.loads((code / "added_tokens.json").read_text())
    bpe = byte_bpe(omni_texts(), sorted(added, key=added.__getitem__))
    release = json.loads((code / "tokenizer_config.json").read_text())
    tok = Qwen2TokenizerFast(
        tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>",
        unk_token=None, bos_token=None, model_max_length=release["model_max_length"],
        additional_special_tokens=release["additional_special_tokens"],
        chat_template=release.get("chat_template"))
    return tok, added


def tiny_config(code: Path, tok: Any, added: dict[str, int]) -> dict[str, Any]:
    """The release's config.json with tiny widths and depths and the tiny tokenizer's ids.

    Every width and depth shrunk (LLM, Whisper-style audio encoder and VQ bridge, audio
    decoder, vocoder, flow-matching decoder, NaViT visual encoder); the pre-processing
    settings (mel bins, hop, pixels, patch and merge sizes, frame sampling) kept; the
    special-token ids remapped to the tiny tokenizer."""
    cfg = json.loads((code / "config.json").read_text())
    token = {i: t for t, i in added.items()}

    def remap(i: int) -> int:
        return int(tok.convert_tokens_to_ids(token[i]))

    out = copy.deepcopy(cfg)
    special = [remap(i) for i in cfg["multimodal_special_token_list"]]
    out.update(TINY_LLM, vocab_size=len(tok), multimodal_special_token_list=special)
    out["audio_config"].update(_AUDIO)
    out["audio_config"]["vq_config"]["codebook_sizes"] = _CODEBOOKS
    out["vocoder_config"].update(_VOCODER)
    out["flow_matching_config"].update(_FLOW)
    for part in ("visual_config", "video_config"):
        out[part].update(_VISION, hidden_size=TINY_LLM["hidden_size"])
    for part in ("audio_config", "visual_config", "video_config"):
        for key, value in cfg[part].items():
            if key.endswith("_token_id") and value in token:
                out[part][key] = remap(value)
    return out


def _generation_config(code: Path, tok: Any) -> dict[str, Any]:
    gen = json.loads((code / "generation_config.json").read_text())
    eos = int(tok.convert_tokens_to_ids("<|endoftext|>"))
    return {**gen, "bos_token_id": eos, "eos_token_id": eos}


@tiny_layout({"baichuan-inc/Baichuan-Omni-1d5": (
    "config.json", "generation_config.json", "model.safetensors.index.json",
    *(f"model-{i:05d}-of-00004.safetensors" for i in range(1, 5)), "tokenizer.json",
    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", TINY_MARKER)})
def baichuan_omni(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """The tiny ``baichuan-inc/Baichuan-Omni-1d5`` snapshot under ``root``'s hub cache."""
    import torch

    from madbench_common.models.adapters.baichuan_omni import REPO, sdpa_vision

    code = code_dir()
    modeling = upstream_modeling(code)
    tok, added = _tokenizer(code)
    cfg = tiny_config(code, tok, added)
    torch.manual_seed(seed)
    model = modeling.OmniForCausalLM(sdpa_vision(modeling.OmniConfig(**cfg)))
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        model.save_pretrained(src, max_shard_size=_SHARD, safe_serialization=True)
        (src / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        (src / "generation_config.json").write_text(
            json.dumps(_generation_config(code, tok), indent=2) + "\n")
        tok.save_pretrained(src, legacy_format=False)
        (src / "added_tokens.json").write_text(json.dumps(
            {t: int(tok.convert_tokens_to_ids(t)) for t in added}, indent=2) + "\n")
        (src / TINY_MARKER).write_text(json.dumps(
            {"random": True, "made_by": "madbench_common.models.tiny.baichuan",
             "note": "tiny randomly initialised model: its outputs are noise"}) + "\n")
        return install_local_snapshot(root, REPO, src)
