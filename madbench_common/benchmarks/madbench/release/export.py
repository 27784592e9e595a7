"""``madbench export``: a finished run as a dataset others load without this project.

It writes a dataset card and, per protocol and split, a Hugging Face *audiofolder*
(``<protocol>/<split>/metadata.parquet`` with FLAC audio and MP4 video beside it, plus one
config per robustness condition), to a folder or ``s3://`` prefix; nothing is uploaded to a
hub. A config holds one protocol, so ``label`` has one meaning in it. The audio is the
run's float32 mix as 24-bit FLAC, with both sha256s on the row. Export refuses a run whose
stages have not all finished and never changes the run. The layout is in the README
(Releasing a run as a dataset).
"""

from __future__ import annotations

import io
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import soundfile as sf

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.benchmarks.madbench.release.card import SPLIT_NAMES, CardInputs, dataset_card
from madbench_common.benchmarks.madbench.rows import PerturbedRow, SampleRow
from madbench_common.core.errors import ConfigError
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore, Store, open_store
from madbench_common.media.audio import read_wav_bytes
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.stage import read_marker

__all__ = ["ExportResult", "check_complete", "config_name", "export_run", "metadata_table"]

log = logging.getLogger("madbench")
_STR = ("sample_id", "clip_id", "variant", "protocol", "split", "speech_generator",
        "env_generator", "speech_branch", "env_branch", "scene_class", "scene_label",
        "coarse_label", "env_scene_label", "mismatch_mode", "env_donor_clip_id",
        "sc_condition", "speech_component_id", "env_component_id", "target_clip_id")
_BOOL = ("speech_fake", "env_fake", "scene_consistent")
_CACHE = 64


@dataclass
class ExportResult:
    """What an export wrote: configs → split → rows, and the bytes written."""

    to: str
    configs: dict[str, dict[str, int]] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0
    card: str = ""


def check_complete(run: RunStore, graph: Graph) -> None:
    """Raise unless every stage of ``graph`` has finished in ``run``."""
    missing = [s.name for s in graph if read_marker(run, s.name) is None]
    if missing:
        raise ConfigError(f"{run.store.uri(run.run_id)}: the run is incomplete, so it cannot "
                          f"be exported: {len(missing)} stages have not finished "
                          f"({', '.join(missing[:8])}{', …' if len(missing) > 8 else ''}); "
                          "finish it with madbench run first")


def config_name(protocol: str, condition: str = "") -> str:
    """The card's config of a protocol, or of a robustness condition of one protocol."""
    return f"robustness-{condition}-{protocol}" if condition else protocol


def _rows(run: RunStore, stage: str, kind: type[SampleRow]) -> list[Any]:
    marker = read_marker(run, stage)
    assert marker is not None
    data = run.get_bytes(f"{stage}/manifest.parquet", marker["manifest_sha256"])
    rows: list[SampleRow] = read_manifest_bytes(kind, data)
    return [r for r in rows if r.ok]


def _label(r: SampleRow) -> int:
    return int(not r.scene_consistent) if r.sc_condition else int(r.variant != "R")


def metadata_table(rows: list[tuple[SampleRow, str, str]]) -> pa.Table:
    """The ``metadata.parquet`` of one folder: (row, exported audio sha256, video sha256)."""
    cols: dict[str, Any] = {
        "file_name": pa.array([f"audio/{r.sample_id}.flac" for r, _, _ in rows], pa.string()),
        "video": pa.array([f"video/{r.sample_id}.mp4" for r, _, _ in rows], pa.string()),
        "label": pa.array([_label(r) for r, _, _ in rows], pa.int8())}
    for name in _STR:
        cols[name] = pa.array([str(getattr(r, name)) for r, _, _ in rows], pa.string())
    for name in _BOOL:
        cols[name] = pa.array([bool(getattr(r, name)) for r, _, _ in rows], pa.bool_())
    cols["duration"] = pa.array([float(r.duration) for r, _, _ in rows], pa.float64())
    cols["sample_rate"] = pa.array([int(r.sample_rate) for r, _, _ in rows], pa.int32())
    cols["audio_sha256"] = pa.array([a for _, a, _ in rows], pa.string())
    cols["video_sha256"] = pa.array([v for _, _, v in rows], pa.string())
    cols["run_audio_sha256"] = pa.array([r.audio_sha256 for r, _, _ in rows], pa.string())
    if rows and isinstance(rows[0][0], PerturbedRow):
        for name in ("condition", "condition_family", "condition_params", "clean_sample_id"):
            cols[name] = pa.array([str(getattr(r, name)) for r, _, _ in rows], pa.string())
    return pa.table(cols)


