"""What each image's tiny-checkpoint builder writes, in the release layout, and the checks of it.

An image's ``image_test.weights`` (``image.yaml``) names a builder that writes a tiny
randomly initialised checkpoint for every model the image registers, where
``madbench weights fetch`` puts the real one (``weights.yaml``): the same hub repositories
as Hugging Face cache snapshots (``huggingface/hub/models--org--name/snapshots/<commit>/``
with ``refs/main``), the same file names in them, the same ``files/<image>/`` names. So
the adapters' real loading code runs unchanged on the tiny checkpoint.

:data:`TINY_LAYOUTS` declares, per image, what its builder writes; it imports nothing
heavy, so the main suite compares it with ``weights.yaml`` and ``image.yaml``
(:func:`declared_problems`) and each adapter test compares a written root with it
(:func:`written_problems`, :func:`tiny_layout_problems`). Files a tiny checkpoint needs
that the release does not have (the tiny architecture's sidecar, the tiny/stand-in
markers) are declared apart, as ``extra``, and must not be what ``weights.yaml`` fetches.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from madbench_common.weights import HFItem, WeightsSpec, load_spec

__all__ = ["TINY_LAYOUTS", "TinyLayout", "declared_problems", "tiny_layout_problems",
           "written_files", "written_problems"]

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class TinyLayout:
    """What one image's tiny-checkpoint builder writes into a weights root."""

    builder: str
    """``module:function`` (``image.yaml`` ``image_test.weights``)."""
    models: tuple[str, ...]
    """The registry slugs the image serves; the builder covers every one."""
    hf: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Hub repository → files in its snapshot, as the release names them (a glob where the
    count varies: ``model-*-of-*.safetensors``)."""
    files: tuple[str, ...] = ()
    """Names under ``files/<image>/`` (``weights.yaml`` ``urls``)."""
    extra: tuple[str, ...] = ()
    """Tiny-only files, as ``<repo>/<file>`` or ``files/<name>``: never in the release."""


_TINY_MARKER = "madbench_tiny_random.json"
_STANDIN = "madbench_standin.json"
_QWEN_TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt",
                   "special_tokens_map.json", "added_tokens.json")

TINY_LAYOUTS: dict[str, TinyLayout] = {
    "enc-tf5": TinyLayout(
        "madbench_common.models.tiny_eval:tf5", ("enc-tf5-pe-av-base", "enc-tf5-wavlm"),
        hf={"facebook/pe-av-base": ("config.json", "model.safetensors",
                                    "processor_config.json", "tokenizer.json",
                                    "tokenizer_config.json"),
            "microsoft/wavlm-base-plus": ("config.json", "preprocessor_config.json",
                                          "pytorch_model.bin")}),
    "enc-msclap": TinyLayout(
        "madbench_common.models.tiny_eval:msclap", ("enc-msclap",),
        hf={"microsoft/msclap": ("CLAP_weights_2023.pth",),
            "openai-community/gpt2": ("config.json", "model.safetensors", "tokenizer.json",
                                      "tokenizer_config.json", "vocab.json", "merges.txt")}),
    "audio-torch": TinyLayout(
        "madbench_common.models.tiny_eval:audio_torch",
        ("audio-torch-beats", "audio-torch-aasist"),
        files=("AASIST.pth", "BEATs_iter3_plus_AS2M.pt")),
    "enc-imagebind": TinyLayout(
        "madbench_common.models.tiny_eval:imagebind", ("enc-imagebind",),
        files=("imagebind_huge.pth",), extra=("files/imagebind_huge.arch.json",)),
    "enc-cavmae-sync": TinyLayout(
        "madbench_common.models.tiny_eval:cavmae_sync", ("enc-cavmae-sync",),
        files=("cav_mae_sync.pth",), extra=("files/cav_mae_sync.arch.json",)),
    "det-df-arena": TinyLayout(
        "madbench_common.models.tiny_remote:df_arena", ("det-df-arena",),
        hf={"Speech-Arena-2025/DF_Arena_1B_V_1": (
                "config.json", "pytorch_model.bin", "configuration_antispoofing.py",
                "feature_extraction_antispoofing.py", "backbone.py",
                "modeling_antispoofing.py"),
            "facebook/wav2vec2-xls-r-1b": ("config.json",)},
        extra=(f"Speech-Arena-2025/DF_Arena_1B_V_1/{_STANDIN}",
               f"Speech-Arena-2025/DF_Arena_1B_V_1/{_TINY_MARKER}")),
    "det-xlsr-mamba": TinyLayout(
        "madbench_common.models.tiny_det:xlsr_mamba", ("det-xlsr-mamba",),
        hf={"AustinXiao/XLSR-Mamba-LA": ("model.safetensors", "config.json")},
        extra=("AustinXiao/XLSR-Mamba-LA/xlsr_mamba.arch.json",)),
    "det-av-anomaly": TinyLayout(
        "madbench_common.models.tiny_det:av_anomaly", ("det-av-anomaly",),
        files=("sync_model.pth", "dist_regressive_model.pth",
               "avfeature_regressive_model.pth", "pca.pkl")),
    "det-batfd": TinyLayout(
        "madbench_common.models.tiny_det:batfd", ("det-batfd",),
        files=("batfd_plus_default.ckpt",)),
    "det-avh-align": TinyLayout(
        "madbench_common.models.tiny_det:avh_align", ("det-avh-align",),
        files=("self_large_vox_433h.pt", "AVH-Align_AV1M.pt")),
    "omni-qwen25omni": TinyLayout(
        "madbench_common.models.tiny_omni:install_tiny_tf5_omni",
        ("omni-qwen25omni", "omni-gemma4", "omni-qwen25omni-tiny"),
        # transformers 5 saves one processor_config.json where the releases (saved with 4.x)
        # have preprocessor_config.json etc.; both are *.json, and the loader reads either
        hf={"Qwen/Qwen2.5-Omni-7B": (
                "config.json", "generation_config.json", "model.safetensors",
                "processor_config.json", "chat_template.json", "spk_dict.pt",
                "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"),
            "google/gemma-4-E4B-it": (
                "config.json", "generation_config.json", "model.safetensors",
                "processor_config.json", "chat_template.jinja", "tokenizer.json",
                "tokenizer_config.json")},
        extra=(f"Qwen/Qwen2.5-Omni-7B/{_TINY_MARKER}", f"google/gemma-4-E4B-it/{_TINY_MARKER}")),
    "omni-minicpmo45": TinyLayout(
        "madbench_common.models.tiny_remote:minicpmo", ("omni-minicpmo45",),
        hf={"openbmb/MiniCPM-o-4_5": ("config.json", "model.safetensors",
                                      "configuration_minicpmo.py", "modeling_minicpmo.py",
                                      *_QWEN_TOKENIZER[:-1])},
        extra=(f"openbmb/MiniCPM-o-4_5/{_STANDIN}", f"openbmb/MiniCPM-o-4_5/{_TINY_MARKER}")),
    "omni-baichuan15": TinyLayout(
        "madbench_common.models.tiny_baichuan:baichuan_omni", ("omni-baichuan15",),
        hf={"baichuan-inc/Baichuan-Omni-1d5": (
            "config.json", "generation_config.json", "model.safetensors.index.json",
            "model-*-of-*.safetensors", "tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "added_tokens.json")},
        extra=(f"baichuan-inc/Baichuan-Omni-1d5/{_TINY_MARKER}",)),
    "deaf-tf5": TinyLayout(
        "madbench_common.models.tiny_audio_lm:install_tiny_deaf_tf5",
        ("deaf-qwen2-audio", "deaf-audio-flamingo3", "deaf-qwen3-omni", "deaf-qwen2-audio-tiny"),
        hf={repo: ("config.json", "generation_config.json", "model.safetensors",
                   "chat_template.jinja", "processor_config.json", "tokenizer.json",
                   "tokenizer_config.json")
            for repo in ("Qwen/Qwen2-Audio-7B-Instruct", "nvidia/audio-flamingo-3-hf",
                         "Qwen/Qwen3-Omni-30B-A3B-Instruct")},
        extra=tuple(f"{repo}/{_TINY_MARKER}" for repo in (
            "Qwen/Qwen2-Audio-7B-Instruct", "nvidia/audio-flamingo-3-hf",
            "Qwen/Qwen3-Omni-30B-A3B-Instruct"))),
}


def _matches(name: str, item: HFItem) -> bool:
    return not item.files or any(fnmatch.fnmatch(name, pat) for pat in item.files)


def declared_problems(image: str, layout: TinyLayout, spec: WeightsSpec,
                      models: tuple[str, ...] = (), builder: str = "") -> list[str]:
    """Where ``layout`` disagrees with the image's ``weights.yaml`` (``spec``) and, when
    given, with its ``image.yaml`` models and ``image_test.weights``."""
    out = []
    if models and set(models) != set(layout.models):
        out.append(f"{image}: image.yaml models {sorted(models)} != the tiny builder's "
                   f"{sorted(layout.models)}")
    if builder and builder != layout.builder:
        out.append(f"{image}: image_test.weights is {builder!r}, the layout's builder is "
                   f"{layout.builder!r}")
    items = {i.repo: i for i in spec.hf}
    for repo in sorted(set(items) ^ set(layout.hf)):
        where = "weights.yaml" if repo in items else "the tiny builder"
        out.append(f"{image}: {repo} is only in {where}")
    for repo in sorted(set(items) & set(layout.hf)):
        item, names = items[repo], layout.hf[repo]
        out += [f"{image}: {repo}: no tiny file matches {pat!r} of weights.yaml"
                for pat in item.files if not any(fnmatch.fnmatch(n, pat) for n in names)]
        out += [f"{image}: {repo}: the tiny {name} is not fetched by weights.yaml "
                f"(files {list(item.files)})" for name in names if not _matches(name, item)]
    urls = {u.name for u in spec.urls}
    out += [f"{image}: files/{name} is only in "
            f"{'weights.yaml' if name in urls else 'the tiny builder'}"
            for name in sorted(urls ^ set(layout.files))]
    for extra in layout.extra:  # a tiny-only file must not be one weights.yaml names
        repo, _, name = extra.rpartition("/")
        if (repo == "files" and name in urls) or (repo in items and name in items[repo].files):
            out.append(f"{image}: tiny-only {extra} is a release file in weights.yaml")
    return out


def written_files(root: str | os.PathLike[str], image: str) -> tuple[dict[str, set[str]],
                                                                      set[str], list[str]]:
    """What a weights root holds for ``image``: repo → snapshot files, ``files/<image>``
    names, and problems with the cache structure (refs/main, commit-named snapshots)."""
    base, hub = Path(root), Path(root) / "huggingface" / "hub"
    repos: dict[str, set[str]] = {}
    problems = []
    for folder in sorted(hub.glob("models--*")) if hub.is_dir() else []:
        repo = folder.name[len("models--"):].replace("--", "/", 1)
        ref = folder / "refs" / "main"
        commit = ref.read_text().strip() if ref.is_file() else ""
        snaps = [p for p in (folder / "snapshots").glob("*") if p.is_dir()]
        if not _COMMIT.match(commit) or [p.name for p in snaps] != [commit]:
            problems.append(f"{repo}: refs/main {commit!r} and snapshots "
                            f"{sorted(p.name for p in snaps)} are not one 40-hex commit")
        repos[repo] = {p.relative_to(s).as_posix() for s in snaps for p in s.rglob("*")
                       if p.is_file()}
    files_dir = base / "files" / image
    names = {p.name for p in files_dir.iterdir() if p.is_file()} if files_dir.is_dir() else set()
    return repos, names, problems


def written_problems(root: str | os.PathLike[str], image: str, layout: TinyLayout,
                     repos_of_others: bool = False) -> list[str]:
    """Where a weights root written by ``layout.builder`` differs from ``layout``: every
    declared file there, nothing undeclared (``repos_of_others``: other images' repos in
    the same root are ignored), the cache structure as the hub's."""
    repos, names, out = written_files(root, image)
    extra_hf: dict[str, set[str]] = {}
    extra_files = set()
    for extra in layout.extra:
        repo, _, name = extra.rpartition("/")
        (extra_files.add(name) if repo == "files" else extra_hf.setdefault(repo, set()).add(name))
    for repo in sorted(set(repos) | set(layout.hf)):
        if repo not in layout.hf:
            if not repos_of_others:
                out.append(f"{image}: {repo} written but not declared")
            continue
        out += _compare(f"{image}: {repo}/", set(layout.hf[repo]) | extra_hf.get(repo, set()),
                        repos.get(repo, set()))
    return out + _compare(f"{image}: files/", set(layout.files) | extra_files, names)


def _compare(prefix: str, want: set[str], got: set[str]) -> list[str]:
    """Each declared name (or glob) matches a written file; each written file is declared."""
    out = [f"{prefix}{w} declared but not written" for w in sorted(want)
           if not fnmatch.filter(got, w)]
    return out + [f"{prefix}{g} written but not declared" for g in sorted(got)
                  if not any(fnmatch.fnmatch(g, w) for w in want)]


def tiny_layout_problems(image: str, root: str | os.PathLike[str],
                         images_dir: Path | None = None) -> list[str]:
    """Both checks for a fresh root the image's builder wrote (nothing else in it): its
    declaration against ``weights.yaml``, and the root against its declaration."""
    layout = TINY_LAYOUTS[image]
    return (declared_problems(image, layout, load_spec(image, images_dir))
            + written_problems(root, image, layout))
