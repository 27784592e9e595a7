"""A MADBench run as a corpus: its ``assemble`` samples, for cross-dataset evaluation.

``madbench:<store>/<run_id>`` (a local path, ``file://`` or ``s3://``) reads the run's
samples manifest; media are read from the run by reference (checksums verified). Every
task is defined (R/S/E/Q, scene consistency); the protocols are the run's own, and
:mod:`~madbench_common.benchmarks.madbench.corpora.cross` picks one of them (``balanced`` by
default) so that
each clip enters once.
"""

from __future__ import annotations

import dataclasses

from madbench_common.benchmarks.madbench.corpora.base import Corpus, frame_of
from madbench_common.benchmarks.madbench.rows import SampleRow
from madbench_common.core.errors import ConfigError
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.stage import read_marker

__all__ = ["load_madbench"]


def load_madbench(spec: str) -> Corpus:
    """The run's ``assemble`` samples (``spec`` = ``<store>/<run_id>``)."""
    root, _, run_id = spec.rstrip("/").rpartition("/")
    if not run_id:
        raise ConfigError(f"madbench:{spec}: expected <store>/<run_id>")
    run = RunStore(open_store(root or "."), run_id)
    marker = read_marker(run, "assemble")  # one read: a marker gone since is "not done"
    if marker is None:
        raise ConfigError(f"{run.uri('assemble')}: the run's assemble stage has not finished")
    rows = read_manifest_bytes(SampleRow, run.get_bytes("assemble/manifest.parquet",
                                                        marker["manifest_sha256"]))
    shas = {r.audio_uri: r.audio_sha256 for r in rows} | {r.video_uri: r.video_sha256
                                                           for r in rows}
    records = []
    for r in rows:
        rec = dataclasses.asdict(r)
        rec |= {"audio_path": r.audio_uri, "video_path": r.video_uri, "speaker": "",
                "label_source": r.variant}
        records.append(rec)
    frame = frame_of(records, "madbench")
    frame["protocol"] = [r.protocol for r in rows]

    def reader(uri: str) -> bytes:
        return run.get_bytes(run.key_of(uri), shas.get(uri))

    return Corpus("madbench", spec, frame, ("binary", "fourway", "speech", "env",
                                                   "scene"), modality="AV",
                  notes=["MADBench: R/S/E/Q labels, every task defined; one protocol's "
                         "samples are used so that each clip enters once."], reader=reader)
