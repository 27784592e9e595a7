"""Plan a run before submitting it: task counts, GPU/CPU-hours and storage per stage.

Figures come from ``madbench_common/data/throughput.csv`` (seconds and bytes per item, with
basis and source) and, for GPU memory and seconds, the catalog cards
(:mod:`madbench_common.pipeline.gpuplan`), measured where a GPU run measured them, else
estimated. A stage with no figure is listed as unknown and left out of the totals, never
guessed. The ``full`` profile is planned unless ``--profile embedded`` is given.

:func:`size_stage` sizes each stage (``workflows/full.yaml`` takes the sizes at the paper's
scale): a GPU stage's shards, ``activeDeadlineSeconds`` and GPU-memory request come from its
model's figure with the margins below; a CPU stage's shards keep their planned time under
:data:`SHARD_TIMEOUT_SHARE` of its timeout.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from madbench_common.core.errors import ConfigError
from madbench_common.pipeline.gpuplan import REFERENCE_GPU, GpuFigure, GpuModel, load_gpu_models
from madbench_common.pipeline.graph import Graph, Stage

__all__ = [
    "DEADLINE_FLOOR",
    "DEADLINE_MARGIN",
    "MAX_SHARDS",
    "MEMORY_MARGIN",
    "PAPER_CLIPS",
    "PAPER_SAMPLES",
    "SHARD_TIMEOUT_SHARE",
    "START_SECONDS",
    "Plan",
    "StagePlan",
    "Throughput",
    "format_plan",
    "image_pull_line",
    "load_throughput",
    "plan_run",
    "size_stage",
]

PAPER_CLIPS = 1892
"""Eligible source clips at the paper's scale."""
PAPER_SAMPLES = 16536
"""Benchmark samples at the paper's scale."""
_UNITS = ("clip", "sample")
_SAMPLES_STAGE = "assemble"
_NAME_W = 28
"""Width of the stage column (the longest stage name, ``features_enc_tf5_pe_av_base``)."""
SHARD_TIMEOUT_SHARE = 0.5
"""A CPU stage's shard: its planned time stays under this share of its timeout."""
DEADLINE_MARGIN = {"measured": 1.5, "estimated": 2.0}
"""A GPU shard's deadline (``activeDeadlineSeconds``) is this many times its planned GPU
time, by the status of its figure (an estimate may be off by more than a measurement),
plus :data:`START_SECONDS`, and at least :data:`DEADLINE_FLOOR`."""
START_SECONDS = 900
"""A GPU pod's time before its first item: image pull, loading the weights onto the GPU
(up to ~66 GB from the weights volume), CUDA context and kernels."""
DEADLINE_FLOOR = 1800
"""No GPU shard gets less: a cold node pulls a multi-GB image first."""
MAX_SHARDS = 16
"""A stage's shards are raised up to this many to keep its deadline within its timeout;
past it the deadline grows instead (the workflow's node status grows with the pods:
``pipeline/argo_limits``)."""
DEADLINE_STEP = 300
"""Deadlines round up to whole 5 minutes, so that a small change of a figure keeps them."""
MEMORY_MARGIN = {"measured": 1.2, "estimated": 1.0}
"""A GPU stage asks for a GPU of more than its figure's memory × this (node affinity on the
GPU's memory); an estimate already counts 25 % workspace and the CUDA context
(``pipeline/gpuplan``), a measured peak does not."""
_GIB = 2**30


@dataclass(frozen=True)
class Throughput:
    """One row of the throughput table: cost of one item of a stage on its image."""

    stage: str
    unit: str
    device: str
    seconds_per_item: float
    bytes_per_item: int
    basis: str
    source: str
    peak_rss_mb: int = 0
    """Largest peak resident memory of one shard (or the merge) in the measured run; 0:
    not measured. The smoke workflow's memory requests derive from it
    (:func:`~madbench_common.pipeline.argo.memory_request`)."""


