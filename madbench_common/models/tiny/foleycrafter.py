"""A tiny random FoleyCrafter in the layout of its three hub repos (tests, image test).

What each repo holds: :func:`install_tiny`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.tiny.vocab import bpe_vocab, write_bpe_files
from madbench_common.models.weights import install_local_snapshot, tiny_layout

__all__ = ["AUFFUSION", "FOLEYCRAFTER", "IP_ADAPTER", "install_tiny"]

AUFFUSION = "auffusion/auffusion-full-no-adapter"
FOLEYCRAFTER = "ymzhang319/FoleyCrafter"
IP_ADAPTER = "h94/IP-Adapter"
_CROSS, _IMAGE_EMBED = 32, 16
_VOCODER = {"resblock": "1", "num_mels": 256, "upsample_rates": [10, 16],
            "upsample_kernel_sizes": [20, 32], "upsample_initial_channel": 16,
            "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3, 5]],
            "sampling_rate": 16000}


def _unet() -> Any:
    from foleycrafter.models.auffusion_unet import UNet2DConditionModel

    return UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=32, in_channels=4,
        out_channels=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=_CROSS,
        attention_head_dim=8)


def _auffusion(folder: Path) -> Any:
    from diffusers import AutoencoderKL, PNDMScheduler
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

    unet = _unet()
    # the release's auffusion folders hold .bin weights (diffusers' pre-safetensors layout)
    unet.save_pretrained(folder / "unet", safe_serialization=False)
    AutoencoderKL(block_out_channels=[8, 8, 8, 8], in_channels=3, out_channels=3,
                  norm_num_groups=8, down_block_types=["DownEncoderBlock2D"] * 4,
                  up_block_types=["UpDecoderBlock2D"] * 4, latent_channels=4,
                  ).save_pretrained(folder / "vae", safe_serialization=False)
    PNDMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                  skip_prk_steps=True).save_pretrained(folder / "scheduler")
    write_bpe_files(folder / "tokenizer", *bpe_vocab(["<|startoftext|>", "<|endoftext|>"],
                                                     end_of_word="</w>"))
    tok = CLIPTokenizer(str(folder / "tokenizer" / "vocab.json"),
                        str(folder / "tokenizer" / "merges.txt"), model_max_length=77)
    tok.save_pretrained(folder / "tokenizer")
    CLIPTextModel(CLIPTextConfig(vocab_size=len(tok), hidden_size=_CROSS, intermediate_size=37,
                                 num_attention_heads=2, num_hidden_layers=1,
                                 max_position_embeddings=77, bos_token_id=0, eos_token_id=1,
                                 projection_dim=_CROSS),
                  ).save_pretrained(folder / "text_encoder", safe_serialization=False)
    return unet


def _ip_adapter(unet: Any) -> dict[str, dict[str, Any]]:
    """IP-adapter weights in upstream's numbering (key ids 1, 3, 5 … per cross-attention)."""
    import torch

    proj = {"proj.weight": torch.randn(_CROSS * 4, _IMAGE_EMBED) * 0.02,
            "proj.bias": torch.zeros(_CROSS * 4), "norm.weight": torch.ones(_CROSS),
            "norm.bias": torch.zeros(_CROSS)}
    layers, key = {}, 1
    for name in unet.attn_processors:
        if name.endswith("attn1.processor"):
            continue
        block = name.split(".")[0]
        if block == "mid_block":
            hidden = unet.config.block_out_channels[-1]
        elif block == "up_blocks":
            hidden = list(reversed(unet.config.block_out_channels))[int(name.split(".")[1])]
        else:
            hidden = unet.config.block_out_channels[int(name.split(".")[1])]
        for kind in ("to_k_ip", "to_v_ip"):
            layers[f"{key}.{kind}.weight"] = torch.randn(hidden, _CROSS) * 0.02
        key += 2
    return {"image_proj": proj, "ip_adapter": layers}


