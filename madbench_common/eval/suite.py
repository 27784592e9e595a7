"""The whole evaluation protocol in one call: heads and/or direct scores → result tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from madbench_common.eval import analysis as A
from madbench_common.eval.direct import direct_groups
from madbench_common.eval.runner import FeatureSet, GroupScores, run_heads

__all__ = ["EvalConfig", "EvalResult", "run_evaluation"]


@dataclass(frozen=True)
class EvalConfig:
    """Knobs of the protocol; defaults are the benchmark's."""

    c: float = 1.0
    n_boot: int = 1000
    seed: int = 0
    logo: bool = True
    score_kind: str = "prob"
    tasks: tuple[str, ...] | None = None


@dataclass
class EvalResult:
    """Result tables (lists of flat records) and the scored groups behind them."""

    model: str
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    groups: list[GroupScores] = field(default_factory=list)


def _tables(groups: list[GroupScores], cfg: EvalConfig) -> dict[str, list[dict[str, Any]]]:
    b, s = cfg.n_boot, cfg.seed
    return {
        "tasks": A.task_records(groups, b, s),
        "variants": A.variant_records(groups, b, s),
        "pairing": A.pair_records(groups, b, s),
        "ablation": A.ablation_records(groups, b, s),
        "generators": A.generator_records(groups),
        "logo": A.logo_records(groups),
    }


def run_evaluation(model: str, samples: pd.DataFrame, *, features: FeatureSet | None = None,
                   scores: pd.DataFrame | None = None,
                   config: EvalConfig | None = None) -> EvalResult:
    """Evaluate ``model`` from frozen features (heads) and/or native scores (direct transfer)."""
    cfg = config or EvalConfig()
    result = EvalResult(model)
    if features is not None and features.matrices:
        groups = run_heads(samples, features, tasks=list(cfg.tasks) if cfg.tasks else None,
                           c=cfg.c, logo=cfg.logo)
        result.groups.extend(groups)
        result.tables |= _tables(groups, cfg)
    if scores is not None and len(scores):
        groups = direct_groups(samples, scores, cfg.score_kind)
        result.groups.extend(groups)
        direct = _tables(groups, cfg)
        for name, rows in direct.items():
            result.tables.setdefault(name, []).extend({"head": "direct"} | r for r in rows)
    return result
