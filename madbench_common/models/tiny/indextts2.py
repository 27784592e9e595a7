"""A tiny random IndexTTS2 in the release layout (``images/tts-indextts2/weights.yaml``).

Everything ``IndexTTS2(cfg_path, model_dir, aux_paths=…)`` reads, at the released names,
built from upstream's own classes with random weights (:func:`install_tiny`). Widths
upstream hard-codes are kept: w2v-BERT features are 1024 wide and the GPT latent 1280 wide
(``MyModel``'s ``gpt_layer`` is ``Linear(1280, …)``). Large tensors are stored in float16
(loaded into float32 modules); the whole is about 330 MB. Outputs are noise.
"""

from __future__ import annotations

import copy
import os
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.weights import tiny_layout

__all__ = ["CONFIG", "RELEASE_FILES", "install_tiny", "train_bpe"]

_CODES = 64
"""Semantic codebook size of the tiny (the release: 8192); mel codes are two more."""

CONFIG: dict[str, Any] = {
    "dataset": {"bpe_model": "bpe.model", "sample_rate": 24000, "squeeze": False,
                "mel": {"sample_rate": 24000, "n_fft": 1024, "hop_length": 256,
                        "win_length": 1024, "n_mels": 100, "mel_fmin": 0, "normalize": False}},
    "gpt": {"model_dim": 1280, "max_mel_tokens": 1815, "max_text_tokens": 600, "heads": 2,
            "use_mel_codes_as_input": True, "mel_length_compression": 1024, "layers": 1,
            "number_text_tokens": 0,  # set to the trained BPE model's size
            "number_mel_codes": _CODES + 2, "start_mel_token": _CODES,
            "stop_mel_token": _CODES + 1, "start_text_token": 0, "stop_text_token": 1,
            "train_solo_embeddings": False, "condition_type": "conformer_perceiver",
            "condition_module": {"output_size": 32, "linear_units": 32, "attention_heads": 2,
                                 "num_blocks": 1, "input_layer": "conv2d2",
                                 "perceiver_mult": 1},
            "emo_condition_module": {"output_size": 32, "linear_units": 32,
                                     "attention_heads": 2, "num_blocks": 1,
                                     "input_layer": "conv2d2", "perceiver_mult": 1}},
    "semantic_codec": {"codebook_size": _CODES, "hidden_size": 1024, "codebook_dim": 8,
                       "vocos_dim": 32, "vocos_intermediate_dim": 64, "vocos_num_layers": 1},
    "s2mel": {
        "preprocess_params": {"sr": 22050, "spect_params": {
            "n_fft": 1024, "win_length": 1024, "hop_length": 256, "n_mels": 80, "fmin": 0,
            "fmax": "None"}},
        "dit_type": "DiT", "reg_loss_type": "l1", "style_encoder": {"dim": 192},
        "length_regulator": {"channels": 32, "is_discrete": False, "in_channels": 1024,
                             "content_codebook_size": 2048, "sampling_ratios": [1, 1],
                             "vector_quantize": False, "n_codebooks": 1,
                             "quantizer_dropout": 0.0, "f0_condition": False,
                             "n_f0_bins": 512},
        "DiT": {"hidden_dim": 32, "num_heads": 2, "depth": 2, "class_dropout_prob": 0.1,
                "block_size": 8192, "in_channels": 80, "style_condition": True,
                "final_layer_type": "wavenet", "target": "mel", "content_dim": 32,
                "content_codebook_size": 1024, "content_type": "discrete",
                "f0_condition": False, "n_f0_bins": 512, "content_codebooks": 1,
                "is_causal": False, "long_skip_connection": True,
                "zero_prompt_speech_token": False, "time_as_token": False,
                "style_as_token": False, "uvit_skip_connection": True,
                "add_resblock_in_transformer": False},
        "wavenet": {"hidden_dim": 32, "num_layers": 1, "kernel_size": 5, "dilation_rate": 1,
                    "p_dropout": 0.2, "style_condition": True}},
    "gpt_checkpoint": "gpt.pth",
    "w2v_stat": "wav2vec2bert_stats.pt",
    "s2mel_checkpoint": "s2mel.pth",
    "emo_matrix": "feat2.pt",
    "spk_matrix": "feat1.pt",
    "emo_num": [3, 17, 2, 8, 4, 5, 10, 24],
    "qwen_emo_path": "qwen0.6bemo4-merge/",
    "vocoder": {"type": "bigvgan", "name": "nvidia/bigvgan_v2_22khz_80band_256x"},
    "version": 2.0,
}
"""The release ``config.yaml``'s keys (as third-party copies of it show) at tiny widths."""