def _foleycrafter(folder: Path, unet: Any) -> None:
    import torch
    from diffusers import ControlNetModel
    from foleycrafter.models.time_detector.model import VideoOnsetNet
    from foleycrafter.pipelines.auffusion_pipeline import AttrDict, Generator

    controlnet = ControlNetModel.from_unet(unet, conditioning_channels=1)
    folder.mkdir(parents=True)
    torch.save({"state_dict": {f"module.{k}": v for k, v in controlnet.state_dict().items()}},
               folder / "temporal_adapter.ckpt")
    (folder / "semantic").mkdir(parents=True)
    torch.save(_ip_adapter(unet), folder / "semantic" / "semantic_adapter.bin")
    torch.save({"state_dict": VideoOnsetNet(False).state_dict(), "epoch": 0},
               folder / "timestamp_detector.pth.tar")
    (folder / "vocoder").mkdir()
    (folder / "vocoder" / "config.json").write_text(json.dumps(_VOCODER))
    torch.save({"generator": Generator(AttrDict(_VOCODER)).state_dict()},
               folder / "vocoder" / "vocoder.pt")


def _image_encoder(folder: Path) -> None:
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    CLIPVisionModelWithProjection(CLIPVisionConfig(
        hidden_size=32, intermediate_size=37, num_attention_heads=2, num_hidden_layers=1,
        image_size=224, patch_size=32, projection_dim=_IMAGE_EMBED,
    )).save_pretrained(folder / "models" / "image_encoder", safe_serialization=True)


@tiny_layout({
    FOLEYCRAFTER: ("temporal_adapter.ckpt", "semantic/semantic_adapter.bin",
                   "timestamp_detector.pth.tar", "vocoder/config.json", "vocoder/vocoder.pt"),
    AUFFUSION: ("unet/config.json", "unet/diffusion_pytorch_model.bin", "vae/config.json",
                "vae/diffusion_pytorch_model.bin", "scheduler/scheduler_config.json",
                "tokenizer/vocab.json", "tokenizer/merges.txt", "tokenizer/tokenizer_config.json",
                "tokenizer/special_tokens_map.json", "text_encoder/config.json",
                "text_encoder/pytorch_model.bin"),
    IP_ADAPTER: ("models/image_encoder/config.json", "models/image_encoder/model.safetensors")})
def install_tiny(weights_root: str | Path) -> dict[str, Path]:
    """Install the three tiny snapshots; returns repo → snapshot path.

    * ``auffusion/auffusion-full-no-adapter`` (what ``build_foleycrafter`` loads): a tiny
      VAE with Stable Diffusion's ×8 downsampling (so a 256 × 1024 spectrogram image has a
      32 × 128 latent), FoleyCrafter's own auffusion ``UNet2DConditionModel`` at widths
      32/64, a PNDM scheduler, a tiny CLIP text encoder and an offline CLIP tokenizer;
    * ``ymzhang319/FoleyCrafter``: the temporal adapter (a ControlNet made by
      ``ControlNetModel.from_unet`` of that UNet, with one conditioning channel), the
      semantic IP-adapter (``image_proj`` + one ``to_k_ip``/``to_v_ip`` pair per
      cross-attention layer, numbered as upstream's loader reads them), the onset detector
      ``VideoOnsetNet`` (a fixed R(2+1)D-18 architecture: real size, random weights) and
      the HiFi-GAN vocoder at the real hop (160 samples at 16 kHz, 256 mel bins);
    * ``h94/IP-Adapter`` ``models/image_encoder``: a tiny CLIP vision model with projection.
    """
    import torch

    torch.manual_seed(0)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        unet = _auffusion(base / "auffusion")
        _foleycrafter(base / "foleycrafter", unet)
        _image_encoder(base / "ipadapter")
        for repo, sub in ((AUFFUSION, "auffusion"), (FOLEYCRAFTER, "foleycrafter"),
                          (IP_ADAPTER, "ipadapter")):
            out[repo] = install_local_snapshot(weights_root, repo, base / sub)
    return out
