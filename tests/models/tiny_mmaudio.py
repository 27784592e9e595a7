"""Tiny MMAudio parts from upstream classes (random weights) for the adapter test.

Real classes at tiny sizes: the ``MMAudio`` network, ``FeaturesUtils`` (its own
constructor, then an open_clip ``CLIP`` patched by upstream's ``patch_clip``, open_clip's
bundled tokenizer, a ``VAE`` and a BigVGAN v2 generator inside upstream's
``AutoEncoderModule``). One stand-in: Synchformer has a fixed 122 M-parameter
architecture with no size arguments (measured here: 42 s per two 16-frame segments on
this CPU), so a small 3-D convolution with Synchformer's interface — (B, S, 16, 3, 224,
224) in, (B, S, 8, D) out — takes its place. The real Synchformer runs only with the
real weights (cluster image).
"""

from __future__ import annotations

from typing import Any

LATENT, CLIP_DIM, TEXT_DIM, SYNC_DIM = 8, 16, 32, 16


def _sync_standin() -> Any:
    import torch
    from torch import nn

    class SyncStandIn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv3d(3, SYNC_DIM, kernel_size=(2, 16, 16), stride=(2, 16, 16))

        def forward(self, vis: torch.Tensor) -> torch.Tensor:
            b, s, t, c, h, w = vis.shape
            assert (t, c, h, w) == (16, 3, 224, 224)
            x = self.conv(vis.reshape(b * s, t, c, h, w).permute(0, 2, 1, 3, 4))
            return x.mean(dim=(3, 4)).permute(0, 2, 1).reshape(b, s, 8, SYNC_DIM)

    return SyncStandIn()


def _clip() -> Any:
    import open_clip
    from mmaudio.model.utils.features_utils import patch_clip

    model = open_clip.model.CLIP(
        embed_dim=CLIP_DIM,
        vision_cfg={"layers": 1, "width": 32, "head_width": 16, "patch_size": 32,
                    "image_size": 384},
        text_cfg={"context_length": 77, "vocab_size": 49408, "width": TEXT_DIM, "heads": 2,
                  "layers": 1})
    return patch_clip(model), open_clip.get_tokenizer("ViT-H-14-378-quickgelu")


def _autoencoder() -> Any:
    from mmaudio.ext.autoencoder.autoencoder import AutoEncoderModule
    from mmaudio.ext.autoencoder.vae import VAE
    from mmaudio.ext.bigvgan_v2.bigvgan import BigVGAN
    from mmaudio.ext.bigvgan_v2.env import AttrDict
    from torch import nn

    h = AttrDict({"resblock": "1", "num_mels": 128, "upsample_rates": [8, 8, 8],
                  "upsample_kernel_sizes": [16, 16, 16], "upsample_initial_channel": 16,
                  "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3, 5]],
                  "activation": "snakebeta", "snake_logscale": True,
                  "use_tanh_at_final": False, "use_bias_at_final": False})
    tod = AutoEncoderModule.__new__(AutoEncoderModule)
    nn.Module.__init__(tod)
    tod.vae = VAE(data_dim=128, embed_dim=LATENT, hidden_dim=8).eval().remove_weight_norm()
    tod.vocoder = BigVGAN(h).eval()
    tod.vocoder.remove_weight_norm()  # as AutoEncoderModule does after loading
    return tod


def build_parts() -> tuple[Any, Any, str]:
    """(network, FeaturesUtils, mode) for ``MMAudioV2A.from_parts`` (44 kHz mode)."""
    import torch
    from mmaudio.ext.mel_converter import get_mel_converter
    from mmaudio.model.networks import MMAudio
    from mmaudio.model.utils.features_utils import FeaturesUtils
    from torchvision.transforms import Normalize

    torch.manual_seed(0)
    net = MMAudio(latent_dim=LATENT, clip_dim=CLIP_DIM, sync_dim=SYNC_DIM, text_dim=TEXT_DIM,
                  hidden_dim=32, depth=2, fused_depth=1, num_heads=2, latent_seq_len=44,
                  clip_seq_len=8, sync_seq_len=16, latent_mean=torch.zeros(LATENT),
                  latent_std=torch.ones(LATENT), v2=True).eval()
    with torch.no_grad():  # DiT-style zero init would make a fresh net ignore its conditions
        for p in net.parameters():
            if p.requires_grad and not p.any():
                p.normal_(0.0, 0.05)
    features = FeaturesUtils(tod_vae_ckpt=None, enable_conditions=False, mode="44k")
    features.clip_model, features.tokenizer = _clip()
    features.clip_preprocess = Normalize(mean=[0.48145466, 0.4578275, 0.40821073],
                                         std=[0.26862954, 0.26130258, 0.27577711])
    features.synchformer = _sync_standin()
    features.mel_converter = get_mel_converter("44k")
    features.tod = _autoencoder()
    return net, features.eval(), "44k"
