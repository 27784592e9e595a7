"""A hub model at its release's size, random, in the release layout (``madbench gpu-bench``).

The image test's tiny builder lays the snapshot out (processor, tokenizer and file names as
the release has them); the model in it is then replaced by a randomly initialised one of the
release's configuration (the card's ``arch.args.config``, read from the release's
``config.json``), written under the release's weight file name. Compute and memory do not
depend on the weights, so the adapter's own loading and inference then run at full size.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

__all__ = ["hf_full_size"]

_DERIVED = ("num_feat_extract_layers",)
"""Keys a config class computes from others (wav2vec 2.0 / WavLM: the conv layers' count),
which the tiny config.json holds at its own size."""


def hf_full_size(root: str | Path, *, tiny: str, repo: str, image: str, architecture: str,
                 config: dict[str, Any], weights: str = "pytorch_model.bin") -> Path:
    """Run ``tiny`` (``module:function`` under ``madbench_common``) into ``root``, then
    replace ``repo``'s model in it by a random ``transformers.<architecture>`` whose config
    is the tiny one updated with ``config``, saved as ``weights`` (a state dict for
    ``pytorch_model.bin``, safetensors for ``model.safetensors``)."""
    import torch
    import transformers

    from madbench_common.models.weights import hf_path

    module, _, name = tiny.partition(":")
    getattr(importlib.import_module(f"madbench_common.{module}"), name)(root)
    snap = hf_path(repo, image=image, root=root)
    raw = json.loads((snap / "config.json").read_text())
    for key in _DERIVED:
        raw.pop(key, None)
    raw.update(config)
    cls = getattr(transformers, architecture)
    torch.manual_seed(0)
    model = cls(cls.config_class.from_dict(raw))
    for old in ("config.json", "pytorch_model.bin", "model.safetensors"):
        (snap / old).unlink(missing_ok=True)  # a hub snapshot's files may be links to blobs
    model.config.save_pretrained(snap)
    if weights.endswith(".safetensors"):
        from safetensors.torch import save_model

        save_model(model, str(snap / weights))
    else:
        torch.save(model.state_dict(), snap / weights)
    return Path(root)
