"""``images/rehearsal.json`` and ``images/rehearsal.md``, the record of a pass: per image its
build seconds, size, torch/CUDA, tiny weights, stages and the kind of model each ran, rows,
peak RSS and image test; the pass's wall time over all its parts, relaxations and commit."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from madbench_common.cluster.argo_local import WorkflowResult
from madbench_common.cluster.lint import image_slug
from madbench_common.cluster.rehearsal.images import ImageProvider, _bare
from madbench_common.cluster.rehearsal.profile import (
    BANNER,
    ROOT,
    SMOKE_BANNER,
    Options,
    Profile,
    WorkflowProfile,
    relaxations,
)
from madbench_common.cluster.rehearsal.state import State, _utc_now


def _commit() -> dict[str, Any]:
    """The commit the rehearsal ran on, and the tracked files that differed from it (image
    builds record themselves in images/images.lock.yaml, for one)."""
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                         text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                            "--untracked-files=no"], capture_output=True, text=True).stdout
    return {"head": out.stdout.strip() or "unknown",
            "modified": sorted(line[3:] for line in dirty.splitlines() if line.strip())}


def build_records(state: State, results: Mapping[str, WorkflowResult],
                  markers: Mapping[str, Mapping[str, dict[str, Any]]],
                  provider: ImageProvider, wall: float, opts: Options, profile: Profile
                  ) -> dict[str, Any]:
    """Per image: build, size, torch/CUDA, weights, stages (rows, rejection reasons, the
    kind of model each ran), rows, peak RSS and whether it asked for a GPU and ran on the
    CPU; the relaxations of the pass."""
    per: dict[str, dict[str, Any]] = {}
    flows = {f.name: f for f in profile.workflows}
    for flow, result in results.items():
        for node, data in result.nodes.items():
            image = data.get("image")
            if not image:
                continue
            slug = image_slug(image.split("@", 1)[0])[0]
            rec = per.setdefault(slug, {"stages": set(), "pods": 0, "pods_run": 0,
                                        "pods_skipped": 0, "peak_rss_bytes": 0, "pod_s": 0.0,
                                        "cgroup_peak_bytes": 0, "failed": [],
                                        "gpu_requested": False, "workflows": set()})
            rec["workflows"].add(flow)
            rec["pods"] += 1
            # the template's request, whether its pod ran, was skipped or never started
            rec["gpu_requested"] |= bool(data.get("gpu"))
            attempts = data.get("attempts") or []
            if data.get("memo"):
                rec["pods_skipped"] += 1
            elif attempts:
                rec["pods_run"] += 1
            # a pod skipped by the memo ran before on the same image, weights and inputs: its
            # peaks are those of that run (a pass resumed across sessions keeps them)
            for a in [*attempts, *([data["earlier"]] if data.get("earlier") else [])]:
                rec["pod_s"] += float(a.get("seconds") or 0)
                rec["peak_rss_bytes"] = max(rec["peak_rss_bytes"], a.get("peak_rss_bytes") or 0)
                rec["cgroup_peak_bytes"] = max(rec["cgroup_peak_bytes"],
                                               a.get("cgroup_peak_bytes") or 0)
                rec["gpu_requested"] |= bool(a.get("gpu_requested"))
            if data["phase"] in ("Failed", "Error"):
                last = attempts[-1] if attempts else {}
                rec["failed"].append({"node": node, "phase": data["phase"],
                                      "exit_code": last.get("exit_code"),
                                      "message": str(last.get("message", ""))[-800:]})
            stage = _stage_from_template(data.get("template", ""))
            if stage:
                rec["stages"].add((flow, stage))
    images = {}
    for slug, rec in sorted(per.items()):
        entry = state.image(slug)
        rows: dict[str, dict[str, Any] | None] = {}
        models: dict[str, str] = {}
        for flow, stage in sorted(rec["stages"]):
            name = stage.replace("-", "_")
            m = markers.get(flow, {}).get(name)
            rows[f"{flow}:{name}"] = _stage_record(m) if m else None
            models[f"{flow}:{name}"] = model_kind(
                slug, name, flows.get(flow), {s.replace("-", "_") for f, s in rec["stages"]
                                              if f == flow})
        ok = sum(r["rows"] - r["rejected"] for r in rows.values() if r)
        rejected = sum(r["rejected"] for r in rows.values() if r)
        images[slug] = {
            "image_id": entry.get("image_id"), "build_s": entry.get("build_s"),
            "built_by_rehearsal": bool(entry.get("built_by_rehearsal")),
            "size_mb": round(entry["size_bytes"] / 1e6) if entry.get("size_bytes") else None,
            "torch": entry.get("torch"), "cuda": entry.get("cuda"),
            "weights": {"callable": entry.get("weights_callable") or None,
                        "files": entry.get("weights_files"),
                        "mb": round((entry.get("weights_bytes") or 0) / 1e6, 1),
                        "seconds": entry.get("weights_s")},
            "workflows": sorted(rec["workflows"]), "stages": rows, "models": models,
            "rows_ok": ok, "rows_rejected": rejected,
            "pods": rec["pods"], "pods_run": rec["pods_run"], "pods_skipped": rec["pods_skipped"],
            "pod_s": round(rec["pod_s"]),
            "peak_rss_mb": round(rec["peak_rss_bytes"] / 2**20) or None,
            "cgroup_peak_mb": round(rec["cgroup_peak_bytes"] / 2**20) or None,
            "gpu_requested_ran_on_cpu": rec["gpu_requested"],
            "status": "failed" if rec["failed"] else "ok", "failures": rec["failed"],
            "image_test": test if (test := entry.get("image_test")) and entry.get("image_id")
            and test.get("image_id") == _bare(entry.get("image_id")) else None,
        }
    tiny = any(f.random_weights for f in profile.workflows if f.name in results)
    # a stage that rejected every row it got stops the data: the stages after it
    # "succeed" on nothing, and a report of empty tables is no rehearsal (a full pass
    # reached the detectors with 0 samples: component_qc rejected every environment
    # component, then assemble every sample). A stage given no row at all may be
    # legitimate (features_references has no model in the full profile).
    empty = sorted({stage for r in images.values() for stage, n in r["stages"].items()
                    if n is not None and n["rows"] > 0 and n["rows"] <= n["rejected"]})
    return {
        "note": BANNER if tiny else SMOKE_BANNER, "commit": _commit(),
        "code_digest": provider.digest,
        "finished_at": _utc_now(),
        "wall_s": round(wall), "complete": all(r.phase == "Succeeded" for r in results.values())
        and set(results) == set(opts.workflows) and not (opts.params or opts.stage_sets)
        and not empty,
        "empty_stages": empty,
        "workflows": {n: {"phase": r.phase, "seconds": round(r.seconds),
                          "failures": [{k: f.get(k) for k in ("podName", "phase", "exitCode",
                                                              "message")}
                                       for f in r.failures]}
                      for n, r in results.items()},
        "relaxations": relaxations([f for f in profile.workflows if f.name in results]),
        "rejections": {stage: n["reasons"] for r in images.values()
                       for stage, n in r["stages"].items() if n is not None and n["reasons"]},
        "profile": {"clips_every": profile.every, "shards": profile.shards,
                    "cpu_deadline_scale": profile.cpu_deadline_scale,
                    "workers": opts.workers or profile.workers,
                    "keep_images": opts.keep_images, "image_tests": opts.image_tests,
                    "overrides": [*(f"-p {p}" for p in opts.params),
                                  *(f"--set {s}" for s in opts.stage_sets)]},
        "images": images,
    }


def _stage_record(marker: Mapping[str, Any]) -> dict[str, Any]:
    """A stage's rows, rejected rows, rejected rows by reason and those of them that count
    against its rejection budget (faults), from its ``_SUCCESS`` marker."""
    from madbench_common.pipeline.failures import BUDGET_PARAM, is_fault

    reasons = {str(k): int(v) for k, v in (marker.get("reasons") or {}).items()}
    return {"rows": int(marker.get("rows") or 0), "rejected": int(marker.get("rejected") or 0),
            "reasons": reasons, "faults": sum(n for k, n in reasons.items() if is_fault(k)),
            BUDGET_PARAM: (marker.get("budget") or {}).get(BUDGET_PARAM)}


STANDIN_WEIGHTS = "madbench_common.models.tiny.remote"
"""The module whose tiny-weights writers put stand-in remote code in place of hub-only
architectures (DF-Arena, MiniCPM-o): an image whose ``image_test.weights`` is one of its
functions runs a stand-in, not the release's code."""
MODEL_KINDS = {
    "tiny_random": "the release's own code on a randomly initialised tiny checkpoint",
    "stand_in": "stand-in code for a hub-only architecture, random weights (‡)",
    "api_stub": "an API model answered by the local API stub (§)",
    "reference": "the CPU reference image: a reference model or no model (†)",
}


