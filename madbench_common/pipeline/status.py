"""Run status: which stages finished, which shards are pending, what was quarantined, and
how many transient S3 errors were retried (summed over the run logs under ``_logs/``).

A damaged merged manifest is not an error here: it is rebuilt from the stage's shards
when their merge gives the recorded sha256, else its stage is shown as not done (the
next ``madbench run`` merges it again); a damaged marker likewise
(:func:`~madbench_common.pipeline.repair.manifest_intact`)."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from madbench_common.core.errors import ChecksumError, MadbenchError
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.core.store import RunStore
from madbench_common.pipeline.failures import BUDGET_PARAM, is_fault
from madbench_common.pipeline.graph import Graph, Stage
from madbench_common.pipeline.repair import manifest_intact
from madbench_common.pipeline.stage import load_impl, read_marker, reason_counts

__all__ = ["QuarantineEntry", "RunStatus", "StageStatus", "collect_retries", "collect_status",
           "rejection_table", "table_one"]

log = logging.getLogger("madbench")
_SHARD = re.compile(r"^(?P<stage>[^/]+)/(?P<fp>[^/]+)/shards/(?P<i>\d+)-of-(?P<n>\d+)\._SUCCESS$")


@dataclass(frozen=True)
class QuarantineEntry:
    stage: str
    item: str
    reason: str
    detail: str


@dataclass
class StageStatus:
    stage: str
    done: bool
    rows: int = 0
    rejected: int = 0
    shards_done: int = 0
    shards_total: int = 0
    counts: dict[str, Any] = field(default_factory=dict)
    reasons: dict[str, int] = field(default_factory=dict)
    """Rejected rows by reason (data and fault reasons alike)."""
    failed: int = 0
    """Rows rejected for a fault reason: what the stage's rejection budget bounds."""
    budget: float | None = None
    """The stage's ``max_failed_fraction`` as its marker records it (``None``: older)."""


@dataclass
class RunStatus:
    run_id: str
    uri: str
    stages: list[StageStatus]
    quarantine: list[QuarantineEntry]
    s3_retries: dict[str, int] = field(default_factory=dict)
    """Transient S3 replies retried, by code, over every run and pod log of the run."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)


def _partial_shards(run: RunStore, stage: str) -> tuple[int, int]:
    """(done, total) shards of the newest unfinished attempt of ``stage``."""
    best: tuple[int, int] = (0, 0)
    per_attempt: dict[tuple[str, int], int] = {}
    for key in run.list(stage):
        m = _SHARD.match(key)
        if m:
            k = (m["fp"], int(m["n"]))
            per_attempt[k] = per_attempt.get(k, 0) + 1
    for (_, total), done in per_attempt.items():
        best = max(best, (done, total))
    return best


def _stage_counts(rows: list[Any]) -> dict[str, Any]:
    """Table 1 style counts of one stage's rows (which counts depends on the row kind)."""
    counts: dict[str, Any] = {}
    if rows and hasattr(rows[0], "eligible"):
        counts["eligible"] = sum(bool(r.eligible) for r in rows)
        for r in rows:
            for reason in r.fail_reasons:
                _bump(counts, f"fail_{reason}")
    if rows and hasattr(rows[0], "condition_family"):  # DEAF rows have a ``condition`` only
        return counts | _condition_counts(rows)
    if rows and hasattr(rows[0], "protocol"):
        return counts | _sample_counts(rows)
    if rows and hasattr(rows[0], "qc_pass"):
        return counts | _component_counts(rows)
    if rows and hasattr(rows[0], "target_clip_id") and hasattr(rows[0], "similarity"):
        return counts | _pair_counts(rows)
    if rows and hasattr(rows[0], "split"):
        for r in rows:
            counts[f"split_{r.split}"] = counts.get(f"split_{r.split}", 0) + 1
    return counts


def _bump(counts: dict[str, Any], key: str, n: int = 1) -> None:
    counts[key] = counts.get(key, 0) + n


