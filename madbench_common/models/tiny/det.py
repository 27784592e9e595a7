"""Tiny randomly initialised checkpoints of four detectors in the real layout.

The companion of :mod:`madbench_common.models.tiny.eval` for XLSR-Mamba, AVH-Align,
AV Anomaly and BA-TFD+: ``make image-test`` calls these inside a built image
(``image_test.weights`` in ``image.yaml``) as ``function(weights_root)``, and the adapter
tests call them too. Each builds the model from the upstream classes at a reduced size
with random weights and writes it in the released file layout where the adapter's real
loading code looks. Nothing here is a trained model; nothing is downloaded.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from madbench_common.models.weights import TINY_ARCH_FILE, install_local_snapshot, tiny_layout

__all__ = ["AVHUBERT_TINY", "BATFD_TINY", "XLSR_MAMBA_TINY", "av_anomaly", "avh_align", "batfd",
           "hf_to_fairseq", "xlsr_mamba"]

XLSR_MAMBA_TINY: dict[str, Any] = {
    "emb_size": 16, "num_encoders": 2,
    "xlsr": {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
             "intermediate_size": 64, "conv_dim": [16, 16, 16], "conv_stride": [5, 8, 8],
             "conv_kernel": [10, 8, 8], "num_conv_pos_embeddings": 16,
             "num_conv_pos_embedding_groups": 2},
}
"""One Mamba block per column, a 1-layer XLS-R with a 320-sample total stride."""
_INVERSE = [
    (r"^feature_extractor\.conv_layers\.(\d+)\.conv\.", r"feature_extractor.conv_layers.\1.0."),
    (r"^feature_extractor\.conv_layers\.(\d+)\.layer_norm\.",
     r"feature_extractor.conv_layers.\1.2.1."),
    (r"^feature_projection\.layer_norm\.", "layer_norm."),
    (r"^feature_projection\.projection\.", "post_extract_proj."),
    (r"^masked_spec_embed$", "mask_emb"),
    (r"^encoder\.pos_conv_embed\.conv\.parametrizations\.weight\.original0$",
     "encoder.pos_conv.0.weight_g"),
    (r"^encoder\.pos_conv_embed\.conv\.parametrizations\.weight\.original1$",
     "encoder.pos_conv.0.weight_v"),
    (r"^encoder\.pos_conv_embed\.conv\.", "encoder.pos_conv.0."),
    (r"^encoder\.layers\.(\d+)\.attention\.", r"encoder.layers.\1.self_attn."),
    (r"^encoder\.layers\.(\d+)\.layer_norm\.", r"encoder.layers.\1.self_attn_layer_norm."),
    (r"^encoder\.layers\.(\d+)\.feed_forward\.intermediate_dense\.", r"encoder.layers.\1.fc1."),
    (r"^encoder\.layers\.(\d+)\.feed_forward\.output_dense\.", r"encoder.layers.\1.fc2."),
]
"""transformers → fairseq names of a layer-norm-mode wav2vec 2.0 (written independently of
the adapter's forward rules; the test checks the result against fairseq's own names)."""


def hf_to_fairseq(state: dict[str, Any]) -> dict[str, Any]:
    """A transformers ``Wav2Vec2Model`` state dict under fairseq ``Wav2Vec2Model`` names."""
    out = {}
    for key, value in state.items():
        new = key
        for pattern, repl in _INVERSE:
            new, n = re.subn(pattern, repl, new)
            if n:
                break
        out[new] = value
    return out


@tiny_layout({"AustinXiao/XLSR-Mamba-LA": ("model.safetensors", "config.json", TINY_ARCH_FILE)})
def xlsr_mamba(root: str | Path, keep: str = "") -> Path:
    """A tiny XLSR-Mamba ``Model`` state dict as the hub release lays it out.

    ``model.safetensors`` with ``ssl_model.model.*`` under fairseq names (plus the
    pre-training quantizer tensors the release carries), ``LL``, ``first_bn``,
    ``conformer``, and the mixin's ``config.json``; the tiny architecture goes in the
    sidecar. ``keep`` keeps only keys with that prefix (a broken checkpoint for the
    refusal test).
    """
    import torch
    from safetensors.torch import save_file

    from madbench_common.models.adapters.xlsr_mamba import (
        ARCH_FILE,
        REPO,
        WEIGHTS,
        build_modules,
        merge_arch,
    )

    torch.manual_seed(0)
    front, head = build_modules(merge_arch(XLSR_MAMBA_TINY))
    state = {f"ssl_model.model.{k}": v for k, v in hf_to_fairseq(front.state_dict()).items()}
    state |= {"ssl_model.model.quantizer.vars": torch.zeros(1, 4, 8),
              "ssl_model.model.project_q.weight": torch.zeros(8, 8)}
    state |= dict(head.state_dict())
    state = {k: v.contiguous() for k, v in state.items() if k.startswith(keep)}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        save_file(state, str(src / WEIGHTS))
        (src / ARCH_FILE).write_text(json.dumps(XLSR_MAMBA_TINY))
        # the release's PytorchModelHubMixin config.json (weights.yaml fetches it; the
        # adapter reads the architecture from its own constants, never from this file)
        (src / "config.json").write_text("{}\n")
        install_local_snapshot(root, REPO, src)
    return Path(root)


@tiny_layout({}, ("sync_model.pth", "dist_regressive_model.pth",
                  "avfeature_regressive_model.pth", "pca.pkl"))
def av_anomaly(root: str | Path) -> Path:
    """AV Anomaly's four files at the published sizes (random weights, a PCA of noise).

    ``sync_model.pth`` is ``detect.py``'s ``network`` state dict (``vis_enc``, ``aud_enc``,
    ``transformer``); the two AR state dicts; ``pca.pkl`` a scaler + PCA pipeline to 31
    dims, as the release.
    """
    import pickle

    import numpy as np
    import torch
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from madbench_common.models.adapters.av_anomaly import FILES, IMAGE, SHIFTS, build_models

    torch.manual_seed(0)
    nets = build_models()
    with torch.no_grad():  # raw 0-255 frames: keep the random video encoder's scale sane
        nets["vis_enc"].conv1.weight /= 255.0
    dest = Path(root) / "files" / IMAGE
    dest.mkdir(parents=True, exist_ok=True)
    sync = {f"{part}.{k}": v for part, name in (("vis_enc", "vis_enc"), ("aud_enc", "aud_enc"),
                                                ("transformer", "sync"))
            for k, v in nets[name].state_dict().items()}
    torch.save(sync, dest / FILES["sync"])
    torch.save(nets["dist"].state_dict(), dest / FILES["dist"])
    torch.save(nets["avfeature_reg"].state_dict(), dest / FILES["avfeature"])
    pca = make_pipeline(StandardScaler(), PCA(n_components=SHIFTS))
    pca.fit(np.random.default_rng(0).normal(size=(64, 1024)))
    (dest / FILES["pca"]).write_bytes(pickle.dumps(pca))
    return Path(root)


BATFD_TINY: dict[str, Any] = {
    "v_encoder": "c3d", "a_encoder": "cnn", "ve_features": (4, 4, 4, 4),
    "ae_features": (4, 4, 4), "v_cla_feature_in": 16, "a_cla_feature_in": 16,
    "boundary_features": (8, 4), "boundary_samples": 2, "temporal_dim": 512,
    "max_duration": 10, "cbg_feature_weight": 0.0,
}
"""``BatfdPlus`` with the C3D/CNN encoders at 4 channels (the release uses MViTv2-B and
ViT-B); the 512-frame temporal dimension the data layout fixes is kept."""


@tiny_layout({}, ("batfd_plus_default.ckpt",))
def batfd(root: str | Path, **overrides: Any) -> Path:
    """A tiny ``BatfdPlus`` saved as a pytorch_lightning checkpoint (the release's file name)."""
    import pytorch_lightning
    import torch

    from madbench_common.models.adapters.batfd import IMAGE, WEIGHTS, upstream_class

    torch.manual_seed(0)
    model = upstream_class()(**{**BATFD_TINY, **overrides})
    dest = Path(root) / "files" / IMAGE
    dest.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": model.state_dict(), "hyper_parameters": dict(model.hparams),
                "pytorch-lightning_version": pytorch_lightning.__version__, "epoch": 0,
                "global_step": 0}, dest / WEIGHTS)
    return Path(root)