def _standin_image(slug: str) -> bool:
    from madbench_common.imagefactory.images import load_image

    if not (ROOT / "images" / slug / "image.yaml").is_file():
        return False
    test = load_image(slug).image_test
    return test is not None and test.weights.split(":", 1)[0] == STANDIN_WEIGHTS


def _stub_stages(flow: WorkflowProfile, stages: Iterable[str]) -> set[str]:
    """The stages the profile points at the API stub: a ``stage_params`` entry, or a
    ``<stage>_<param>`` workflow parameter, whose value names ``{stub_port}``."""
    names = sorted(stages, key=len, reverse=True)
    out = {s for s, v in flow.stage_params.items() if "{stub_port}" in json.dumps(v)}
    for param, value in flow.params.items():
        if "{stub_port}" in value:
            out |= {next((s for s in names if param.startswith(f"{s}_")), param)}
    return out


def model_kind(slug: str, stage: str, flow: WorkflowProfile | None,
               stages: Iterable[str] = ()) -> str:
    """What ran in ``stage`` on image ``slug``: a key of :data:`MODEL_KINDS`."""
    if flow is not None and stage in _stub_stages(flow, {stage, *stages}):
        return "api_stub"
    if slug == "reference-cpu" or (flow is not None and not flow.random_weights):
        return "reference"
    return "stand_in" if _standin_image(slug) else "tiny_random"


