"""Tiny randomly initialised checkpoints in the real weights layout, for image and adapter tests.

``make image-test`` calls these inside a built image (``image_test.weights`` in
``image.yaml``) as ``function(weights_root)``; the adapter tests call them too. Each builds
the model from the upstream package's own classes and configs at a reduced size, with
random weights, and writes it where the adapter's real loading code looks
(:func:`~madbench_common.models.weights.install_local_snapshot` for hub repos, ``files/<image>/``
for URL files). Nothing here is a trained model; nothing is downloaded.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.weights import TINY_ARCH_FILE, install_local_snapshot, tiny_layout

__all__ = ["IMAGEBIND_TINY", "aasist", "audio_torch", "cavmae_sync", "imagebind", "msclap",
           "msclap_2023", "tf5"]

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
    # the release ships pytorch_model.bin (weights.yaml fetches that name), not safetensors;
    # transformers 5 saves safetensors only, so the state dict is written as the release's
    model = WavLMModel(cfg)
    model.config.save_pretrained(dest)
    torch.save(model.state_dict(), dest / "pytorch_model.bin")
    Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True).save_pretrained(dest)


def _xlsr(dest: Path) -> None:
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2Model

    torch.manual_seed(0)
    # XLS-R's architecture at toy width: layer-norm conv feature encoder, pre-LN transformer
    # ("stable-layer-norm"), total conv stride 320 (20 ms frames) as the release
    cfg = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, conv_dim=(32, 32, 32), conv_stride=(5, 8, 8),
                         conv_kernel=(10, 8, 8), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=2, feat_extract_norm="layer",
                         do_stable_layer_norm=True, conv_bias=True)
    model = Wav2Vec2Model(cfg)
    model.config.save_pretrained(dest)
    torch.save(model.state_dict(), dest / "pytorch_model.bin")  # the release's file name
    Wav2Vec2FeatureExtractor(sampling_rate=16000, do_normalize=True,
                             return_attention_mask=True).save_pretrained(dest)


@tiny_layout({"facebook/pe-av-base": ("config.json", "model.safetensors",
                                      "processor_config.json", "tokenizer.json",
                                      "tokenizer_config.json"),
              "microsoft/wavlm-base-plus": ("config.json", "preprocessor_config.json",
                                            "pytorch_model.bin"),
              "facebook/wav2vec2-xls-r-300m": ("config.json", "preprocessor_config.json",
                                               "pytorch_model.bin")})
def tf5(root: str | Path) -> Path:
    """Tiny PE-AV (``facebook/pe-av-base``), WavLM (``microsoft/wavlm-base-plus``) and XLS-R
    (``facebook/wav2vec2-xls-r-300m``)."""
    with tempfile.TemporaryDirectory() as tmp:
        for repo, build in (("facebook/pe-av-base", _peav),
                            ("microsoft/wavlm-base-plus", _wavlm),
                            ("facebook/wav2vec2-xls-r-300m", _xlsr)):
            src = Path(tmp) / repo.split("/")[1]
            src.mkdir()
            build(src)
            install_local_snapshot(root, repo, src)
    return Path(root)


def _files(root: str | Path, image: str) -> Path:
    """``files/<image>/`` under ``root``."""
    dest = Path(root) / "files" / image
    dest.mkdir(parents=True, exist_ok=True)
    return dest


BEATS_TINY = {"encoder_layers": 1, "encoder_embed_dim": 32, "encoder_ffn_embed_dim": 64,
              "encoder_attention_heads": 2, "embed_dim": 32, "input_patch_size": 16,
              "conv_pos": 16, "conv_pos_groups": 2, "relative_position_embedding": True,
              "num_buckets": 32, "max_distance": 64, "gru_rel_pos": True, "deep_norm": True,
              "layer_norm_first": False}


@tiny_layout({}, ("AASIST.pth", "BEATs_iter3_plus_AS2M.pt"))
def audio_torch(root: str | Path, **beats_cfg: Any) -> Path:
    """A tiny BEATs (upstream layout ``{"cfg", "model"}``) and AASIST at its published size."""
    import torch
    from AASIST import Model
    from BEATs import BEATs, BEATsConfig

    from madbench_common.models.adapters.aasist import MODEL_CONFIG, WEIGHTS
    from madbench_common.models.adapters.beats import CHECKPOINT

    dest = _files(root, "audio-torch")
    torch.manual_seed(0)
    cfg = BEATsConfig({**BEATS_TINY, **beats_cfg})
    torch.save({"cfg": cfg.__dict__, "model": BEATs(cfg).state_dict()}, dest / CHECKPOINT)
    torch.save(Model(MODEL_CONFIG).state_dict(), dest / WEIGHTS)
    return Path(root)


CAVMAE_TINY = {"embed_dim": 32, "modality_specific_depth": 1, "num_heads": 2,
               "decoder_embed_dim": 16, "decoder_depth": 1, "decoder_num_heads": 2}


@tiny_layout({}, ("cav_mae_sync.pth", TINY_ARCH_FILE))
def cavmae_sync(root: str | Path, keep: str = "", **arch: Any) -> Path:
    """A tiny CAVMAESync saved as the release is (``module.`` keys) plus its arch sidecar;
    with ``arch`` (the release's constructor arguments, ``madbench gpu-bench``) at that size."""
    import torch

    from madbench_common.models.adapters.cavmae_sync import (
        ARCH_FILE,
        RELEASED,
        WEIGHTS,
        upstream_models,
    )

    torch.manual_seed(0)
    shape = arch or CAVMAE_TINY
    state = upstream_models().CAVMAESync(**{**RELEASED, **shape}).state_dict()
    dest = _files(root, "enc-cavmae-sync")
    torch.save({f"module.{k}": v for k, v in state.items() if k.startswith(keep)},
               dest / WEIGHTS)
    (dest / ARCH_FILE).write_text(json.dumps(shape))
    return Path(root)


def _tiny_gpt2(dest: Path) -> None:
    """GPT-2 as ``openai-community/gpt2`` lays it out (no special_tokens_map.json), one layer."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2Model, GPT2TokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel()
    tk.train_from_iterator(["a dog barks", "speech in a room", "rain on a roof"],
                           trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"]))
    GPT2TokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>",
                      bos_token="<|endoftext|>").save_pretrained(dest)
    (dest / "special_tokens_map.json").unlink()
    torch.manual_seed(0)
    GPT2Model(GPT2Config(n_embd=768, n_layer=1, n_head=12, vocab_size=300,
                         n_positions=128)).save_pretrained(dest)


def _tiny_bert(dest: Path) -> None:
    """BERT as ``google-bert/bert-base-uncased`` lays it out (a WordPiece vocab.txt), its
    hidden size (768, msclap 2022's ``transformer_embed_dim``) but one layer."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "dog", "barks", "rain",
             "on", "roof", "speech", "in", "room"]
    vocab = dest / "vocab.txt"
    vocab.write_text("\n".join(words) + "\n")
    BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True).save_pretrained(dest)
    (dest / "special_tokens_map.json").unlink(missing_ok=True)
    torch.manual_seed(0)
    BertModel(BertConfig(hidden_size=768, num_hidden_layers=1, num_attention_heads=12,
                         intermediate_size=256, vocab_size=len(words),
                         max_position_embeddings=128)).save_pretrained(dest)


