"""``madbench new-model``: write the hand-written files of a new frozen audio encoder.

The files are the ones ``madbench_common/models/catalog/README.md`` lists ("Adding a
model"): its card, its adapter, its tiny-checkpoint builder and its adapter test, and,
when it has its own image, that image's ``image.yaml``, ``requirements.in`` and
``weights.yaml``. Each is a working starting point (a transformers ``AutoModel`` mean-pooled
over time, as the WavLM and XLS-R adapters are) to be edited into the real model. Everything
else (registry, graph stage, workflows, plan, Dockerfile) is derived from these.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import yaml

from madbench_common.core.errors import ConfigError
from madbench_common.models.catalog import stage_name

__all__ = ["add_commands", "scaffold_files", "write_scaffold"]

CARD = """\
# A catalog card: what MADBench knows about one model (README.md here).
slug: {slug}
role: encoder
target: models.adapters.{family}:{cls}
image: {image}
paper: {paper}
section: not in the paper (an extra frozen audio encoder under the protocol of MADBench §4.2)
group: audio_encoder
in_paper: false
description: {repo} via transformers AutoModel, mean-pooled last hidden state
slot:
  stages: [{stage}]
  order: {order}
  modes: [A]
  memory: 16Gi
gpu:
  model: {paper}
  params_m: 100
  step_params_m: 100
  bytes_per_param: 4
  steps: 1
  passes: 1
  frames: 500
  status: estimated
  source: 'first guess written by madbench new-model: replace with the checkpoint''s size;
    fp32; one pass, 20 ms frames x 10 s = 500'
arch:
  repo: hf:{repo}
  file: config.json
  config: unavailable offline
  reason: 'written by madbench new-model: record the release''s config.json (its commit and
    the values gpu-bench builds from) once it has been read'
"""

ADAPTER = '''\
"""{paper} ({repo}): a frozen audio encoder for the logistic-regression heads (MADBench
§4.2). 16 kHz input through the checkpoint's feature extractor; the feature is the mean
over time of the last hidden state."""

from __future__ import annotations

from typing import Any

import numpy as np

from madbench_common.core.types import Audio, Hertz
from madbench_common.models.prep import check_audio, resample, torch_device
from madbench_common.models.roles import Embedding, Frames, InputSpec
from madbench_common.models.weights import hf_path

IMAGE = "{image}"
REPO = "{repo}"


class {cls}:
    """{paper}, mean-pooled last hidden state (mode A)."""

    slug, version = "{slug}", "1"
    reference = False
    modes: tuple[str, ...] = ("A",)

    def __init__(self, revision: str | None = None) -> None:
        import torch
        from transformers import AutoFeatureExtractor, AutoModel

        path = hf_path(REPO, image=IMAGE, revision=revision)
        self.extractor: Any = AutoFeatureExtractor.from_pretrained(path)
        self.device = torch_device()
        self.model: Any = AutoModel.from_pretrained(path).eval().to(self.device)
        self._torch = torch

    def embed(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
              frames: Frames | None = None, fps: float = 0.0) -> Embedding:
        if mode != "A":
            raise ValueError(f"{{self.slug}} encodes audio only (mode A), got {{mode!r}}")
        rate = int(self.extractor.sampling_rate)
        x = resample(check_audio(audio, self.slug), sample_rate, rate)
        inputs = self.extractor(x, sampling_rate=rate, return_tensors="pt")
        with self._torch.no_grad():
            hidden = self.model(inputs["input_values"].to(self.device)).last_hidden_state
        vec = hidden[0].mean(dim=0).cpu().numpy().astype(np.float32)
        spec = InputSpec(audio_rate=rate, audio_seconds=x.size / rate,
                         pooling=f"mean over {{hidden.shape[1]}} frames of the last hidden state")
        return Embedding(vec, spec)

    def encode(self, *, mode: str, audio: Audio | None = None, sample_rate: Hertz = 16000,
               frames: Frames | None = None, fps: float = 0.0) -> np.ndarray:
        return self.embed(mode=mode, audio=audio, sample_rate=sample_rate).vector
'''

TINY = '''\
"""A tiny random {paper} in the release layout of ``{repo}`` (image test, adapter tests)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from madbench_common.models.weights import install_local_snapshot, tiny_layout

REPO = "{repo}"


@tiny_layout({{REPO: ("config.json", "model.safetensors", "preprocessor_config.json")}})
def write_tiny(root: str | Path) -> Path:
    """Write a 1-layer, 32-wide checkpoint of the architecture under the weights ``root``."""
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2FeatureExtractor, Wav2Vec2Model

    torch.manual_seed(0)
    config = Wav2Vec2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                            num_attention_heads=2, conv_dim=(32, 32), conv_stride=(5, 4),
                            conv_kernel=(10, 8), num_conv_pos_embeddings=16)
    with tempfile.TemporaryDirectory() as tmp:
        Wav2Vec2Model(config).save_pretrained(tmp)
        Wav2Vec2FeatureExtractor(sampling_rate=16000).save_pretrained(tmp)
        install_local_snapshot(Path(root), REPO, tmp)
    return Path(root)