AVHUBERT_TINY: dict[str, Any] = {
    "encoder_layers": 1, "encoder_embed_dim": 1024, "encoder_ffn_embed_dim": 256,
    "encoder_attention_heads": 4, "audio_feat_dim": 104, "final_dim": 16,
    "modality_fuse": "concat", "conv_pos": 16, "conv_pos_groups": 4,
}
"""One transformer layer at AV-HuBERT Large's width (1,024, what ``FusionModel`` reads); the
ResNet-18 lip encoder has a fixed size."""


@tiny_layout({}, ("self_large_vox_433h.pt", "AVH-Align_AV1M.pt"))
def avh_align(root: str | Path, task_state: bool = True) -> Path:
    """A tiny AV-HuBERT checkpoint in fairseq's layout (``cfg``, ``model``, ``task_state``)
    and AVH-Align's ``FusionModel`` at its published size (``{"state_dict": …}``).

    The AV-HuBERT checkpoint is a pre-training one (no decoder; ``load_avhubert`` also
    takes the fine-tuned seq2seq release), built the way fairseq loads it: the task from
    its config, its dictionaries from the task state, the model by ``task.build_model``.
    Without ``task_state`` the dictionaries are left out, as a fine-tuned checkpoint's
    inner pre-training task has them (its label files are elsewhere).
    """
    import torch
    from omegaconf import OmegaConf

    from madbench_common.models.adapters.avh_align import AVHUBERT, FUSION, IMAGE, import_avhubert

    avhubert = import_avhubert()
    from fairseq import tasks
    from fairseq.data import Dictionary

    from madbench_common.models.adapters.avh_align import _fusion_class

    torch.manual_seed(0)
    task_cfg = OmegaConf.structured(avhubert.hubert_pretraining.AVHubertPretrainingConfig(
        data="/nonexistent", labels=["km"], label_rate=25, stack_order_audio=4))
    model_cfg = OmegaConf.structured(avhubert.hubert.AVHubertConfig(
        **AVHUBERT_TINY, label_rate=25, input_modality="image"))
    cfg = OmegaConf.create({"task": {**OmegaConf.to_container(task_cfg),
                                     "_name": "av_hubert_pretraining"},
                            "model": {**OmegaConf.to_container(model_cfg), "_name": "av_hubert"}})
    task = tasks.setup_task(cfg.task)
    task.load_state_dict({"dictionaries": [Dictionary() if task_state else None]})
    model = task.build_model(cfg.model)
    dest = Path(root) / "files" / IMAGE
    dest.mkdir(parents=True, exist_ok=True)
    state = {"task_state": task.state_dict()} if task_state else {}
    torch.save({"cfg": OmegaConf.to_container(cfg, enum_to_str=True), "model": model.state_dict(),
                **state, "extra_state": {"train_iterator": None},
                "optimizer_history": [{"criterion_name": "AVHubertCriterion",
                                       "optimizer_name": "Adam", "lr_scheduler_state": {},
                                       "num_updates": 0}]}, dest / AVHUBERT)
    torch.save({"state_dict": _fusion_class()().state_dict()}, dest / FUSION)
    return Path(root)