@tiny_layout({"microsoft/msclap": ("CLAP_weights_2022.pth",),
              "google-bert/bert-base-uncased": ("config.json", "model.safetensors",
                                                "tokenizer.json", "tokenizer_config.json",
                                                "vocab.txt")})
def msclap(root: str | Path, audio_state: bool = True, version: str = "2022") -> Path:
    """msclap's CLAP at its released audio-encoder size (2022: CNN14; 2023: HTSAT) with a
    1-layer text tower (2022: BERT; 2023: GPT-2), saved as ``microsoft/msclap``'s
    ``CLAP_weights_<version>.pth`` (``{"model": state}``) and the text tower's snapshot.
    ``audio_state=False`` leaves the audio tower out (a broken checkpoint for the refusal
    test)."""
    import msclap as msclap_pkg
    import torch
    import yaml
    from msclap.models.clap import CLAP

    from madbench_common.models.adapters.msclap import VERSIONS, WEIGHTS_REPO

    weights_file, text_repo, _ = VERSIONS[version]
    with tempfile.TemporaryDirectory() as tmp:
        txt, ckpt = Path(tmp) / text_repo.split("/")[-1], Path(tmp) / "msclap"
        txt.mkdir()
        ckpt.mkdir()
        (_tiny_bert if version == "2022" else _tiny_gpt2)(txt)
        text = install_local_snapshot(root, text_repo, txt)
        cfg = yaml.safe_load((Path(msclap_pkg.__file__).parent / "configs" /
                              f"config_{version}.yml").read_text())
        torch.manual_seed(0)
        clap = CLAP(audioenc_name=cfg["audioenc_name"], sample_rate=cfg["sampling_rate"],
                    window_size=cfg["window_size"], hop_size=cfg["hop_size"],
                    mel_bins=cfg["mel_bins"], fmin=cfg["fmin"], fmax=cfg["fmax"],
                    classes_num=cfg["num_classes"], out_emb=cfg["out_emb"],
                    text_model=str(text), transformer_embed_dim=cfg["transformer_embed_dim"],
                    d_proj=cfg["d_proj"])
        state = {k: v for k, v in clap.state_dict().items()
                 if audio_state or not k.startswith("audio_encoder.")}
        torch.save({"model": state}, ckpt / weights_file)
        install_local_snapshot(root, WEIGHTS_REPO, ckpt)
    return Path(root)


