"""A tiny random AudioLDM2 pipeline in the layout of ``cvssp/audioldm2`` (tests, image test).

Dimensions follow diffusers' own AudioLDM2 pipeline test (``get_dummy_components``),
except the vocoder, whose upsampling (10 × 16 = 160) matches the real hop so the
SDEdit mel has the real frame rate. The language model is saved as a plain
``GPT2Model``, as the real checkpoints are (the diffusers#12630 trap). Tokenizers are
built offline (:mod:`madbench_common.models.tiny.vocab`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.tiny.vocab import (
    bpe_vocab,
    sentencepiece_model,
    unigram_pieces,
    write_bpe_files,
)
from madbench_common.models.weights import install_local_snapshot, tiny_layout

__all__ = ["build_pipeline", "install_tiny"]

REPO = "cvssp/audioldm2"


def _tokenizers() -> tuple[Any, Any]:
    from transformers import RobertaTokenizer, T5Tokenizer

    vocab, merges = bpe_vocab(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    roberta = RobertaTokenizer(vocab=vocab, merges=merges, model_max_length=77)
    t5 = T5Tokenizer(vocab=unigram_pieces(), extra_ids=0, model_max_length=77)
    return roberta, t5


def _text_encoder() -> Any:
    from transformers import ClapAudioConfig, ClapConfig, ClapModel, ClapTextConfig

    text = ClapTextConfig(bos_token_id=0, eos_token_id=2, hidden_size=8, intermediate_size=37,
                          layer_norm_eps=1e-05, num_attention_heads=1, num_hidden_layers=1,
                          pad_token_id=1, vocab_size=300, projection_dim=8)
    audio = ClapAudioConfig(spec_size=8, window_size=4, num_mel_bins=8, intermediate_size=37,
                            layer_norm_eps=1e-05, depths=[1, 1], num_attention_heads=[1, 1],
                            num_hidden_layers=1, hidden_size=192, projection_dim=8, patch_size=2,
                            patch_stride=2, patch_embed_input_channels=4)
    return ClapModel(ClapConfig(text_config=text.to_dict(), audio_config=audio.to_dict(),
                                projection_dim=16))


def build_pipeline(language_model_cls: str = "GPT2Model") -> Any:
    """The tiny pipeline (``language_model_cls``: ``GPT2Model`` as on the hub, or the fix)."""
    import torch
    import transformers
    from diffusers import (
        AudioLDM2Pipeline,
        AudioLDM2ProjectionModel,
        AudioLDM2UNet2DConditionModel,
        AutoencoderKL,
        DDIMScheduler,
    )
    from transformers import (
        ClapFeatureExtractor,
        GPT2Config,
        SpeechT5HifiGan,
        SpeechT5HifiGanConfig,
        T5Config,
        T5EncoderModel,
    )

    torch.manual_seed(0)
    unet = AudioLDM2UNet2DConditionModel(
        block_out_channels=(8, 16), layers_per_block=1, norm_num_groups=8, sample_size=32,
        in_channels=4, out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=(8, 16))
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                              clip_sample=False, set_alpha_to_one=False)
    vae = AutoencoderKL(block_out_channels=[8, 16], in_channels=1, out_channels=1,
                        norm_num_groups=8, down_block_types=["DownEncoderBlock2D"] * 2,
                        up_block_types=["UpDecoderBlock2D"] * 2, latent_channels=4)
    tokenizer, tokenizer_2 = _tokenizers()
    text_encoder_2 = T5EncoderModel(T5Config(vocab_size=len(tokenizer_2), d_model=32, d_ff=37,
                                             d_kv=8, num_heads=2, num_layers=2))
    lm_cls = getattr(transformers, language_model_cls)
    language_model = lm_cls(GPT2Config(n_embd=16, n_head=2, n_layer=2, vocab_size=300,
                                       n_ctx=99, n_positions=99))
    language_model.config.max_new_tokens = 8
    projection = AudioLDM2ProjectionModel(text_encoder_dim=16, text_encoder_1_dim=32,
                                          langauge_model_dim=16)
    vocoder = SpeechT5HifiGan(SpeechT5HifiGanConfig(
        model_in_dim=8, sampling_rate=16000, upsample_initial_channel=16,
        upsample_rates=[10, 16], upsample_kernel_sizes=[20, 32], resblock_kernel_sizes=[3, 7],
        resblock_dilation_sizes=[[1, 3, 5], [1, 3, 5]], normalize_before=False))
    return AudioLDM2Pipeline(
        vae=vae, text_encoder=_text_encoder(), text_encoder_2=text_encoder_2,
        projection_model=projection, language_model=language_model, tokenizer=tokenizer,
        tokenizer_2=tokenizer_2, feature_extractor=ClapFeatureExtractor(feature_size=64,
                                                                          hop_length=7900),
        unet=unet, scheduler=scheduler, vocoder=vocoder)


RELEASE_FILES = (
    "model_index.json", "feature_extractor/preprocessor_config.json",
    "scheduler/scheduler_config.json",
    *(f"{c}/config.json" for c in ("language_model", "projection_model", "text_encoder",
                                   "text_encoder_2", "unet", "vae", "vocoder")),
    *(f"{c}/model.safetensors" for c in ("language_model", "text_encoder", "text_encoder_2",
                                         "vocoder")),
    *(f"{c}/diffusion_pytorch_model.safetensors" for c in ("projection_model", "unet", "vae")),
    *(f"tokenizer/{n}" for n in ("merges.txt", "special_tokens_map.json", "tokenizer.json",
                                 "tokenizer_config.json", "vocab.json")),
    *(f"tokenizer_2/{n}" for n in ("special_tokens_map.json", "spiece.model", "tokenizer.json",
                                   "tokenizer_config.json")))
"""``cvssp/audioldm2``'s files (hub file pages), less the ``.bin`` twins of the weights."""


@tiny_layout({REPO: RELEASE_FILES})
def install_tiny(weights_root: str | Path) -> Path:
    """Save the tiny pipeline and lay it out as the cached snapshot of ``cvssp/audioldm2``,
    with the release's tokenizer files (Roberta: vocab/merges/tokenizer.json; T5:
    spiece.model/tokenizer.json)."""
    import json

    pipe = build_pipeline("GPT2Model")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        pipe.save_pretrained(tmp)
        for sub, tok in (("tokenizer", pipe.tokenizer), ("tokenizer_2", pipe.tokenizer_2)):
            special = folder / sub / "special_tokens_map.json"
            if not special.exists():
                special.write_text(json.dumps(
                    {k: v for k, v in tok.special_tokens_map.items() if v}))
        if not (folder / "tokenizer" / "vocab.json").exists():
            write_bpe_files(folder / "tokenizer", *bpe_vocab(["<s>", "<pad>", "</s>", "<unk>",
                                                              "<mask>"]))
        if not (folder / "tokenizer_2" / "spiece.model").exists():
            sentencepiece_model(folder / "tokenizer_2" / "spiece.model")
        for sub in ("tokenizer", "tokenizer_2"):
            if not (folder / sub / "tokenizer.json").exists():
                getattr(pipe, sub).backend_tokenizer.save(str(folder / sub / "tokenizer.json"))
        for path in [p for p in folder.rglob("*") if p.is_file()]:
            if path.relative_to(folder).as_posix() not in RELEASE_FILES:
                path.unlink()
        return install_local_snapshot(weights_root, REPO, tmp)