_BIGVGAN = {"resblock": "1", "upsample_rates": [8, 8, 4], "upsample_kernel_sizes": [16, 16, 8],
            "upsample_initial_channel": 32, "resblock_kernel_sizes": [3],
            "resblock_dilation_sizes": [[1, 3]], "activation": "snakebeta",
            "snake_logscale": True, "use_tanh_at_final": False, "use_bias_at_final": False,
            "num_mels": 80, "n_fft": 1024, "hop_size": 256, "win_size": 1024,
            "sampling_rate": 22050, "fmin": 0, "fmax": None}

RELEASE_FILES: dict[str, tuple[str, ...]] = {
    "IndexTeam/IndexTTS-2": ("config.yaml", "gpt.pth", "s2mel.pth", "bpe.model",
                             "wav2vec2bert_stats.pt", "feat1.pt", "feat2.pt"),
    "facebook/w2v-bert-2.0": ("config.json", "model.safetensors", "preprocessor_config.json"),
    "amphion/MaskGCT": ("semantic_codec/model.safetensors",),
    "funasr/campplus": ("campplus_cn_common.bin",),
    "nvidia/bigvgan_v2_22khz_80band_256x": ("config.json", "bigvgan_generator.pt"),
}
"""What :func:`install_tiny` writes, per hub repository (checked against weights.yaml)."""

_CORPUS = (
    "IS IN USE. I'M SORRY, THAT NUMBER IS NOT VALID.",
    "I AM SORRY, THAT IS NOT A VALID EXTENSION. PLEASE TRY AGAIN.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG, AND THE FIVE BOXING WIZARDS JUMP QUICKLY!",
    "WHAT IS THE TIME? IT IS TWENTY THREE MINUTES PAST SEVEN - OR SO THEY SAY.",
    "PACK MY BOX WITH FIVE DOZEN LIQUOR JUGS; HOW VEXINGLY QUICK DAFT ZEBRAS JUMP.",
    "你 好 世 界 , 今 天 天 气 很 好 .",
)


def train_bpe(path: Path, texts: tuple[str, ...] = _CORPUS, vocab_size: int = 160) -> int:
    """Train a SentencePiece BPE model on ``texts`` (ids: ``<s>`` 0, ``</s>`` 1, ``<unk>`` 2,
    as upstream's ``TextTokenizer`` and ``start/stop_text_token`` expect); return its size."""
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(texts * 4) + "\n", encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(corpus), model_prefix=str(Path(tmp) / "bpe"), model_type="bpe",
            vocab_size=vocab_size, character_coverage=1.0, bos_id=0, eos_id=1, unk_id=2,
            pad_id=-1, hard_vocab_limit=False, minloglevel=2)
        data = (Path(tmp) / "bpe.model").read_bytes()
    path.write_bytes(data)
    return int(spm.SentencePieceProcessor(model_file=str(path)).get_piece_size())


def _half(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v.half() if v.is_floating_point() else v for k, v in state.items()}


@tiny_layout(RELEASE_FILES)
def install_tiny(root: str | os.PathLike[str], seed: int = 0) -> dict[str, Path]:
    """Write the tiny IndexTTS2 under the weights root ``root``; return each repo's snapshot.

    * ``IndexTeam/IndexTTS-2``: ``config.yaml`` (the release's keys and structure, small
      widths: see :data:`CONFIG`), ``gpt.pth`` (``UnifiedVoice``), ``s2mel.pth``
      (``MyModel`` as ``{"net": {module: state}}``), ``bpe.model`` (:func:`train_bpe`, on
      upper-case English, as ``TextTokenizer`` sees text), ``wav2vec2bert_stats.pt``,
      ``feat1.pt`` / ``feat2.pt`` (speaker / emotion matrices, ``sum(emo_num)`` rows);
    * ``facebook/w2v-bert-2.0``: a ``Wav2Vec2BertModel`` with the release's 1024 wide
      hidden states (upstream wires 1024 into its conditioners) and the 17 layers
      ``get_emb`` reads (``hidden_states[17]``), with narrow feed-forward and one
      attention head;
    * ``amphion/MaskGCT``: ``semantic_codec/model.safetensors`` (``RepCodec``);
    * ``funasr/campplus``: ``campplus_cn_common.bin`` (``CAMPPlus(80, 192)``, upstream's
      fixed size, 7 M parameters);
    * ``nvidia/bigvgan_v2_22khz_80band_256x``: ``config.json`` + ``bigvgan_generator.pt``.
    """
    with tempfile.TemporaryDirectory(prefix="madbench-indextts2-tiny-") as tmp:
        return _install(Path(root), Path(tmp), seed)