def _component_counts(rows: list[Any]) -> dict[str, Any]:
    """Planned, generated and QC-retained components per kind, per setting, and (env)
    scene-matched vs -mismatched (paper Table 1)."""
    counts: dict[str, Any] = {}
    for r in rows:
        if not r.uri and r.ok:
            _bump(counts, f"{r.component}_planned")
            continue
        keys = [r.component, r.setting]
        if r.component == "env":
            keys.append("env_matched" if r.scene_match else "env_mismatched")
        for k in keys:
            _bump(counts, f"{k}_generated", int(r.ok))
            if r.stage == "component_qc":
                _bump(counts, f"{k}_retained", int(bool(r.qc_pass)))
    return counts


def _condition_counts(rows: list[Any]) -> dict[str, Any]:
    """Robustness conditions (``perturb``): test samples per condition, and the clips."""
    counts: dict[str, Any] = {"clips": len({r.clip_id for r in rows if r.ok})}
    for r in rows:
        _bump(counts, f"{r.condition}", int(r.ok))
    return counts


def _sample_counts(rows: list[Any]) -> dict[str, Any]:
    """Samples per protocol and split, the clips they come from, and whether every core
    protocol holds 4 × the same clips (Table 1); scene-consistency samples per condition."""
    counts: dict[str, Any] = {}
    ok = [r for r in rows if r.ok]
    core = [r for r in ok if not getattr(r, "sc_condition", "")]
    counts["clips"] = len({r.clip_id for r in core})
    for r in core:
        _bump(counts, f"clips_{r.split}", int(r.variant == "R" and r.protocol == "balanced"))
    for r in ok:
        cond = getattr(r, "sc_condition", "")
        if cond:
            cls = "consistent" if r.scene_consistent else "inconsistent"
            _bump(counts, f"{r.protocol}/{cond}/{cls}")
            if cond != "D-S" and not r.scene_consistent:  # a donor's real ê (§5.3)
                _bump(counts, f"{r.protocol}/{cond}/looped", int(r.env_fit == "loop"))
        else:
            _bump(counts, f"{r.protocol}/{r.split}")
            _bump(counts, f"{r.protocol}")
    per = {r.protocol: set() for r in core}  # type: dict[str, set[str]]
    for r in core:
        per[r.protocol].add(r.clip_id)
    counts["protocols_hold_4x_same_clips"] = bool(core) and all(
        clips == per[core[0].protocol] and counts[p] == 4 * len(clips)
        for p, clips in per.items())
    return counts


def _pair_counts(rows: list[Any]) -> dict[str, Any]:
    """Pairs, similarity, relaxed pairs, and sources per number of targets (fewer than
    asked where no target met every constraint)."""
    ok = [r for r in rows if r.ok]
    sims = [r.similarity for r in ok]
    counts: dict[str, Any] = {
        "pairs": len(ok), "similarity_mean": round(sum(sims) / max(len(sims), 1), 3),
        "similarity_max": round(max(sims, default=0.0), 3),
        "relaxed": sum(bool(r.relaxed) for r in ok)}
    per_source: dict[str, int] = {}
    for r in ok:
        per_source[r.clip_id] = per_source.get(r.clip_id, 0) + 1
    for n in sorted(set(per_source.values())):
        counts[f"sources_with_{n}_targets"] = sum(v == n for v in per_source.values())
    return counts


