"""A tiny random Vevo-Timbre in the release layout (``images/vc-vevo/weights.yaml``).

Built by Amphion's and torchaudio's own builders at small widths (:func:`install_tiny`).
Upstream takes the widths from configs in its source tree and from torchaudio's bundle,
not from the weights, so the snapshot also holds ``madbench_arch.json``
(:data:`~madbench_common.models.weights.TINY_ARCH_FILE`, never in a release): the config
overrides, the HuBERT parameters and feature statistics, which
:class:`~madbench_common.models.adapters.vevo.VevoTimbre` applies. Outputs are noise.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.weights import TINY_ARCH_FILE, install_local_snapshot, tiny_layout

__all__ = ["ARCH", "install_tiny"]

_WIDTH = 32
ARCH: dict[str, Any] = {
    "fmt": {"model": {
        "flow_matching_transformer": {"hidden_size": 32, "num_layers": 2, "num_heads": 2,
                                      "cond_dim": _WIDTH, "cond_codebook_size": 64},
        "repcodec": {"codebook_size": 64, "hidden_size": _WIDTH, "vocos_dim": 32,
                     "vocos_intermediate_dim": 64, "vocos_num_layers": 1}}},
    "vocoder": {"model": {"vocos": {"dim": 32, "intermediate_dim": 64, "num_layers": 1}}},
    "hubert": {"extractor_conv_layer_config": [[32, 10, 5]] + [[32, 3, 2]] * 4 + [[32, 2, 2]] * 2,
               "encoder_embed_dim": _WIDTH, "encoder_pos_conv_kernel": 16,
               "encoder_pos_conv_groups": 4, "encoder_num_layers": 18, "encoder_num_heads": 2,
               "encoder_ff_interm_features": 64},
}
"""Overrides of Amphion's ``Vq8192ToMels.json`` / ``Vocoder.json`` and of ``HUBERT_LARGE``'s
model parameters; ``hubert_stats`` (mean/std of the layer-18 features) is added on write."""

_PARTS = ("tokenizer/vq8192", "acoustic_modeling/Vq8192ToMels", "acoustic_modeling/Vocoder")


@tiny_layout({"amphion/Vevo": (*(f"{p}/model.safetensors" for p in _PARTS), TINY_ARCH_FILE)},
             ("hubert_fairseq_large_ll60k.pth",))
def install_tiny(root: str | os.PathLike[str], seed: int = 5) -> None:
    """Write the tiny Vevo-Timbre under the weights root ``root``.

    Amphion's own builders (``build_vqvae_model``, ``build_fmt_model``,
    ``build_vocoder_model``) make the content-style tokenizer, the flow-matching transformer
    and Vocos from Amphion's Vevo configs with small widths; each is saved as
    ``model.safetensors`` where ``amphion/Vevo`` keeps it (``tokenizer/vq8192``,
    ``acoustic_modeling/Vq8192ToMels``, ``acoustic_modeling/Vocoder``). HuBERT is
    torchaudio's ``wav2vec2_model`` with ``HUBERT_LARGE``'s parameters at small widths (18
    narrow layers: upstream reads layer 18), saved as
    ``files/vc-vevo/hubert_fairseq_large_ll60k.pth``.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    arch = {**ARCH, "hubert_stats": {
        "mean": rng.normal(size=_WIDTH).round(4).tolist(),
        "std": rng.uniform(0.5, 2.0, _WIDTH).round(4).tolist()}}
    with tempfile.TemporaryDirectory(prefix="madbench-vevo-tiny-") as tmp:
        _install(Path(root), Path(tmp), arch, seed)


def _install(root: Path, work: Path, arch: dict[str, Any], seed: int) -> None:
    import models.vc.vevo.vevo_utils as vu
    import torch
    import torchaudio
    from safetensors.torch import save_file

    from madbench_common.models.adapters.vevo import sized_configs

    torch.manual_seed(seed)
    with sized_configs(arch, work / "configs") as cfg:
        fmt_cfg, voc_cfg = cfg["fmt"], cfg["vocoder"]
        built = {"tokenizer/vq8192": vu.build_vqvae_model(fmt_cfg.model.repcodec, "cpu"),
                 "acoustic_modeling/Vq8192ToMels": vu.build_fmt_model(fmt_cfg, "cpu"),
                 "acoustic_modeling/Vocoder": vu.build_vocoder_model(voc_cfg, "cpu")}
    snap = work / "vevo"
    for sub, model in built.items():
        (snap / sub).mkdir(parents=True)
        save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                  str(snap / sub / "model.safetensors"))
    (snap / TINY_ARCH_FILE).write_text(json.dumps(arch, indent=1))
    install_local_snapshot(root, "amphion/Vevo", snap)
    bundle = torchaudio.pipelines.HUBERT_LARGE
    hubert = torchaudio.models.wav2vec2_model(**{**bundle._params, **arch["hubert"]})
    dest = root / "files" / "vc-vevo" / Path(bundle._path).name
    dest.parent.mkdir(parents=True, exist_ok=True)
    torch.save(hubert.state_dict(), dest)
