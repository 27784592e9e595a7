"""A tiny random MMAudio ``large_44k_v2`` in the release layout (v2a-mmaudio weights.yaml).

Every file :class:`~madbench_common.models.adapters.mmaudio.MMAudioV2A` loads, at its
released name (:func:`install_tiny`), built from upstream's classes with random weights and
read back by upstream's own loaders. Upstream fixes three sizes in code (the named network,
``get_my_vae('44k')``, the Synchformer's MotionFormer YAML), so the network's folder also
holds ``madbench_arch.json`` (:data:`~madbench_common.models.weights.TINY_ARCH_FILE`, never
in a release) with the tiny widths, which the adapter hands to those constructors. Outputs
are noise.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.weights import TINY_ARCH_FILE, install_local_snapshot, tiny_layout

__all__ = ["ARCH", "install_tiny"]

_LATENT, _CLIP, _TEXT, _SYNC = 8, 16, 32, 16
ARCH: dict[str, Any] = {
    "net": {"latent_dim": _LATENT, "clip_dim": _CLIP, "sync_dim": _SYNC, "text_dim": _TEXT,
            "hidden_dim": 32, "depth": 2, "fused_depth": 1, "num_heads": 2,
            "latent_seq_len": 44, "clip_seq_len": 8, "sync_seq_len": 16, "v2": True},
    "vae": {"data_dim": 128, "embed_dim": _LATENT, "hidden_dim": 8},
    "synchformer_vit": {"EMBED_DIM": _SYNC, "DEPTH": 1, "NUM_HEADS": 2, "MLP_RATIO": 1},
}
"""The tiny widths (``madbench_arch.json``): MMAudio(**net), VAE(**vae), MotionFormer VIT."""

_CLIP_CFG: dict[str, Any] = {
    "model_cfg": {"embed_dim": _CLIP,
                  "vision_cfg": {"image_size": 384, "layers": 1, "width": 32, "head_width": 16,
                                 "patch_size": 32},
                  "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": _TEXT,
                               "heads": 2, "layers": 1}},
    "preprocess_cfg": {"mean": [0.48145466, 0.4578275, 0.40821073],
                       "std": [0.26862954, 0.26130258, 0.27577711], "interpolation": "bicubic",
                       "resize_mode": "squash"},
}
_BIGVGAN = {"resblock": "1", "num_mels": 128, "upsample_rates": [8, 8, 8],
            "upsample_kernel_sizes": [16, 16, 16], "upsample_initial_channel": 16,
            "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3, 5]],
            "activation": "snakebeta", "snake_logscale": True, "use_tanh_at_final": False,
            "use_bias_at_final": False, "sampling_rate": 44100, "n_fft": 2048, "hop_size": 512,
            "win_size": 2048, "fmin": 0, "fmax": None}

_HUB = {"hkchengrex/MMAudio": ("weights/mmaudio_large_44k_v2.pth", f"weights/{TINY_ARCH_FILE}"),
        "apple/DFN5B-CLIP-ViT-H-14-384": ("open_clip_config.json",
                                          "open_clip_pytorch_model.bin"),
        "nvidia/bigvgan_v2_44khz_128band_512x": ("config.json", "bigvgan_generator.pt")}
_URLS = ("v1-44.pth", "synchformer_state_dict.pth")


@tiny_layout(_HUB, _URLS)
def install_tiny(root: str | os.PathLike[str], seed: int = 0) -> None:
    """Write the tiny MMAudio under the weights root ``root``.

    * ``hkchengrex/MMAudio`` ``weights/mmaudio_large_44k_v2.pth``: the network state dict;
    * ``apple/DFN5B-CLIP-ViT-H-14-384``: ``open_clip_config.json`` (a tiny ``model_cfg``;
      the text tower keeps CLIP's 49408-token vocabulary, which upstream's bundled
      tokenizer emits) and ``open_clip_pytorch_model.bin``;
    * ``nvidia/bigvgan_v2_44khz_128band_512x``: ``config.json`` + ``bigvgan_generator.pt``;
    * ``files/v2a-mmaudio/v1-44.pth`` (VAE state dict, weight-normed as released) and
      ``synchformer_state_dict.pth`` (``vfeat_extractor.*``), MMAudio's GitHub release
      files.
    """
    with tempfile.TemporaryDirectory(prefix="madbench-mmaudio-tiny-") as tmp:
        _install(Path(root), Path(tmp), seed)


def _install(root: Path, work: Path, seed: int) -> None:
    import open_clip
    import torch
    from mmaudio.ext.autoencoder.vae import VAE
    from mmaudio.ext.bigvgan_v2.bigvgan import BigVGAN
    from mmaudio.ext.bigvgan_v2.env import AttrDict
    from mmaudio.ext.synchformer import Synchformer
    from mmaudio.model.networks import MMAudio

    from madbench_common.models.adapters.mmaudio import upstream_sizes

    torch.manual_seed(seed)
    net = MMAudio(**ARCH["net"], latent_mean=torch.zeros(_LATENT),
                  latent_std=torch.ones(_LATENT))
    with torch.no_grad():  # DiT-style zero init would make a fresh net ignore its conditions
        for p in net.parameters():
            if p.requires_grad and not p.any():
                p.normal_(0.0, 0.05)
    (work / "mmaudio" / "weights").mkdir(parents=True)
    torch.save(net.state_dict(), work / "mmaudio" / "weights" / "mmaudio_large_44k_v2.pth")
    (work / "mmaudio" / "weights" / TINY_ARCH_FILE).write_text(json.dumps(ARCH, indent=1))
    install_local_snapshot(root, "hkchengrex/MMAudio", work / "mmaudio")

    clip = work / "clip"
    clip.mkdir()
    (clip / "open_clip_config.json").write_text(json.dumps(_CLIP_CFG, indent=1))
    model = open_clip.model.CLIP(**_CLIP_CFG["model_cfg"])
    torch.save(model.state_dict(), clip / "open_clip_pytorch_model.bin")
    install_local_snapshot(root, "apple/DFN5B-CLIP-ViT-H-14-384", clip)

    vocoder = work / "bigvgan"
    BigVGAN(AttrDict(dict(_BIGVGAN))).save_pretrained(vocoder)
    (vocoder / "README.md").unlink(missing_ok=True)  # the hub mixin's model card: not fetched
    install_local_snapshot(root, "nvidia/bigvgan_v2_44khz_128band_512x", vocoder)

    files = root / "files" / "v2a-mmaudio"
    files.mkdir(parents=True, exist_ok=True)
    torch.save(VAE(**ARCH["vae"]).state_dict(), files / "v1-44.pth")
    with upstream_sizes(ARCH):
        torch.save(Synchformer().state_dict(), files / "synchformer_state_dict.pth")