def table_one(status: RunStatus) -> list[tuple[str, str]]:
    """The paper's Table 1 statistics of a run, as (statistic, value) rows."""
    c = {s.stage: s.counts for s in status.stages if s.done}
    qc, comp, sam = c.get("source_qc", {}), c.get("component_qc", {}), c.get("assemble", {})
    out = [("Generation-eligible source clips", str(qc.get("eligible", "?")))]
    for kind, name in (("speech", "Speech"), ("env", "Environmental"),
                       ("env_matched", "  scene-matched env"),
                       ("env_mismatched", "  scene-mismatched env (text-to-audio)")):
        out.append((f"{name} components (generated / QC-retained)",
                    f"{comp.get(f'{kind}_generated', 0)} / {comp.get(f'{kind}_retained', 0)}"))
    splits = ("train", "val", "test")
    out.append(("Source clips (train / val / test)", f"{sam.get('clips', 0)} (" + "/".join(
        str(sam.get(f"clips_{s}", 0)) for s in splits) + ")"))
    for proto in ("balanced", "scene_matched", "scene_mismatched"):
        out.append((f"Samples per protocol, {proto} (train / val / test)",
                    f"{sam.get(proto, 0)} (" + "/".join(
                        str(sam.get(f"{proto}/{s}", 0)) for s in splits) + ")"))
    out.append(("Every protocol = 4 × the same clips",
                str(sam.get("protocols_hold_4x_same_clips", False))))
    for cond in ("D-R", "S-R", "D-S"):
        key = f"scene_consistency/{cond}"
        out.append((f"Scene consistency {cond} (consistent / inconsistent)",
                    f"{sam.get(key + '/consistent', 0)} / {sam.get(key + '/inconsistent', 0)}"))
    for cond in ("D-R", "S-R"):
        key = f"scene_consistency/{cond}"
        n, looped = sam.get(key + "/inconsistent", 0), sam.get(key + "/looped", 0)
        out.append((f"  {cond} donor ê looped to the clip's length (shorter donor)",
                    f"{looped} / {n}" + (f" ({100 * looped / n:.0f} %)" if n else "")))
    return out


def collect_retries(run: RunStore) -> dict[str, int]:
    """Sum ``s3_retries`` over the local run logs and the per-pod logs of ``run``."""
    total: Counter[str] = Counter()
    for key in run.list("_logs"):
        if not key.endswith(".json"):
            continue
        try:
            record = json.loads(run.get_bytes(key))
        except (ValueError, MadbenchError):
            continue
        total.update({k: int(v) for k, v in record.get("s3_retries", {}).items()})
    return dict(total)


def _intact_marker(run: RunStore, stage: Stage) -> dict[str, Any] | None:
    """The stage's marker if the stage is done and its manifest intact (rebuilt if need be)."""
    try:
        marker = read_marker(run, stage.name)
    except ChecksumError as exc:
        log.warning("%s; stage %s will run again", exc, stage.name)
        run.delete(f"{stage.name}/_SUCCESS")
        return None
    if marker is None or not manifest_intact(run, stage, marker):
        return None
    return marker


def rejection_table(run: RunStore, graph: Graph) -> list[dict[str, Any]]:
    """Rejected rows of every finished stage by reason, from the ``_SUCCESS`` markers:
    ``stage``, ``reason``, ``kind`` (``fault``: counts against the stage's budget, or
    ``data``), ``count``, the stage's ``rows`` and its ``max_failed_fraction``."""
    out = []
    for stage in graph:
        marker = read_marker(run, stage.name)
        if marker is None:
            continue
        budget = (marker.get("budget") or {}).get(BUDGET_PARAM)
        for reason, count in (marker.get("reasons") or {}).items():
            out.append({"stage": stage.name, "reason": reason,
                        "kind": "fault" if is_fault(reason) else "data", "count": count,
                        "rows": marker["rows"], BUDGET_PARAM: budget})
    return out


def collect_status(run: RunStore, graph: Graph) -> RunStatus:
    """Status of every stage of ``graph`` in ``run``."""
    stages, quarantine = [], []
    for stage in graph:
        marker = _intact_marker(run, stage)
        if marker is None:
            done, total = _partial_shards(run, stage.name)
            stages.append(StageStatus(stage.name, False, shards_done=done, shards_total=total))
            continue
        impl = load_impl(stage.target)
        data = run.get_bytes(f"{stage.name}/manifest.parquet", marker["manifest_sha256"])
        rows = read_manifest_bytes(impl.row_type, data)
        for r in rows:
            if not r.ok:
                quarantine.append(QuarantineEntry(stage.name, str(getattr(r, impl.id_field)),
                                                  r.reason, r.detail))
        reasons = reason_counts(r.reason for r in rows if not r.ok)
        stages.append(StageStatus(stage.name, True, marker["rows"], marker["rejected"],
                                  counts=_stage_counts(rows), reasons=reasons,
                                  failed=sum(n for k, n in reasons.items() if is_fault(k)),
                                  budget=(marker.get("budget") or {}).get(BUDGET_PARAM)))
    return RunStatus(run.run_id, run.store.uri(run.run_id), stages, quarantine,
                     collect_retries(run))