def add_parts(records: dict[str, Any], state: State) -> None:
    """The parts of the pass this record ends, from the state: ``wall_s`` becomes the
    pass's, every part's added up (a part killed outright counts to its last save);
    ``part_wall_s`` is this part's. A pass resumed across sessions recorded only its last
    part's minutes before."""
    parts = state.pass_parts()
    records["parts"] = parts
    records["part_wall_s"] = records["wall_s"]
    records["wall_s"] = sum(int(p.get("wall_s") or 0) for p in parts) or records["wall_s"]


def _stage_from_template(template: str) -> str:
    for suffix in ("-shard", "-merge"):
        if template.endswith(suffix):
            return template[: -len(suffix)]
    return ""


def _test_cell(test: dict[str, Any] | None) -> str:
    """The record's image-test cell: this pass's image tested (``IMAGE_TESTS=1``) or not."""
    if not test:
        return "—"
    return f"pass ({test.get('wall_s')} s)" if test.get("result") == "pass" else "FAIL"


def _wall_text(records: dict[str, Any]) -> str:
    parts = records.get("parts") or ()
    if len(parts) <= 1:
        return f"{records['wall_s'] / 60:.1f} min"
    part = records.get("part_wall_s", records["wall_s"])
    return (f"{records['wall_s'] / 60:.1f} min in {len(parts)} parts (this part "
            f"{part / 60:.1f} min)")


def write_records(records: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=1, sort_keys=True) + "\n")
    path.with_suffix(".md").write_text(records_markdown(records))


