"""GPU memory and GPU-seconds per item of every model stage, for ``madbench plan``.

Figures come from the catalog cards' ``gpu:`` blocks. A row is ``measured`` (from a GPU
run) or ``estimated`` on the reference GPU (an A100 80 GB): memory from resident
parameters plus workspace and context; time per sampling step the larger of compute at
25 % of peak and one read of the stepped weights at 60 % of the bandwidth, plus the
non-stepped networks and per-item I/O. Every row carries its sources; the constants below
are choices, named so a measured row can replace an estimate without guessing.
An estimated row may instead give ``gpu_s_per_item`` with its ``basis`` (scaled from a
measurement of the same backbone elsewhere); a ``measured`` row is written by ``madbench
gpu-bench`` on a CUDA machine, with how it was measured.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

from madbench_common.core.errors import ConfigError

__all__ = ["REFERENCE_GPU", "GpuFigure", "GpuModel", "load_gpu_models"]

REFERENCE_GPU = "A100 80GB"
_PEAK = {2: 312e12, 4: 156e12}
_BANDWIDTH = 2.0e12
_MFU, _BW_EFF = 0.25, 0.6
_WORKSPACE, _CONTEXT_GB, _OVERHEAD_S = 0.25, 1.5, 0.5
_STATUSES = ("estimated", "measured")


@dataclass(frozen=True)
class GpuFigure:
    """One model stage's GPU cost per item."""

    model: str
    memory_gb: float
    seconds_per_item: float
    status: str
    source: str


@dataclass(frozen=True)
class GpuModel:
    """One row of the GPU table."""

    model: str
    stages: tuple[str, ...]
    params_m: float
    step_params_m: float
    bytes_per_param: int
    steps: int
    passes: int
    frames: int
    status: str
    gpu_mem_gb: float | None
    gpu_s_per_item: float | None
    source: str
    basis: str = ""
    """Where an estimated row's given figures come from (empty: the size rule)."""
    batch: int = 1
    """Items per GPU call of the stage."""

    def figure(self) -> GpuFigure:
        """Measured figures as given; an estimate from its basis where given, else from the
        rule of the module docstring."""
        if self.status == "measured":
            assert self.gpu_mem_gb is not None and self.gpu_s_per_item is not None
            return GpuFigure(self.model, self.gpu_mem_gb, self.gpu_s_per_item, self.status,
                             self.source)
        rule = self._rule()
        return GpuFigure(self.model, rule.memory_gb if self.gpu_mem_gb is None
                         else self.gpu_mem_gb,
                         rule.seconds_per_item if self.gpu_s_per_item is None
                         else self.gpu_s_per_item, self.status,
                         f"{self.source}; basis: {self.basis}" if self.basis else self.source)

    def _rule(self) -> GpuFigure:
        memory = self.params_m * 1e6 * self.bytes_per_param * (1 + _WORKSPACE) / 1e9
        peak = _PEAK[self.bytes_per_param] * _MFU
        compute = 2e6 * self.step_params_m * self.frames * self.passes / peak
        weights = self.step_params_m * 1e6 * self.bytes_per_param / (_BANDWIDTH * _BW_EFF)
        once = 2e6 * (self.params_m - self.step_params_m) * self.frames / peak
        seconds = self.steps * max(compute, weights) + once + _OVERHEAD_S
        return GpuFigure(self.model, memory + _CONTEXT_GB, seconds, self.status, self.source)


def _opt(value: str) -> float | None:
    return float(value) if value.strip() else None


def _row(raw: dict[str, str], where: str) -> GpuModel:
    try:
        row = GpuModel(
            raw["model"], tuple(s for s in raw["stages"].split(";") if s),
            float(raw["params_m"]), float(raw["step_params_m"]), int(raw["bytes_per_param"]),
            int(raw["steps"]), int(raw["passes"]), int(raw["frames"]), raw["status"],
            _opt(raw["gpu_mem_gb"]), _opt(raw["gpu_s_per_item"]), raw["source"],
            raw.get("basis") or "", int(raw.get("batch") or 1))
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"{where}: bad GPU row {raw}: {exc}") from None
    measured = row.gpu_mem_gb is not None and row.gpu_s_per_item is not None
    given = row.gpu_mem_gb is not None or row.gpu_s_per_item is not None
    if row.status == "estimated" and given and not row.basis.strip():
        raise ConfigError(f"{where}: row {row.model!r}: an estimate that gives gpu_mem_gb or "
                          f"gpu_s_per_item states its basis")
    if (row.status not in _STATUSES or (row.status == "measured" and not measured)
            or row.bytes_per_param not in _PEAK or not row.source.strip() or not row.stages
            or not 0 < row.step_params_m <= row.params_m):
        raise ConfigError(f"{where}: row {row.model!r} needs status estimated|measured (measured "
                          f"with gpu_mem_gb and gpu_s_per_item), bytes_per_param 2|4, "
                          f"0 < step_params_m <= params_m, stages and a source")
    return row


def _card_rows() -> list[tuple[dict[str, str], str]]:
    """The GPU figures of every catalog card that has them, one table row per ``gpu`` block
    (``models/catalog/<slug>.yaml``)."""
    from madbench_common.models.catalog import cards

    rows = []
    for card in cards().values():
        for block in card.gpu:
            raw = {k: "" if v is None else str(v) for k, v in block.items()
                   if k not in ("stages", "measured")}
            raw.setdefault("gpu_mem_gb", "")
            raw.setdefault("gpu_s_per_item", "")
            raw["stages"] = ";".join(block["stages"])
            rows.append((raw, f"madbench_common/models/catalog/{card.slug}.yaml"))
    return rows


def load_gpu_models(path: str | Path | None = None) -> dict[str, GpuModel]:
    """stage name → the GPU row of the model (or the models) that runs in it: the catalog
    cards' ``gpu`` figures; with ``path``, a CSV table of the same columns plus ``stages``
    (``;``-separated) alone."""
    if path is None:
        rows = _card_rows()
    else:
        text, where = Path(path).read_text(), str(path)
        rows = [(raw, where) for raw in csv.DictReader(io.StringIO(text))]
    out: dict[str, GpuModel] = {}
    for raw, source in rows:
        row = _row(raw, source)
        for stage in row.stages:
            if stage in out:
                raise ConfigError(f"{source}: stage {stage!r} has two models")
            out[stage] = row
    return out