@dataclass(frozen=True)
class StagePlan:
    """What one stage will cost at the planned scale (``throughput`` None: unknown)."""

    stage: Stage
    items: int
    tasks: int
    throughput: Throughput | None
    gpu: GpuFigure | None = None
    """GPU memory and seconds per item of the stage's model (model stages only)."""
    unit: str = "clip"
    """What ``items`` counts: the throughput row's unit, else ``sample`` after ``assemble``."""
    shards: int = 0
    """Shards planned (:func:`size_stage`); 0: the stage's own count."""
    deadline: int = 0
    """A shard's deadline in seconds (``activeDeadlineSeconds``); 0: the stage's timeout."""
    gpu_memory_gib: int = 0
    """The GPU memory a shard asks for (a GPU of more than this many GiB); 0: any."""

    @property
    def figure_status(self) -> str:
        """``measured`` or ``estimated`` for a stage timed by a GPU figure or on a GPU;
        ``""`` for a CPU stage."""
        if self.on_gpu:
            return "measured"
        return self.gpu.status if self.gpu_estimated and self.gpu is not None else ""

    @property
    def gpu_estimated(self) -> bool:
        """Whether the stage's time is the GPU estimate (a GPU stage timed on a CPU reference)."""
        return bool(self.stage.gpu) and self.gpu is not None and not self.on_gpu

    @property
    def compute_hours(self) -> float:
        """Hours of the stage's device: GPU time for GPU stages, else CPU core time."""
        if self.gpu_estimated:
            assert self.gpu is not None
            return self.items * self.gpu.seconds_per_item / 3600
        t = self.throughput
        return 0.0 if t is None else self.items * t.seconds_per_item / 3600

    @property
    def on_gpu(self) -> bool:
        """Whether the throughput row was timed on a GPU (a CPU-reference timing is not)."""
        return self.throughput is not None and self.throughput.device == "gpu"

    @property
    def gpu_hours(self) -> float:
        return self.compute_hours * self.stage.gpu if self.on_gpu or self.gpu_estimated else 0.0

    @property
    def cpu_hours(self) -> float:
        return 0.0 if self.on_gpu or self.gpu_estimated else self.compute_hours

    @property
    def storage_bytes(self) -> int:
        return 0 if self.throughput is None else self.items * self.throughput.bytes_per_item

    @property
    def shard_seconds(self) -> float:
        """Estimated wall time of one shard (compare with its deadline)."""
        return self.compute_hours * 3600 / (self.shards or self.stage.shards)

    @property
    def over_deadline(self) -> bool:
        return self.shard_seconds > (self.deadline or self.stage.timeout)


@dataclass(frozen=True)
class Plan:
    """A whole run's estimate."""

    clips: int
    samples: int
    stages: list[StagePlan]

    @property
    def gpu_hours(self) -> float:
        return sum(s.gpu_hours for s in self.stages)

    @property
    def cpu_hours(self) -> float:
        return sum(s.cpu_hours for s in self.stages)

    @property
    def storage_bytes(self) -> int:
        return sum(s.storage_bytes for s in self.stages)

    @property
    def tasks(self) -> int:
        return sum(s.tasks for s in self.stages)

    @property
    def unknown(self) -> list[str]:
        return [s.stage.name for s in self.stages if s.throughput is None]


def _row(raw: dict[str, str], where: str) -> Throughput:
    try:
        row = Throughput(raw["stage"], raw["unit"], raw["device"], float(raw["seconds_per_item"]),
                         int(raw["bytes_per_item"]), raw["basis"], raw["source"],
                         int(raw.get("peak_rss_mb") or 0))
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"{where}: bad throughput row {raw}: {exc}") from None
    if row.unit not in _UNITS or not row.source.strip():
        raise ConfigError(f"{where}: row {row.stage!r} needs unit in {_UNITS} and a source")
    return row


def load_throughput(path: str | Path | None = None) -> dict[str, Throughput]:
    """The throughput table, by stage name (the packaged one unless ``path`` is given)."""
    if path is None:
        text = resources.files("madbench_common").joinpath("data/throughput.csv").read_text()
        where = "madbench_common/data/throughput.csv"
    else:
        text, where = Path(path).read_text(), str(path)
    rows = [_row(raw, where) for raw in csv.DictReader(io.StringIO(text))]
    return {r.stage: r for r in rows}