def msclap_2023(root: str | Path) -> Path:
    """The 2023 checkpoint layout (the labelled non-paper option)."""
    return msclap(root, version="2023")


IMAGEBIND_TINY: dict[str, Any] = {
    **{f"{m}_{k}": v for m in ("vision", "audio", "text", "depth", "thermal", "imu")
       for k, v in (("embed_dim", 32), ("num_blocks", 1), ("num_heads", 2))},
    "out_embed_dim": 16}
"""One 32-wide block per modality tower, 16-d joint embeddings (the release: huge)."""


@tiny_layout({}, ("imagebind_huge.pth", TINY_ARCH_FILE))
def imagebind(root: str | Path, **arch: Any) -> Path:
    """A tiny ``ImageBindModel`` state dict as ``imagebind_huge.pth`` (what
    ``imagebind_huge(pretrained=True)`` loads) plus the tiny architecture's sidecar; with
    ``arch`` (``imagebind_huge``'s arguments, ``madbench gpu-bench``) at that size."""
    import torch

    from madbench_common.models.adapters.imagebind import (
        ARCH_FILE,
        IMAGE,
        WEIGHTS,
        import_model_module,
    )

    torch.manual_seed(0)
    shape = arch or IMAGEBIND_TINY
    model = import_model_module().ImageBindModel(**shape)
    dest = _files(root, IMAGE)
    torch.save(model.state_dict(), dest / WEIGHTS)
    (dest / ARCH_FILE).write_text(json.dumps(shape))
    return Path(root)


def aasist(root: str | Path, **model_config: Any) -> Path:
    """AASIST alone, random, as ``AASIST.pth``: at ``model_config`` (``config/AASIST.conf``'s
    ``model_config``, ``madbench gpu-bench``), else at the adapter's published one."""
    import torch
    from AASIST import Model

    from madbench_common.models.adapters.aasist import MODEL_CONFIG, WEIGHTS

    torch.manual_seed(0)
    torch.save(Model(model_config or MODEL_CONFIG).state_dict(),
               _files(root, "audio-torch") / WEIGHTS)
    return Path(root)
