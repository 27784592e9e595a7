"""A tiny random AudioGen in the layout of ``facebook/audiogen-medium`` (tests, image test).

audiocraft checkpoints are ``{'xp.cfg': <hydra config>, 'best_state': <state dict>}`` in
``state_dict.bin`` (the LM) and ``compression_state_dict.bin`` (EnCodec); the config is
audiocraft's own at tiny widths (:func:`tiny_config`). The T5 conditioner loads ``t5-large``
through ``from_pretrained``, so a tiny T5 (d_model 1024, as audiocraft requires for that
name; 1 layer) with a SentencePiece vocabulary trained here is installed as ``t5-large``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.tiny.vocab import T5_TOKENIZER_FILES, write_t5_tokenizer
from madbench_common.models.weights import install_local_snapshot, tiny_layout

__all__ = ["REPO", "T5_REPO", "install_tiny", "tiny_config"]

REPO = "facebook/audiogen-medium"
T5_REPO = "t5-large"


def tiny_config() -> dict[str, Any]:
    """The xp.cfg of a tiny AudioGen (audiocraft's keys, tiny sizes).

    Follows audiocraft's own ``solver/audiogen/audiogen_base_16khz`` composition (EnCodec
    at 16 kHz with SEANet ratios 8·5·4·2 = 50 Hz, 4 RVQ codebooks, delayed codebook
    pattern, a T5-large text conditioner fused by cross-attention, classifier-free
    guidance 3.0, 10 s segments)."""
    seanet = {"dimension": 16, "channels": 1, "causal": False, "n_filters": 2,
              "n_residual_layers": 1, "ratios": [8, 5, 4, 2], "activation": "ELU",
              "activation_params": {"alpha": 1.0}, "norm": "weight_norm", "norm_params": {},
              "kernel_size": 7, "residual_kernel_size": 3, "last_kernel_size": 7,
              "dilation_base": 2, "pad_mode": "constant", "true_skip": True, "compress": 2,
              "lstm": 1, "disable_norm_outer_blocks": 0,
              "decoder": {"trim_right_ratio": 1.0, "final_activation": None,
                          "final_activation_params": None}, "encoder": {}}
    rvq = {"n_q": 4, "q_dropout": False, "bins": 256, "decay": 0.99, "kmeans_init": False,
           "kmeans_iters": 1, "threshold_ema_dead_code": 2, "orthogonal_reg_weight": 0.0,
           "orthogonal_reg_active_codes_only": False}
    lm = {"dim": 16, "num_heads": 2, "num_layers": 2, "hidden_scale": 2, "n_q": 4, "card": 256,
          "dropout": 0.0, "emb_lr": None, "activation": "gelu", "norm_first": True,
          "bias_ff": False, "bias_attn": False, "bias_proj": False, "past_context": None,
          "causal": True, "custom": False, "memory_efficient": False,
          "attention_as_float32": False, "layer_scale": None, "positional_embedding": "sin",
          "xpos": False, "checkpointing": "none", "weight_init": None, "depthwise_init": None,
          "zero_bias_init": False, "norm": "layer_norm", "cross_attention": True,
          "qk_layer_norm": False, "qk_layer_norm_cross": False, "attention_dropout": None,
          "kv_repeat": 1, "two_step_cfg": False}
    return {
        "device": "cpu", "dtype": "float32", "sample_rate": 16000, "channels": 1,
        "dataset": {"segment_duration": 10},
        "compression_model": "encodec",
        "encodec": {"autoencoder": "seanet", "quantizer": "rvq", "sample_rate": 16000,
                    "channels": 1, "causal": False, "renormalize": False},
        "seanet": seanet, "rvq": rvq,
        "lm_model": "transformer_lm", "transformer_lm": lm,
        "codebooks_pattern": {"modeling": "delay",
                              "delay": {"delays": [0, 1, 2, 3], "flatten_first": 0,
                                        "empty_initial": 0}},
        "classifier_free_guidance": {"training_dropout": 0.1, "inference_coef": 3.0},
        "attribute_dropout": {},
        "fuser": {"cross_attention_pos_emb": False, "cross_attention_pos_emb_scale": 1,
                  "sum": [], "prepend": [], "cross": ["description"], "input_interpolate": []},
        "conditioners": {"description": {"model": "t5", "t5": {
            "name": T5_REPO, "finetune": False, "word_dropout": 0.0, "normalize_text": False}}},
    }


def _install_t5(root: Path) -> Path:
    """T5-large's release layout: config, safetensors weights, sentencepiece + tokenizer.json."""
    import torch
    from transformers import T5Config, T5EncoderModel

    with tempfile.TemporaryDirectory() as tmp:
        size = write_t5_tokenizer(Path(tmp))
        torch.manual_seed(0)
        t5 = T5EncoderModel(T5Config(vocab_size=size, d_model=1024, d_ff=32, d_kv=8,
                                     num_heads=2, num_layers=1))
        t5.save_pretrained(tmp, safe_serialization=True)
        return install_local_snapshot(root, T5_REPO, tmp)


@tiny_layout({REPO: ("state_dict.bin", "compression_state_dict.bin"),
              T5_REPO: ("config.json", "model.safetensors", *T5_TOKENIZER_FILES)})
def install_tiny(weights_root: str | Path) -> Path:
    """Write tiny ``state_dict.bin`` + ``compression_state_dict.bin`` (and the tiny T5)."""
    import torch
    from audiocraft.models import builders
    from omegaconf import OmegaConf

    root = Path(weights_root)
    _install_t5(root)
    cfg = OmegaConf.create(tiny_config())
    torch.manual_seed(0)
    compression = builders.get_compression_model(cfg)
    lm = builders.get_lm_model(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in (("compression_state_dict.bin", compression),
                            ("state_dict.bin", lm)):
            torch.save({"xp.cfg": OmegaConf.to_container(cfg),
                        "best_state": model.state_dict()}, Path(tmp) / name)
        return install_local_snapshot(root, REPO, tmp)