def records_markdown(records: dict[str, Any]) -> str:
    """The per-image table of a rehearsal record."""
    lines = [
        "# Rehearsal record (generated by `make rehearsal`; do not edit)",
        "",
        f"> {records['note']}",
        "",
        f"Commit `{records['commit']['head']}`"
        + (f" (modified: {', '.join(records['commit']['modified'])})"
           if records["commit"]["modified"] else "")
        + (f", code digest `{records['code_digest'][:12]}`" if records.get("code_digest")
           else "")
        + f", finished {records['finished_at']}, wall time " + _wall_text(records)
        + f", complete: {'yes' if records['complete'] else 'no'}.",
        "",
    ]
    if len(records.get("parts") or ()) > 1:
        lines += ["Parts of this pass (each a run of `make rehearsal` that resumed the one "
                  "before):", ""]
        lines += [f"{i}. started {p.get('started_at')}, {int(p.get('wall_s') or 0) / 60:.1f} "
                  f"min, {p.get('outcome')}"
                  + (f" (last seen {p['saved_at']})" if p.get("outcome") == "killed"
                     and p.get("saved_at") else "")
                  for i, p in enumerate(records["parts"], 1)]
        lines.append("")
    if records.get("interrupted"):
        lines += [f"Interrupted ({records['interrupted']}): this records what ran until then; "
                  "the same command resumes the pass.", ""]
    if records["profile"].get("overrides"):
        lines += ["Not the profile as committed: " + ", ".join(
            f"`{o}`" for o in records["profile"]["overrides"]) + ".", ""]
    departures = records.get("argo_departures") or {}
    if departures or records.get("relaxations"):
        lines += ["Relaxations of this pass (what differs from `argo submit` on a cluster):", ""]
        lines += [f"- `{flow}:{r['name']}`: {r['local']} (Argo {r['argo']})"
                  for flow, rows in departures.items() for r in rows]
        lines += [f"- `{r['name']}`: {r['what']}" for r in records.get("relaxations") or ()]
        lines.append("")
    if records.get("rejections"):
        from madbench_common.pipeline.failures import is_fault

        lines += ["Rejected rows by stage and reason (**bold**: a fault, which counts against "
                  "the stage's rejection budget; the others are about the input data):", ""]
        lines += [f"- `{stage}`: " + ", ".join(
            (f"**{k}** {n}" if is_fault(k) else f"{k} {n}")
            for k, n in sorted(reasons.items(), key=lambda kv: (not is_fault(kv[0]), -kv[1])))
            for stage, reasons in sorted(records["rejections"].items())]
        lines.append("")
    if records.get("empty_stages"):
        lines += ["Stages that rejected every row they got: " + ", ".join(
            f"`{s}`" for s in records["empty_stages"]) + ".", ""]
    for name, w in records["workflows"].items():
        lines.append(f"- `{name}`: {w['phase']} in {w['seconds'] / 60:.1f} min" +
                     "".join(f"; failed {f['podName']} (exit {f['exitCode']})"
                             for f in w["failures"][:8]))
    tested = [r["image_test"] for r in records["images"].values() if r.get("image_test")]
    if records["profile"].get("image_tests") or tested:
        failed = [s for s, r in records["images"].items()
                  if r.get("image_test") and r["image_test"]["result"] != "pass"]
        lines += ["", f"Image tests (`make image-test` of the image the pods ran): "
                  f"{len(tested) - len(failed)} passed, {len(failed)} failed"
                  + (f" ({', '.join(failed)})" if failed else "") + "."]
    lines += ["", "A pod skipped by the memo ran in an earlier part of this pass on the same "
              "image, weights and inputs: its seconds and peak RSS are that run's. Pod seconds "
              "add up every pod's wall time (pods run side by side).",
              "", "Stages: " + "; ".join(f"{m}" for k, m in MODEL_KINDS.items()
                                         if k != "tiny_random") + ". GPU: the image's pods "
              "request nvidia.com/gpu and ran on the CPU.",
              "", "| image | build s | size MB | torch / CUDA | weights files (MB) | stages "
              "| rows ok / rejected | pods run / skipped | pod s | peak RSS MiB | GPU "
              "| image test | status |",
              "|---|---:|---:|---|---:|---|---:|---:|---:|---:|---|---|---|"]
    marks = {"stand_in": "‡", "api_stub": "§", "reference": "†", "tiny_random": ""}
    for slug, r in records["images"].items():
        models = r.get("models") or {}
        stages = ", ".join(k.split(":", 1)[1] + marks.get(models.get(k, ""), "")
                           for k in r["stages"])
        w = r["weights"]
        lines.append(
            f"| {slug} | {r['build_s'] if r['build_s'] is not None else '—'} | "
            f"{r['size_mb'] or '—'} | {r['torch'] or '—'} / {r['cuda'] or '—'} | "
            f"{w['files'] if w['callable'] else '—'} ({w['mb']}) | {stages} | "
            f"{r['rows_ok']} / {r['rows_rejected']} | {r['pods_run']} / {r['pods_skipped']} | "
            f"{r['pod_s']} | {r['peak_rss_mb'] or '—'} | "
            f"{'on CPU' if r.get('gpu_requested_ran_on_cpu') else '—'} | "
            f"{_test_cell(r.get('image_test'))} | "
            f"{r['status']} |")
    return "\n".join(lines) + "\n"