def _round_up(seconds: float, step: int = DEADLINE_STEP) -> int:
    return int(-(-seconds // step) * step)


def size_stage(stage: Stage, seconds: float, status: str, memory_gb: float | None
               ) -> tuple[int, int, int]:
    """Shards, shard deadline (s) and GPU-memory request (GiB) of ``stage`` planned at
    ``seconds`` of compute in all; ``status`` is its GPU figure's (``""`` for a stage not
    timed by one, which keeps its timeout and request) and ``memory_gb`` its memory.

    A GPU stage: shards (up to :data:`MAX_SHARDS`) until ``DEADLINE_MARGIN × shard time +
    START_SECONDS`` fits the stage's timeout; that is its deadline (rounded up to
    :data:`DEADLINE_STEP`, at least :data:`DEADLINE_FLOOR`, past the timeout only where
    the shards are at their cap); a GPU of more than ``memory × MEMORY_MARGIN`` GiB (at least
    the card's ``gpu_memory_gib``). A CPU stage: shards until each takes at most
    :data:`SHARD_TIMEOUT_SHARE` of the timeout, which stays its deadline."""
    shards = stage.shards
    if not status:
        if stage.sharded and seconds > 0:
            budget = int(SHARD_TIMEOUT_SHARE * stage.timeout)
            shards = max(shards, -(-int(seconds) // budget))
        return shards, stage.timeout, stage.gpu_memory_gib
    margin = DEADLINE_MARGIN[status]
    room = max(stage.timeout - START_SECONDS, DEADLINE_STEP)
    if stage.sharded:
        shards = max(shards, min(MAX_SHARDS, math.ceil(margin * seconds / room)))
    deadline = max(DEADLINE_FLOOR, _round_up(margin * seconds / shards + START_SECONDS))
    memory = 0 if memory_gb is None else math.ceil(memory_gb * 1e9 * MEMORY_MARGIN[status]
                                                    / _GIB)
    return shards, deadline, max(stage.gpu_memory_gib, memory)


def _after_assemble(graph: Graph, stage: Stage) -> bool:
    """Whether ``stage`` reads (directly or not) the benchmark samples of ``assemble``."""
    seen: set[str] = set()
    todo = list(stage.inputs)
    while todo:
        name = todo.pop()
        if name == _SAMPLES_STAGE:
            return True
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name].inputs)
    return False


def plan_run(
    graph: Graph, clips: int, samples: int | None = None,
    table: dict[str, Throughput] | None = None, gpu_table: dict[str, GpuModel] | None = None,
) -> Plan:
    """Estimate ``graph`` at ``clips`` eligible clips (samples scale as in the paper)."""
    if clips <= 0:
        raise ConfigError("--clips must be positive")
    if samples is None:
        samples = math.ceil(clips * PAPER_SAMPLES / PAPER_CLIPS)
    table = load_throughput() if table is None else table
    gpu_table = load_gpu_models() if gpu_table is None else gpu_table
    plans = []
    for stage in graph:
        row = table.get(stage.name)
        per_sample = row.unit == "sample" if row is not None else _after_assemble(graph, stage)
        items = samples if per_sample else clips
        model = gpu_table.get(stage.name) if stage.model else None
        unsized = StagePlan(stage, items, stage.shards + 1, row,
                            model.figure() if model else None,
                            "sample" if per_sample else "clip")
        gpu = unsized.gpu if unsized.stage.gpu else None
        shards, deadline, memory = size_stage(
            stage, unsized.compute_hours * 3600, unsized.figure_status if gpu else "",
            gpu.memory_gb if gpu else None)
        plans.append(dataclasses.replace(unsized, tasks=shards + 1, shards=shards,
                                         deadline=deadline, gpu_memory_gib=memory))
    return Plan(clips, samples, plans)


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    raise AssertionError("unreachable")


def _gpu_cells(s: StagePlan) -> str:
    if s.gpu is None:
        return f"{'—':>7}{'—':>9}  {'—':<9}"
    return f"{s.gpu.memory_gb:>7.1f}{s.gpu.seconds_per_item:>9.2f}  {s.gpu.status:<9}"


def _stage_line(s: StagePlan) -> str:
    t = s.throughput
    flag = "  ! shard over its deadline" if s.over_deadline else ""
    unit = f"{s.items} {s.unit}s"
    if t is None:
        if not s.gpu_estimated:
            unit = "—"
        hours = f"{s.compute_hours:>10.2f}" if s.gpu_estimated else f"{'—':>10}"
        return (f"{s.stage.name:<{_NAME_W}}{s.tasks:>6}   {unit:>13}{s.gpu_hours:>9.2f}"
                f"{_gpu_cells(s)}{hours}{'—':>11}  (no throughput row){flag}")
    return (f"{s.stage.name:<{_NAME_W}}{s.tasks:>6}   {unit:>13}{s.gpu_hours:>9.2f}"
            f"{_gpu_cells(s)}{s.compute_hours:>10.2f}{_size(s.storage_bytes):>11}  {t.basis}{flag}")


def image_pull_line(graph: Graph, lock_path: Path | None = None) -> str:
    """What a node that runs every stage of ``graph`` pulls: the unique layers of the
    stages' images (shared bases counted once) against the sum of their sizes, from the
    build records in ``images/images.lock.yaml`` (uncompressed layer sizes)."""
    from madbench_common.imagefactory.imagelock import layer_totals

    slugs = sorted({s.image for s in graph})
    t = layer_totals(slugs, lock_path)
    counted = len(slugs) - len(t.unrecorded)
    line = (f"images: a node that runs every stage pulls {_size(t.unique_bytes)}: the unique "
            f"layers of {counted} images whose sizes sum to {_size(t.summed_bytes)} "
            f"({t.ratio:.0%}; uncompressed, from the build records in images/images.lock.yaml)")
    if t.unrecorded:
        line += f"; not built here, so not counted: {', '.join(t.unrecorded)}"
    return line + "\n"


def format_plan(plan: Plan) -> str:
    """A plain-text report: one line per stage, totals, then every figure's source."""
    head = (f"MADBench plan: {plan.clips} eligible clips, {plan.samples} samples\n\n"
            f"{'stage':<{_NAME_W}}{'tasks':>6}   {'items':>13}{'GPU-h':>9}{'GPU-GB':>7}"
            f"{'GPU-s/it':>9}  {'GPU fig.':<9}{'compute-h':>10}{'storage':>11}  basis")
    lines = [head, *(_stage_line(s) for s in plan.stages)]
    lines.append(f"{'total':<{_NAME_W}}{plan.tasks:>6}   {'':>13}{plan.gpu_hours:>9.2f}{'':>27}"
                 f"{plan.gpu_hours + plan.cpu_hours:>10.2f}{_size(plan.storage_bytes):>11}")
    lines.append(f"\nGPU-GB, GPU-s/it: the paper's model of each model stage per item on an "
                 f"{REFERENCE_GPU}; `estimated` from its size and sampling steps "
                 "(the catalog cards, madbench_common/models/catalog/<slug>.yaml, gpu:) until a "
                 "GPU run measures it (madbench gpu-bench). GPU-h "
                 "counts the stages that request a GPU; compute-h of those is GPU time.")
    lines += _figures_lines(plan)
    if plan.unknown:
        lines.append("\nnot estimated (no row in the throughput table; storage, and the "
                     "time of stages without a GPU estimate, left out of the totals): "
                     f"{', '.join(plan.unknown)}")
    lines.append("\nsources:")
    lines += [f"  {s.stage.name}: {s.throughput.source}" for s in plan.stages if s.throughput]
    for status in ("measured", "estimated"):
        rows = [s for s in plan.stages if s.gpu and s.gpu.status == status]
        if rows:
            lines.append(f"  {status} GPU figures:")
            lines += [f"  {s.stage.name} GPU ({s.gpu.model}): {s.gpu.source}" for s in rows
                      if s.gpu]
    return "\n".join(lines) + "\n"


def _figures_lines(plan: Plan) -> list[str]:
    """GPU-hours from measured and from estimated figures apart, and each GPU stage's
    sizing (shards, deadline, GPU memory) from its figure."""
    gpu = [s for s in plan.stages if s.gpu_hours > 0]
    if not gpu:
        return []
    hours = {k: sum(s.gpu_hours for s in gpu if s.figure_status == k)
             for k in ("measured", "estimated")}
    count = {k: sum(s.figure_status == k for s in gpu) for k in hours}
    total = sum(hours.values()) or 1.0
    lines = [f"\nGPU-h by figure: measured {hours['measured']:.2f} ({count['measured']} "
             f"stages), estimated {hours['estimated']:.2f} ({count['estimated']} stages); "
             f"measured share {hours['measured'] / total:.0%}.",
             f"\nGPU stages sized from their figures (margins: deadline {_margins(DEADLINE_MARGIN)}"
             f" x shard GPU time + {START_SECONDS} s start, at least {DEADLINE_FLOOR} s; shards "
             f"raised, up to {MAX_SHARDS}, to keep it within the stage's timeout; GPU memory "
             f"{_margins(MEMORY_MARGIN)} x GPU-GB):",
             f"  {'stage':<{_NAME_W}}{'figure':<10}{'shards':>6}{'shard-h':>9}{'deadline s':>11}"
             f"{'timeout s':>10}{'GPU >GiB':>9}"]
    lines += [f"  {s.stage.name:<{_NAME_W}}{s.figure_status:<10}{s.shards:>6}"
              f"{s.shard_seconds / 3600:>9.2f}{s.deadline:>11}{s.stage.timeout:>10}"
              f"{s.gpu_memory_gib or '—':>9}" for s in gpu]
    return lines


def _margins(table: dict[str, float]) -> str:
    return " / ".join(f"{v:g} {k}" for k, v in table.items())