class _Writer:
    """Writes media and tables to the destination, converting each track once (LRU)."""

    def __init__(self, run: RunStore, dest: Store, result: ExportResult) -> None:
        self.run, self.dest, self.result = run, dest, result
        self._flac: OrderedDict[str, bytes] = OrderedDict()

    def put(self, key: str, data: bytes) -> str:
        info = self.dest.put_bytes(key, data)
        self.result.files += 1
        self.result.bytes += len(data)
        return info.sha256

    def flac(self, r: SampleRow) -> bytes:
        if r.audio_sha256 not in self._flac:
            audio, rate = read_wav_bytes(self.run.get_bytes(self.run.key_of(r.audio_uri),
                                                            r.audio_sha256))
            buf = io.BytesIO()
            sf.write(buf, audio, rate, format="FLAC", subtype="PCM_24")
            self._flac[r.audio_sha256] = buf.getvalue()
            if len(self._flac) > _CACHE:
                self._flac.popitem(last=False)
        self._flac.move_to_end(r.audio_sha256)
        return self._flac[r.audio_sha256]

    def folder(self, prefix: str, rows: list[SampleRow]) -> None:
        out = []
        for r in sorted(rows, key=lambda r: r.sample_id):
            audio = self.put(f"{prefix}/audio/{r.sample_id}.flac", self.flac(r))
            video = self.put(f"{prefix}/video/{r.sample_id}.mp4",
                             self.run.get_bytes(self.run.key_of(r.video_uri), r.video_sha256))
            out.append((r, audio, video))
        buf = io.BytesIO()
        pq.write_table(metadata_table(out), buf, compression="zstd")
        self.put(f"{prefix}/metadata.parquet", buf.getvalue())


def _no_condition(r: SampleRow) -> str:
    return ""


_ORDER = {p: i for i, p in enumerate(("balanced", "scene_matched", "scene_mismatched",
                                       "scene_consistency"))}
_SPLITS = {s: i for i, s in enumerate(SPLIT_NAMES)}


def _groups(rows: Iterable[SampleRow], condition: Callable[[SampleRow], str]
            ) -> dict[tuple[str, str], list[SampleRow]]:
    """(config, split) → rows, core protocols first (paper order), then conditions in their
    list order, splits train/val/test."""
    out: dict[tuple[str, str], list[SampleRow]] = {}
    rank: dict[str, tuple[int, int, int, str]] = {}
    for r in rows:
        name = config_name(r.protocol, condition(r))
        out.setdefault((name, r.split), []).append(r)
        index = getattr(r, "condition_index", 0) if condition(r) else 0
        rank[name] = (1 if condition(r) else 0, index, _ORDER.get(r.protocol, 9), name)
    return dict(sorted(out.items(), key=lambda kv: (rank[kv[0][0]], _SPLITS.get(kv[0][1], 9))))


def export_run(store: str, run_id: str, to: str, *, sources: str | None = None,
               robustness: bool = True, weights: str | None = None,
               params: dict[str, dict[str, Any]] | None = None, seed: int = 0) -> ExportResult:
    """Export run ``run_id`` of ``store`` to ``to`` (see the module notes)."""
    run = RunStore(open_store(store), run_id)
    graph = build_graph()
    check_complete(run, graph)
    dest = open_store(to)
    result = ExportResult(to)
    writer = _Writer(run, dest, result)
    samples = _rows(run, "assemble", SampleRow)
    groups = _groups(samples, _no_condition)
    conditions: list[str] = []
    if robustness:
        perturbed = _rows(run, "perturb", PerturbedRow)
        conditions = list(dict.fromkeys(r.condition for r in sorted(
            perturbed, key=lambda r: (r.condition_index, r.sample_id))))
        groups = {**groups, **_groups(perturbed, lambda r: getattr(r, "condition", ""))}
    for (config, split), rows in groups.items():
        log.info("export: %s/%s (%d samples)", config, split, len(rows))
        writer.folder(f"{config}/{split}", rows)
        result.configs.setdefault(config, {})[split] = len(rows)
    inputs = CardInputs(run=run, graph=graph, configs=result.configs, conditions=conditions,
                        sources=sources, weights=weights, params=params or {}, seed=seed)
    result.card = dataset_card(inputs)
    writer.put("README.md", result.card.encode())
    return result
