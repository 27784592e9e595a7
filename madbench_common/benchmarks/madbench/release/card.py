"""The exported dataset's card: the Hugging Face Hub README format (YAML front matter + body).

Everything on the card is read from the run or from this project's own facts, never typed
by hand: the configs and counts from the export, Table 1 from ``madbench status``
(:func:`~madbench_common.pipeline.status.table_one`), the generators from the components' rows
(model slug and version) with their image's weights (``images/<image>/weights.yaml``;
resolved commits from the weights volume's lock where ``--weights`` names it), the QC
thresholds from the stages' parameters — checked against the stages' fingerprints, so the
card says whether they are the values the run actually used — and a licence per
component: every source clip's licence (the sources CSV's ``license`` column), every
generator's and the separator's (the paper's models: their image's ``licence``; CPU
references: their catalog cards, ``models/catalog/<slug>.yaml``), and the noise set of the
robustness conditions. A component under a non-commercial licence makes the dataset
non-commercial, and the card says so and names it.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from madbench_common.benchmarks.madbench.release.export import SPLIT_NAMES
from madbench_common.benchmarks.madbench.robustness.noise import load_noise_set
from madbench_common.benchmarks.madbench.rows import ComponentRow, SampleRow, StemRow
from madbench_common.benchmarks.madbench.sources import clip_id_of
from madbench_common.core.errors import ConfigError
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.safetext import md_text
from madbench_common.core.store import RunStore
from madbench_common.media.listing import allow_fields
from madbench_common.models.registry import REGISTRY
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.stage import make_context, read_marker
from madbench_common.pipeline.status import collect_status, table_one

__all__ = ["NONCOMMERCIAL", "CardInputs", "Component", "components", "dataset_card", "hub_configs",
           "loading_example"]

NONCOMMERCIAL = re.compile(r"(\bNC\b|-NC-|-NC$|non-?commercial)", re.IGNORECASE)
"""A licence text that forbids commercial use (CC-BY-NC-*, "non-commercial")."""
UNKNOWN = "unknown"
"""How a licence that could not be read starts."""
_QC = ("source_qc", "component_qc")
_VERIFIED = {True: "verified: these parameters reproduce the stage's fingerprint",
             False: "not verified: the run used other parameters; export with the same "
                    "--set as the run"}


@dataclass
class CardInputs:
    """What the card is written from."""

    run: RunStore
    graph: Graph
    configs: dict[str, dict[str, int]]
    conditions: list[str] = field(default_factory=list)
    sources: str | None = None
    weights: str | None = None
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    seed: int = 0


@dataclass(frozen=True)
class Component:
    """One licensed component of the dataset."""

    kind: str
    name: str
    licence: str
    source: str
    detail: str = ""

    @property
    def noncommercial(self) -> bool:
        return bool(NONCOMMERCIAL.search(self.licence))

    @property
    def unknown(self) -> bool:
        """Whether the licence could not be read: then no claim about it can be made."""
        text = self.licence.strip().lower()
        return not text or text.startswith(UNKNOWN)


def _model_licence(slug: str) -> tuple[str, str]:
    from madbench_common.models.catalog import cards

    card = cards().get(slug)
    if card is not None and card.licence:
        return card.licence["spdx"], card.licence["source"]
    spec = REGISTRY.get(slug)
    if spec is None:
        return "unknown", f"{slug} is not in the registry"
    from madbench_common.imagefactory.images import load_image

    try:
        return load_image(spec.image).licence, f"images/{spec.image}/image.yaml"
    except ConfigError as exc:  # a missing image card must not stop the export
        return "unknown", f"images/{spec.image}/image.yaml: {exc}"


def _weights(image: str, weights_root: str | None) -> str:
    from madbench_common.models.weights import load_spec

    try:
        spec = load_spec(image)
    except ConfigError:  # the CPU reference image lists none
        return "none (procedural or in-wheel; see the package versions)"
    lock: dict[str, Any] = {}
    path = Path(weights_root or "") / "locks" / image / "weights.lock.json"
    if weights_root and path.is_file():
        lock = {h["repo"]: h.get("commit", "") for h in json.loads(path.read_text())["hf"]}
    items = [f"{h.repo}@{lock.get(h.repo) or h.revision}"
             + ("" if lock.get(h.repo) else " (revision; commit unresolved)") for h in spec.hf]
    items += [f"{u.name} sha256 {u.sha256 or '(recorded on fetch)'}" for u in spec.urls]
    return "; ".join(items) or "none"


def _rows(run: RunStore, stage: str, kind: type) -> list[Any]:
    marker = read_marker(run, stage)
    if marker is None:
        return []
    return read_manifest_bytes(kind, run.get_bytes(f"{stage}/manifest.parquet",
                                                   marker["manifest_sha256"]))


def _generators(inputs: CardInputs) -> list[dict[str, str]]:
    """One entry per generator stage (and the separator): model, version, image, weights."""
    out = []
    stages = [s for s in inputs.graph if s.role in ("speech_generator", "env_generator")]
    for stage in [inputs.graph.stages["separate"], *stages]:
        marker = read_marker(inputs.run, stage.name) or {}
        kind = ComponentRow if stage.name != "separate" else StemRow
        rows = _rows(inputs.run, stage.name, kind)
        used = Counter((r.model_slug, r.model_version) for r in rows
                       if r.ok and (kind is StemRow or r.uri))
        slug, version = used.most_common(1)[0][0] if used else (stage.model, "")
        spec = REGISTRY.get(slug)
        image = spec.image if spec else stage.image
        licence, where = _model_licence(slug)
        out.append({"stage": stage.name, "model": slug, "paper_model":
                    (spec.paper_model if spec else "") or "", "reference":
                    "yes" if spec and spec.reference else "no", "version": version or "—",
                    "image": str(marker.get("image", "")), "weights":
                    _weights(image, inputs.weights), "licence": licence, "licence_source": where,
                    "components": str(sum(used.values()))})
    return out


def _source_licences(inputs: CardInputs) -> tuple[dict[str, list[str]], str]:
    """licence → clip ids (every clip whose audio or video is in the dataset), and where
    the licences were read. CSV rows are matched by the clip id ingest gives them
    (:func:`~madbench_common.benchmarks.madbench.sources.clip_id_of`: sanitised, as the
    run's ids are); a clip no row matches is listed under an ``unknown`` licence, so the
    card never claims what it could not check."""
    clips: set[str] = set()
    for r in (r for r in _rows(inputs.run, "assemble", SampleRow) if r.ok):
        # the clip, and the clips whose audio went into it: a cross-identity target's
        # voice, a scene-consistency donor's environment
        clips |= {r.clip_id, r.target_clip_id, r.env_donor_clip_id} - {""}
    if not inputs.sources:
        return {f"{UNKNOWN} (export with --sources <the run's sources CSV>)": sorted(clips)}, ""
    path = Path(inputs.sources.removeprefix("file://"))
    if not path.is_file():
        return {f"{UNKNOWN} (--sources is not a CSV file with a license column)":
                sorted(clips)}, inputs.sources
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    allow_fields(len(text))
    given: dict[str, set[str]] = {}
    for row in csv.DictReader(io.StringIO(text, newline="")):
        cid = clip_id_of((row.get("clip_id") or "").strip(), (row.get("path") or "").strip())
        lic = (row.get("license") or "").strip() or f"{UNKNOWN} (empty license column)"
        given.setdefault(cid, set()).add(lic)
    out: dict[str, list[str]] = {}
    for cid in sorted(clips):
        for lic in sorted(given.get(cid) or {f"{UNKNOWN} (no row of --sources has this clip)"}):
            out.setdefault(lic, []).append(cid)
    return out, inputs.sources


def components(inputs: CardInputs, generators: list[dict[str, str]]) -> list[Component]:
    """Every licensed component: sources (by licence), generators, the noise set."""
    by_licence, where = _source_licences(inputs)
    out = [Component("source clips", f"{len(ids)} clips", lic, where or "unknown",
                     ", ".join(ids[:6]) + (" …" if len(ids) > 6 else ""))
           for lic, ids in sorted(by_licence.items())]
    out += [Component("generator" if g["stage"] != "separate" else "separator",
                      f"{g['model']} ({g['stage']})", g["licence"], g["licence_source"])
            for g in generators]
    if inputs.conditions:
        noise = load_noise_set()
        for lic in sorted({f.licence for f in noise.files}):
            out.append(Component("robustness noise set", "madbench_common/data/noise", lic,
                                 "madbench_common/data/noise/noise.csv"))
    return out


def _qc(inputs: CardInputs) -> tuple[dict[str, dict[str, Any]], dict[str, bool]]:
    """Each QC stage's parameters, and whether they reproduce the stage's fingerprint."""
    params, verified = {}, {}
    for name in _QC:
        marker = read_marker(inputs.run, name) or {}
        ctx = make_context(inputs.run, inputs.graph, name, inputs.params.get(name, {}),
                           str(marker.get("image", "embedded")), inputs.seed)
        params[name] = {k: v for k, v in ctx.params.items() if k != "model"}
        verified[name] = ctx.fingerprint == marker.get("fingerprint")
    return params, verified


def hub_configs(configs: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    """The front matter's ``configs``: each config's splits and their files."""
    out = []
    for config, splits in configs.items():
        files = [{"split": SPLIT_NAMES[s], "path": [f"{config}/{s}/metadata.parquet",
                                                    f"{config}/{s}/audio/*.flac"]}
                 for s in ("train", "val", "test") if s in splits]
        out.append({"config_name": config, "data_files": files})
    return out


def _front_matter(inputs: CardInputs, comps: list[Component]) -> str:
    nc = [c for c in comps if c.noncommercial]
    configs = hub_configs(inputs.configs)
    total = sum(sum(v.values()) for v in inputs.configs.values())
    size = ("n<1K" if total < 1000 else "1K<n<10K" if total < 10_000
            else "10K<n<100K" if total < 100_000 else "100K<n<1M")
    meta = {"pretty_name": f"MADBench ({inputs.run.run_id})",
            "license": "other",
            "license_name": ("madbench-noncommercial" if nc else "madbench-unknown"
                             if any(c.unknown for c in comps) else "madbench-composite"),
            "license_link": "README.md#licences",
            "task_categories": ["audio-classification"],
            "tags": ["audio-deepfake-detection", "deepfake", "audio-visual", "benchmark",
                     "madbench", "anti-spoofing"],
            "size_categories": [size], "configs": configs}
    return "---\n" + yaml.safe_dump(meta, sort_keys=False, allow_unicode=True) + "---\n"


def _md(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(md_text(c) for c in r) + " |" for r in rows])


def _named(comps: list[Component]) -> str:
    """``name (licence); …`` of ``comps``, escaped for Markdown."""
    return "; ".join(md_text(f"{c.name} ({c.licence})") for c in comps)


def _licence_section(comps: list[Component]) -> str:
    nc = [c for c in comps if c.noncommercial]
    unknown = [c for c in comps if c.unknown and not c.noncommercial]
    rows = [[c.kind, c.name, c.licence, c.source, c.detail] for c in comps]
    if nc:
        verdict = ("**This dataset is non-commercial.** It contains output of components "
                   "under non-commercial licences: " + _named(nc) + ". A "
                   "non-commercial model makes the data it generated, and so this dataset, "
                   "usable for non-commercial purposes only.")
        if unknown:
            verdict += (" The licences of other components could not be read: "
                        + _named(unknown) + ".")
    elif unknown:
        verdict = ("**The licences of some components could not be read**, so this card "
                   "cannot say whether the dataset may be used commercially: "
                   + _named(unknown) + ". Export "
                   "with --sources naming the run's sources CSV (with a `license` column for "
                   "every clip), or check those licences before any use.")
    else:
        verdict = ("No component is under a non-commercial licence. The dataset is a "
                   "composite: each sample is a derivative of its source clip and of the "
                   "generators that made its components, so each sample carries their "
                   "terms (share-alike and copyleft terms carry over).")
    return "## Licences\n\n" + verdict + "\n\n" + _md(
        ["component", "what", "licence", "read from", "clips"], rows)


def _limitations(gens: list[dict[str, str]], t1: dict[str, str], configs: dict[str, Any]
                 ) -> list[str]:
    out = []
    refs = [g["model"] for g in gens if g["reference"] == "yes"]
    if refs:
        out.append("Built with CPU reference models, not the paper's generators ("
                   + ", ".join(refs) + "): the fakes are easier or harder than the paper's "
                   "and numbers from this data are not comparable with the paper's.")
    test = sum(v.get("test", 0) for k, v in configs.items() if not k.startswith("robustness"))
    if test < 500:
        out.append(f"Small test split ({test} samples over all protocols): wide confidence "
                   "intervals; use the clip-paired bootstrap of `madbench eval`.")
    for cond in ("D-R", "S-R", "D-S"):
        value = t1.get(f"Scene consistency {cond} (consistent / inconsistent)", "")
        if value.startswith("0 /"):
            out.append(f"No scene-consistency pairs of condition {cond} in this build.")
    out += ["Audio is a mono mix at the run's rate (16 kHz by default); the MP4 carries the "
            "same mix AAC-encoded beside the source's untouched video packets.",
            "Labels are by construction (which component was generated), not by listening "
            "tests; QC is automatic (VAD, ASR, speaker similarity, music and level checks).",
            "Source clips keep their original speakers, languages and scenes: the data are "
            "only as diverse as the sources."]
    return out


def loading_example(config: str, folder: str = "path/to/this/folder") -> str:
    """The card's "How to load" code: Python that runs as printed under ``datasets`` 3 and ≥ 4.

    ``datasets`` ≥ 4 encodes and decodes the ``Audio`` feature with torchcodec (and torch),
    which it does not install: loading the folder with its ``Audio`` feature fails without
    them, even to build the table (3.x needs librosa to decode it). The first way reads the
    split's ``metadata.parquet`` as a plain table and each FLAC with soundfile (any
    version, no torch); the second uses the ``Audio`` feature where its decoder is there.
    The test suite runs this code under each major version
    (``tests/benchmarks/madbench/release/test_card_loading.py``)."""
    return (
        "import importlib.util\n\n"
        "import datasets\n"
        "import soundfile as sf\n"
        "from datasets import load_dataset\n\n"
        f"folder, config = {json.dumps(folder)}, {json.dumps(config)}\n"
        'split = f"{folder}/{config}/test"  # train, val and test where the config has them\n\n'
        "# 1. any datasets version, no audio decoder: the table, and each FLAC by its path\n"
        'ds = load_dataset("parquet", data_files=f"{split}/metadata.parquet", split="train")\n'
        "row = ds[0]\n"
        'array, sampling_rate = sf.read(f"{split}/{row[\'file_name\']}", dtype="float32")\n'
        'print(row["sample_id"], row["label"], array.shape, sampling_rate)\n\n'
        "# 2. the Audio feature, decoded for you (pip install \"datasets[audio]\"): datasets\n"
        "#    3.x decodes it with soundfile and librosa, >= 4 with torchcodec (and FFmpeg)\n"
        'major = int(datasets.__version__.split(".")[0])\n'
        'if importlib.util.find_spec("librosa" if major < 4 else "torchcodec"):\n'
        '    ds = load_dataset(folder, config, split="test")\n'
        '    audio = ds[0]["audio"]  # 3.x: {"array", "sampling_rate", "path"}; >= 4: a decoder\n'
        '    print("Audio feature:", ds.features["audio"])\n\n'
        "# row[\"video\"]: the sample's MP4, a path relative to its split folder\n")


def dataset_card(inputs: CardInputs) -> str:
    """The card's Markdown (front matter first)."""
    gens = _generators(inputs)
    comps = components(inputs, gens)
    status = collect_status(inputs.run, inputs.graph)
    t1 = dict(table_one(status))
    qc, verified = _qc(inputs)
    first = next(iter(inputs.configs), "balanced")
    parts = [_front_matter(inputs, comps), f"# MADBench benchmark build `{inputs.run.run_id}`",
             "A component-aware audio deepfake benchmark built with MADBench: the video of "
             "each real clip stays authentic while its audio is split into speech and "
             "environmental sound, manipulated independently — R (real), S (fake speech), "
             "E (fake environment), Q (both) — in three core protocols (balanced, "
             "scene-matched, scene-mismatched), a scene-consistency protocol, and, where "
             "exported, robustness conditions of the test split.",
             "## How to load\n\nWith Hugging Face `datasets` 3.x or ≥ 4 (`pip install "
             "datasets soundfile`). `datasets` ≥ 4 encodes and decodes the `Audio` feature "
             "with torchcodec (and torch), which it does not install: without them, "
             "loading this folder with its `Audio` feature fails. The first way below "
             "works under both (the table as Parquet, each FLAC read with soundfile); the "
             "second gives the `Audio` feature (`pip install \"datasets[audio]\"`: librosa "
             "for 3.x, torchcodec and FFmpeg for ≥ 4).\n\n```python\n"
             + loading_example(first) + "```",
             "## Configs and splits\n\n" + _md(["config", "train", "validation", "test"], [
                 [c, *(str(v.get(s, 0)) for s in ("train", "val", "test"))]
                 for c, v in inputs.configs.items()]),
             "## Columns\n\n`file_name` → `audio` (FLAC 24-bit), `video` (MP4 path), "
             "`label` (1 = fake for the core protocols, 1 = scene-inconsistent for "
             "scene_consistency), `variant` (R/S/E/Q), `speech_fake`, `env_fake`, "
             "`scene_consistent`, `speech_generator`, `env_generator`, `scene_label`, "
             "`coarse_label`, `sc_condition`, `clip_id` (resample by clip in bootstraps), "
             "sha256 of the exported audio and video and of the run's audio; robustness "
             "configs (`robustness-<condition>-<protocol>`: one protocol each, so `label` "
             "keeps that protocol's meaning) add `condition` and `condition_params` (JSON: "
             "what was asked and measured).",
             "## Table 1 (the paper's statistics of this build)\n\n"
             + _md(["statistic", "value"], [[k, v] for k, v in t1.items()]),
             "## Generators\n\n" + _md(
                 ["stage", "model", "paper's model", "CPU reference", "version", "image",
                  "weights", "licence", "components"],
                 [[g["stage"], g["model"], g["paper_model"], g["reference"], g["version"],
                   g["image"], g["weights"], g["licence"], g["components"]] for g in gens]),
             "## QC thresholds\n\n" + "\n\n".join(
                 f"**{name}** ({_VERIFIED[verified[name]]}):\n\n```yaml\n"
                 + yaml.safe_dump(p, sort_keys=True, allow_unicode=True) + "```"
                 for name, p in qc.items())]
    if inputs.conditions:
        parts.append("## Robustness conditions\n\nEach condition has one config per "
                     "protocol (`robustness-<condition>-<protocol>`), its test split "
                     "perturbed (video untouched): "
                     + ", ".join(f"`{c}`" for c in inputs.conditions) + ". Parameters, as "
                     "asked and as measured, are on every row (`condition_params`).")
    parts.append(_licence_section(comps))
    parts.append("## Intended uses\n\n- Evaluating audio and audio-visual deepfake "
                 "detectors, frozen encoders with probing heads and omni models on binary, "
                 "four-way, component-level and scene-consistency tasks.\n- Studying "
                 "robustness to codecs, noise and resampling (robustness configs).\n"
                 "- Not for training systems that impersonate the speakers in the sources, "
                 "and not for identifying people.")
    parts.append("## Known limitations\n\n" + "\n".join(
        f"- {x}" for x in _limitations(gens, t1, inputs.configs)))
    return "\n\n".join(parts) + "\n"
