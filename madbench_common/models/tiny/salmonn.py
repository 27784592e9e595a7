"""A tiny random SALMONN in the release layout, for the adapter test and ``make image-test``.

Writes every file ``images/deaf-salmonn/weights.yaml`` lists, where the fetch puts it
(:func:`install_tiny`). Random weights: the answers are noise. ``HF_HOME`` must be
``<root>/huggingface`` (the Q-Former reads ``bert-base-uncased`` through the hub cache by
name, as in a pod).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.adapters.salmonn import TINY_REVISION as REVISION
from madbench_common.models.tiny.vocab import write_sentencepiece
from madbench_common.models.weights import install_local_snapshot, tiny_layout

__all__ = ["REVISION", "install_tiny", "llama_sentencepiece"]

_WORDS = (
    "what", "emotion", "does", "the", "speaker", "express", "in", "this", "recording",
    "where", "was", "it", "made", "describe", "the", "background", "environment", "you",
    "hear", "gender", "and", "approximate", "age", "young", "or", "elderly", "of",
    "speaker", "is", "a", "man", "woman", "happy", "sad", "angry", "neutral", "kitchen",
    "street", "park", "bus", "the", "audio", "sounds", "very", "calm", "and", "relaxed",
    "cheerful", "upbeat", "please", "answer", "question", "in", "detail",
)
"""Words of the DEAF questions and prompts (whole pieces in the tiny vocabulary)."""
BEATS_FINETUNED = {"finetuned_model": True, "predictor_class": 4}
WHISPER_TINY = {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1,
                "encoder_attention_heads": 2, "decoder_attention_heads": 2,
                "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "vocab_size": 96,
                "num_mel_bins": 80, "max_source_positions": 1500, "max_target_positions": 64,
                "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
                "decoder_start_token_id": 1}
LLAMA_TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 4, "max_position_embeddings": 2048,
              "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
BERT_TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
             "intermediate_size": 64, "vocab_size": 64, "max_position_embeddings": 64}


def llama_sentencepiece(path: Path) -> Path:
    """A SentencePiece model with LLaMA's special ids (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2),
    the DEAF prompt words and single letters."""
    specials = {"<unk>": "unknown", "<s>": "control", "</s>": "control"}
    letters = sorted({c for w in _WORDS for c in w} | set("ABCDEFGHIJKLMNOPQRSTUVWXYZ.,?!:'"))
    pieces = [(s, 0.0) for s in specials]
    pieces += [("▁" + w, -float(i + 1)) for i, w in enumerate(sorted(set(_WORDS)))]
    pieces += [("▁", -90.0)] + [(c, -100.0) for c in letters]
    return write_sentencepiece(path, pieces, specials,
                               {"unk_id": 0, "bos_id": 1, "eos_id": 2, "pad_id": -1})


def _vicuna(dest: Path) -> None:
    from transformers import LlamaConfig, LlamaTokenizer

    from madbench_common.models.adapters.salmonn import upstream

    LlamaForCausalLM = upstream("modeling_llama").LlamaForCausalLM  # the repository's copy
    tok = LlamaTokenizer(str(llama_sentencepiece(dest / "tokenizer.model")))
    tok.save_pretrained(dest)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), **LLAMA_TINY))
    model.save_pretrained(dest)  # config.json, generation_config.json, pytorch_model.bin


def _whisper(dest: Path) -> None:
    from transformers import WhisperConfig, WhisperFeatureExtractor, WhisperForConditionalGeneration

    WhisperForConditionalGeneration(WhisperConfig(**WHISPER_TINY)).save_pretrained(dest)
    WhisperFeatureExtractor(feature_size=80).save_pretrained(dest)


def _bert(dest: Path) -> None:
    from transformers import BertConfig

    BertConfig(**BERT_TINY).save_pretrained(dest)


def _beats(path: Path) -> None:
    import torch

    from madbench_common.models.adapters.salmonn import upstream
    from madbench_common.models.tiny.eval import BEATS_TINY

    beats_module = upstream("beats.BEATs")
    BEATs, BEATsConfig = beats_module.BEATs, beats_module.BEATsConfig

    cfg = BEATsConfig({**BEATS_TINY, **BEATS_FINETUNED})
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"cfg": cfg.__dict__, "model": BEATs(cfg).state_dict()}, path)


def _snapshot(root: Path, repo: str, build: Any) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        return install_local_snapshot(root, repo, tmp, revision=REVISION)


_SAVED = ("config.json", "generation_config.json", "pytorch_model.bin")
"""What ``save_pretrained`` of a generating model writes under the image's transformers 4.28
(``safe_serialization`` off by default: a ``.bin``, as the release has)."""


@tiny_layout({"lmsys/vicuna-13b-v1.1": (*_SAVED, "tokenizer.model", "tokenizer_config.json",
                                        "special_tokens_map.json"),
              "openai/whisper-large-v2": (*_SAVED, "preprocessor_config.json"),
              "bert-base-uncased": ("config.json",),
              "tsinghua-ee/SALMONN": ("salmonn_v1.pth",)},
             ("BEATs_iter3_plus_AS2M_finetuned_on_AS2M_cpt2.pt",))
def install_tiny(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """Write the tiny SALMONN's files under the weights ``root``; returns ``root``.

    Every file ``images/deaf-salmonn/weights.yaml`` lists, where the fetch puts it:

    * ``lmsys/vicuna-13b-v1.1``: a 2-layer, 32-wide LLaMA (the SALMONN repository's own
      ``LlamaForCausalLM``) with ``config.json``, ``generation_config.json``,
      ``pytorch_model.bin`` and a SentencePiece ``tokenizer.model`` (LLaMA's ids: unk 0,
      bos 1, eos 2) built offline, plus ``tokenizer_config.json`` and
      ``special_tokens_map.json`` as ``LlamaTokenizer`` saves them;
    * ``openai/whisper-large-v2``: a 1+1-layer, 32-wide Whisper (80 mel bins, 1,500
      encoder positions as the real one) saved by transformers'
      ``WhisperForConditionalGeneration``, and its ``WhisperFeatureExtractor``;
    * ``bert-base-uncased``: a 32-wide BERT ``config.json`` (the Q-Former's config);
    * ``files/deaf-salmonn/BEATs_iter3_plus_AS2M_finetuned_on_AS2M_cpt2.pt``: a 1-layer
      BEATs (the repository's ``models.beats``) as a fine-tuned checkpoint
      ``{"cfg", "model"}``;
    * ``tsinghua-ee/SALMONN/salmonn_v1.pth``: ``{"model": …}`` with what training saves
      (upstream's ``runner.py`` drops parameters that do not require grad): the
      window-level Q-Former, query tokens, projection, layer norms and the LoRA weights of
      a SALMONN built by the repository's own ``SALMONN.from_config`` over the files
      above, every one random.
    """
    import torch

    from madbench_common.models.adapters import salmonn as adapter

    base = Path(root)
    adapter.check_hub_cache(base)
    torch.manual_seed(seed)
    vicuna = _snapshot(base, adapter.VICUNA, _vicuna)
    whisper = _snapshot(base, adapter.WHISPER, _whisper)
    _snapshot(base, adapter.BERT, _bert)
    beats = base / "files" / adapter.IMAGE / adapter.BEATS_FILE
    _beats(beats)
    model = adapter.upstream_salmonn().from_config(adapter.model_config(vicuna, whisper, beats))
    for _, param in model.named_parameters():
        if param.requires_grad:  # the LoRA B matrices start at zero: randomise them too
            torch.nn.init.normal_(param, std=0.02)
    # runner.py's save_checkpoint: the state dict less the parameters that need no grad
    frozen = {k for k, p in model.named_parameters() if not p.requires_grad}
    state = {k: v for k, v in model.state_dict().items() if k not in frozen}

    def ckpt(dest: Path) -> None:
        torch.save({"model": state, "epoch": 0}, dest / adapter.CKPT_FILE)

    _snapshot(base, adapter.CKPT_REPO, ckpt)
    return base