def _install(root: Path, work: Path, seed: int) -> dict[str, Path]:
    import safetensors.torch
    import torch
    import yaml
    from indextts.gpt.model_v2 import UnifiedVoice
    from indextts.s2mel.modules.bigvgan.bigvgan import BigVGAN
    from indextts.s2mel.modules.bigvgan.env import AttrDict
    from indextts.s2mel.modules.campplus.DTDNN import CAMPPlus
    from indextts.s2mel.modules.commons import MyModel
    from indextts.utils.maskgct.models.codec.kmeans.repcodec_model import RepCodec
    from omegaconf import OmegaConf
    from transformers import (
        SeamlessM4TFeatureExtractor,
        Wav2Vec2BertConfig,
        Wav2Vec2BertModel,
    )

    from madbench_common.models.weights import install_local_snapshot

    torch.manual_seed(seed)
    main = work / "IndexTTS-2"
    main.mkdir()
    cfg = copy.deepcopy(CONFIG)
    cfg["gpt"]["number_text_tokens"] = train_bpe(main / "bpe.model")
    (main / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    conf = OmegaConf.create(cfg)
    gpt = UnifiedVoice(**conf.gpt)
    torch.save({"model": _half(gpt.state_dict())}, main / "gpt.pth")
    s2mel = MyModel(conf.s2mel, use_gpt_latent=True)
    torch.save({"net": {k: m.state_dict() for k, m in s2mel.models.items()}},
               main / "s2mel.pth")
    torch.save({"mean": torch.randn(1024) * 0.1, "var": 1.0 + torch.rand(1024)},
               main / "wav2vec2bert_stats.pt")
    rows = sum(cfg["emo_num"])
    torch.save(torch.randn(rows, 192), main / "feat1.pt")  # speaker matrix (CAM++ style)
    torch.save(torch.randn(rows, cfg["gpt"]["model_dim"]), main / "feat2.pt")  # emotion
    snaps = {"IndexTeam/IndexTTS-2": install_local_snapshot(root, "IndexTeam/IndexTTS-2", main)}

    w2v = work / "w2v-bert-2.0"
    Wav2Vec2BertModel(Wav2Vec2BertConfig(
        hidden_size=1024, num_hidden_layers=17, num_attention_heads=1, intermediate_size=8,
        conv_depthwise_kernel_size=3, feature_projection_input_dim=160, add_adapter=False,
        vocab_size=None)).half().save_pretrained(w2v)
    SeamlessM4TFeatureExtractor().save_pretrained(w2v)
    snaps["facebook/w2v-bert-2.0"] = install_local_snapshot(root, "facebook/w2v-bert-2.0", w2v)

    codec = work / "MaskGCT"
    (codec / "semantic_codec").mkdir(parents=True)
    safetensors.torch.save_model(RepCodec(cfg=conf.semantic_codec),
                                 str(codec / "semantic_codec" / "model.safetensors"))
    snaps["amphion/MaskGCT"] = install_local_snapshot(root, "amphion/MaskGCT", codec)

    camp = work / "campplus"
    camp.mkdir()
    torch.save(CAMPPlus(feat_dim=80, embedding_size=192).state_dict(),
               camp / "campplus_cn_common.bin")
    snaps["funasr/campplus"] = install_local_snapshot(root, "funasr/campplus", camp)

    vocoder = work / "bigvgan"
    BigVGAN(AttrDict(dict(_BIGVGAN))).save_pretrained(vocoder)
    (vocoder / "README.md").unlink(missing_ok=True)  # the hub mixin's model card: not fetched
    snaps["nvidia/bigvgan_v2_22khz_80band_256x"] = install_local_snapshot(
        root, "nvidia/bigvgan_v2_22khz_80band_256x", vocoder)
    return snaps
