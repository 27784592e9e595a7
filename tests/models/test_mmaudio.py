"""MMAudio adapter on a tiny random MMAudio in the release layout
(``make adapter-test IMAGE=v2a-mmaudio``).

:func:`madbench_common.models.tiny.mmaudio.install_tiny` writes the network, the DFN5B
CLIP (open_clip config + weights), BigVGAN v2, the VAE and the Synchformer where the
released files go; the adapter loads them through upstream's own code (``load_weights``,
the ``FeaturesUtils`` constructor, open_clip ``hf-hub:``, ``BigVGAN.from_pretrained``)
under ``HF_HUB_OFFLINE=1``, then runs upstream's frame transforms, conditioning, Euler
flow matching, VAE decode and vocoding on CPU.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mmaudio", reason="run make adapter-test IMAGE=v2a-mmaudio")

import torch

from madbench_common.models.adapters.mmaudio import MMAudioV2A
from madbench_common.models.weights import WeightsMissing, hf_path, url_file
from tests.models.device import DEVICE
from tests.models.envdata import demo_frames


@pytest.fixture(scope="module")
def model() -> MMAudioV2A:
    from madbench_common.models.tiny.mmaudio import install_tiny

    # open_clip and BigVGAN read the hub cache HF_HOME names (adapter-test.sh: the weights
    # root), so the tiny goes into that root.
    install_tiny(os.environ["MADBENCH_WEIGHTS"])
    return MMAudioV2A(device=DEVICE, steps=3)


def test_every_part_is_read_from_its_release_file(model: MMAudioV2A) -> None:
    """The loaded modules hold the files' tensors: upstream's loaders read each of them."""
    net, features, _ = model._load()
    image = "v2a-mmaudio"
    saved = torch.load(hf_path("hkchengrex/MMAudio", image=image,
                               filename="weights/mmaudio_large_44k_v2.pth"), weights_only=True)
    common = [k for k in net.state_dict() if k in saved]
    assert len(common) > 50 and all(torch.equal(net.state_dict()[k], saved[k]) for k in common)
    clip = torch.load(hf_path("apple/DFN5B-CLIP-ViT-H-14-384", image=image,
                              filename="open_clip_pytorch_model.bin"), weights_only=True)
    assert torch.equal(features.clip_model.state_dict()["token_embedding.weight"],
                       clip["token_embedding.weight"])
    sync = torch.load(url_file("synchformer_state_dict.pth", image=image), weights_only=True)
    assert all(torch.equal(v, sync[k]) for k, v in features.synchformer.state_dict().items())
    vocoder = torch.load(hf_path("nvidia/bigvgan_v2_44khz_128band_512x", image=image,
                                 filename="bigvgan_generator.pt"), weights_only=True)
    assert torch.equal(features.tod.vocoder.state_dict()["conv_pre.bias"],
                       vocoder["generator"]["conv_pre.bias"])
    from mmaudio.ext.autoencoder.vae import VAE

    from madbench_common.models.tiny.mmaudio import ARCH

    vae = VAE(**ARCH["vae"])  # the file, loaded and de-normed the way AutoEncoderModule does
    vae.load_state_dict(torch.load(url_file("v1-44.pth", image=image), weights_only=True))
    vae.remove_weight_norm()
    loaded = features.tod.vae.state_dict()
    assert loaded and all(torch.equal(v, vae.state_dict()[k]) for k, v in loaded.items())
    assert type(features.synchformer).__name__ == "Synchformer"
    assert not hasattr(features.tod.vae, "encoder")  # need_vae_encoder=False, as upstream


@pytest.fixture(scope="module")
def video() -> tuple[np.ndarray, float]:
    return demo_frames("demo_006", fps=25.0, size=96, max_frames=40)


def test_missing_weights_name_the_fetch_command(tmp_path: Path) -> None:
    frames, fps = demo_frames(max_frames=2)
    with pytest.raises(WeightsMissing, match="--image v2a-mmaudio"):
        MMAudioV2A(root=str(tmp_path)).generate(sample_rate=16000, duration=1.0, prompt="x",
                                               frames=frames, fps=fps)


def test_frames_go_on_mmaudio_grids(model: MMAudioV2A, video: tuple[np.ndarray, float]) -> None:
    clip, sync = model.condition_frames(*video, duration=1.3)
    assert tuple(clip.shape) == (1, 10, 3, 384, 384) and tuple(sync.shape) == (1, 32, 3, 224, 224)
    assert float(clip.min()) >= 0.0 and float(clip.max()) <= 1.0
    assert -1.0 <= float(sync.min()) < 0.0 < float(sync.max()) <= 1.0
    short = model.condition_frames(video[0][:5], video[1], duration=1.3)  # video too short
    tail = short[1][0, -10:]  # the demo is 12 fps: 5 frames last 0.42 s, then the last repeats
    assert short[1].shape[1] == 32 and bool((tail == tail[:1]).all())


@pytest.mark.parametrize("rate", [16000, 44100])
def test_generates_exactly_the_clip(model: MMAudioV2A, video: tuple[np.ndarray, float],
                                    rate: int) -> None:
    audio = model.generate(sample_rate=rate, duration=1.3, prompt="birds in a forest",
                           negative_prompt="wind", frames=video[0], fps=video[1], seed=5)
    assert audio.shape == (round(1.3 * rate),) and audio.dtype == np.float32
    assert np.isfinite(audio).all()
    s = model.last_settings
    assert (s["native_rate"], s["sampler"], s["steps"], s["cfg_strength"]) == (
        44100, "euler", 3, 4.5)
    assert s["fit"] in {"exact", "trim"} and s["negative_prompt"].startswith("wind, speech")
    assert (s["clip_frames"], s["sync_frames"]) == (10, 32)


def test_sampling_is_seeded_and_follows_the_video(model: MMAudioV2A,
                                                  video: tuple[np.ndarray, float]) -> None:
    kw = {"sample_rate": 16000, "duration": 1.0, "prompt": "rain", "fps": video[1]}
    a = model.generate(frames=video[0], seed=1, **kw)
    b = model.generate(frames=video[0], seed=1, **kw)
    c = model.generate(frames=video[0], seed=2, **kw)
    other, _ = demo_frames("demo_015", fps=25.0, size=96, max_frames=40)
    d = model.generate(frames=other, seed=1, **kw)
    assert np.array_equal(a, b) and not np.array_equal(a, c) and not np.allclose(a, d)
