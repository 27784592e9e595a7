"""Tiny random checkpoints in the real weights layout, for adapter tests and ``make image-test``.

Each ``install_tiny_*`` builds a small randomly initialised model from the upstream
package's own classes, saves it the way the released checkpoint is laid out, and puts
it into a weights root as a cached Hugging Face snapshot at the revision the adapter
pins. The adapters then run their real, offline loading code against it. Nothing
here is a stand-in for a trained model: outputs of these models are noise.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from madbench_common.weights import install_local_snapshot

__all__ = ["install_tiny_mossformer2"]

_MOSSFORMER2_TINY = {"encoder_embedding_dim": 32, "mossformer_sequence_dim": 32,
                     "num_mossformer_layer": 1, "encoder_kernel_size": 16, "num_spks": 2}


def install_tiny_mossformer2(root: str | os.PathLike[str], seed: int = 0) -> Path:
    """A 1-layer, 32-dim ClearVoice MossFormer2_SS_16K in ClearVoice's checkpoint layout."""
    import torch
    from clearvoice.models.mossformer2_ss.mossformer2 import MossFormer2_SS_16K

    from madbench_common.models.mossformer2 import REPO, REVISION

    torch.manual_seed(seed)
    model = MossFormer2_SS_16K(argparse.Namespace(**_MOSSFORMER2_TINY)).model
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp)
        (src / "last_best_checkpoint").write_text("last_best_checkpoint.pt\n")
        torch.save({"model": model.state_dict(), "epoch": 0},
                   src / "last_best_checkpoint.pt")
        return install_local_snapshot(root, REPO, src, revision=REVISION)