'''

TEST = '''\
"""{cls} on a tiny random checkpoint in the release layout, in its image's venv
(``make adapter-test IMAGE={image}``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers", reason="run make adapter-test IMAGE={image}")


def test_{family}_embeds_audio_with_its_input(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from madbench_common.models.adapters.{family} import {cls}
    from madbench_common.models.tiny.{family} import write_tiny

    write_tiny(tmp_path)
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    audio = np.random.default_rng(0).standard_normal(16000).astype(np.float32) * 0.1
    got = {cls}().embed(mode="A", audio=audio, sample_rate=16000)
    assert got.vector.shape == (32,) and np.isfinite(got.vector).all()
    assert got.spec.audio_rate == 16000
'''

IMAGE_YAML = """\
slug: {image}
description: "MADBench {paper} frozen encoder"
licenses: "Apache-2.0"
paper_name: {paper}
upstream: https://huggingface.co/{repo} (transformers AutoModel)
licence: code Apache-2.0 (transformers); {repo} weights under their model card's licence
python: "3.11"
torch: "2.14.1"
gpu: true
adapter_tests: [tests/models/test_{family}.py, tests/models/test_tiny_layouts.py]
image_test:
  weights: madbench_common.models.tiny.{family}:write_tiny
  clips: 9
notes: >-
  Written by madbench new-model; the stages and the model list come from the card.
"""

REQUIREMENTS = """\
# {paper} through transformers.
-r ../common.in
torch==2.14.1
transformers==5.24.0
"""

WEIGHTS = """\
image: {image}
hf:
  - repo: {repo}
    revision: main
    files: [config.json, model.safetensors, preprocessor_config.json]
"""

_SLUG = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")


def _fields(slug: str, repo: str, paper: str, image: str, root: Path) -> dict[str, Any]:
    family = re.sub(r"\W", "_", slug.removeprefix("enc-"))
    cards = sorted((root / "madbench_common" / "models" / "catalog").glob("*.yaml"))
    orders = [int(((yaml.safe_load(p.read_text()) or {}).get("slot") or {}).get("order", 0))
              for p in cards]
    return {"slug": slug, "family": family, "stage": stage_name("features", slug),
            "cls": "".join(w.title() for w in family.split("_")) + "Encoder",
            "repo": repo, "paper": paper, "image": image, "order": max(orders, default=0) + 1}


def scaffold_files(slug: str, repo: str, paper: str = "", image: str = "",
                   root: Path = Path()) -> dict[str, str]:
    """Relative path → text of each file a new encoder needs (own image when ``image`` is
    empty or has no folder yet; an existing image's folder is left alone)."""
    if not _SLUG.match(slug):
        raise ConfigError(f"new-model: {slug!r} is not a slug (lowercase words joined by '-')")
    if "/" not in repo:
        raise ConfigError(f"new-model: --repo {repo!r} is not a hub id (org/name)")
    f = _fields(slug, repo, paper or slug, image or slug, root)
    out = {f"madbench_common/models/catalog/{slug}.yaml": CARD.format(**f),
           f"madbench_common/models/adapters/{f['family']}.py": ADAPTER.format(**f),
           f"madbench_common/models/tiny/{f['family']}.py": TINY.format(**f),
           f"tests/models/test_{f['family']}.py": TEST.format(**f)}
    if not (root / "images" / f["image"] / "image.yaml").exists():
        out |= {f"images/{f['image']}/image.yaml": IMAGE_YAML.format(**f),
                f"images/{f['image']}/requirements.in": REQUIREMENTS.format(**f),
                f"images/{f['image']}/weights.yaml": WEIGHTS.format(**f)}
    return out


def write_scaffold(files: dict[str, str], root: Path) -> list[Path]:
    """Write ``files`` under ``root``; refuses (writing nothing) if any exists."""
    exists = [p for p in files if (root / p).exists()]
    if exists:
        raise ConfigError(f"new-model: {', '.join(exists)} already exist(s); nothing written")
    written = []
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``new-model``."""
    p = sub.add_parser("new-model", help="write the hand-written files of a new frozen audio "
                                         "encoder (card, adapter, tiny builder, test, image)")
    p.add_argument("slug", help="the model's slug, e.g. enc-hubert")
    p.add_argument("--repo", required=True, help="its Hugging Face repository (org/name)")
    p.add_argument("--paper", default="", help="its name in the paper (default: the slug)")
    p.add_argument("--image", default="",
                   help="its image (default: an own image named after the slug; an existing "
                        "image's folder is left for you to extend)")
    p.add_argument("--root", default=".", help="checkout to write into (default: .)")
    p.set_defaults(func=_new_model)


def _new_model(args: argparse.Namespace) -> int:
    root = Path(args.root)
    for path in write_scaffold(scaffold_files(args.slug, args.repo, args.paper, args.image,
                                              root), root):
        print(f"wrote: {path}")
    print("then: make dockerfiles; .venv/bin/madbench render; make lock IMAGE=<image>")
    return 0
