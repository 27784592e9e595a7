"""Pipeline commands: ``run``, ``status``, ``copy``, and the per-shard ``stage run`` / ``merge``."""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from madbench_common.benchmarks.madbench.graph import build_graph
from madbench_common.cli.weights import allow_unpinned_arg, allowed_unpinned
from madbench_common.core.errors import ChecksumError, ConfigError, MadbenchError
from madbench_common.core.s3client import retries_since, retry_stats
from madbench_common.core.safetext import console_text, visible
from madbench_common.core.store import RunStore, copy_run, open_store
from madbench_common.core.usage import peak_rss_bytes
from madbench_common.pipeline.failures import is_fault
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.local import LocalRunner, RunOptions
from madbench_common.pipeline.params import (
    check_params,
    check_stage_params,
    check_stage_values,
    decode_text_params,
)
from madbench_common.pipeline.repair import invalidate
from madbench_common.pipeline.stage import (
    StageContext,
    make_context,
    merge_stage,
    read_marker,
    run_shard,
)
from madbench_common.pipeline.status import RunStatus, collect_status, table_one

__all__ = ["add_commands", "add_stage_params_option", "stage_overrides"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="file:// path, plain path, or s3://bucket/prefix")
    p.add_argument("--run-id", required=True)
    p.add_argument("--pipeline", default="madbench", metavar="NAME",
                   help="the benchmark: madbench (default) or deaf, whose options are "
                        "`madbench deaf <command> --help`'s")


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``run``, ``status`` and ``stage``."""
    run = sub.add_parser("run", help="run the pipeline on this machine")
    _common(run)
    run.add_argument("--sources", help="CSV with a 'path' column, or a folder of videos")
    run.add_argument("--allow-outside-sources", action="store_true",
                     help="read files the sources name outside the sources root (the CSV's "
                          "folder or bucket prefix, or the folder); refused by default")
    run.add_argument("--until", help="last stage to run (default: all)")
    run.add_argument("--workers", type=int, default=1)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--set", action="append", default=[], metavar="STAGE.KEY=VALUE",
                     help="override a stage parameter (value parsed as JSON if it can be)")
    run.add_argument("--shards", action="append", default=[], metavar="STAGE=N",
                     help="shard count for a stage (default: the stage's, at least --workers)")
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("--isolate-shards", action="store_true",
                     help="run every shard in a fresh process, as a pod would (slower; "
                          "exact per-shard peak memory for madbench measure)")
    run.add_argument("--lock-wait", type=float, default=0.0, metavar="SECONDS",
                     help="wait this long for another runner's lease on the run (default: "
                          "fail at once)")
    run.add_argument("--engine", choices=["inprocess", "podman", "docker", "buildah"],
                     default="inprocess",
                     help="run each stage's shards in its image with this container engine "
                          "(default: in-process)")
    run.add_argument("--image", default=None,
                     help="with --engine: one image (slug or ref) for every stage, e.g. "
                          "reference-cpu (default: each stage's own image)")
    run.add_argument("--weights", default=None,
                     help="with --engine: weights root mounted at /weights (default: "
                          "$MADBENCH_WEIGHTS)")
    run.add_argument("--python", action="append", default=[], metavar="STAGE=PATH",
                     help="run STAGE's shards and merge with this interpreter, e.g. a model "
                          "family's venv (.venvs/<slug>/bin/python; see make demo-omni)")
    run.set_defaults(func=cmd_run)

    copy = sub.add_parser("copy", help="copy a run to another store (file <-> S3); it resumes "
                                       "there as if it had run there")
    copy.add_argument("--from", dest="src", required=True, help="source store")
    copy.add_argument("--to", dest="dst", required=True, help="destination store")
    copy.add_argument("--run-id", required=True)
    copy.set_defaults(func=cmd_copy)

    status = sub.add_parser("status", help="stages done, shards pending, quarantined inputs")
    _common(status)
    status.add_argument("--json", action="store_true")
    status.add_argument("--details", action="store_true",
                        help="list every quarantined input (default: counts per stage and reason)")
    status.set_defaults(func=cmd_status)

    report = sub.add_parser("report", help="print the report's summary and its location")
    _common(report)
    report.add_argument("--stage", default="evaluate")
    report.add_argument("--render", action="store_true",
                        help="write report.md/.html/.json again from the stage's report.json "
                             "and the run's current facts (after a change to the report's "
                             "layout; no model is scored again)")
    report.set_defaults(func=cmd_report)

    add_stage_commands(sub, _common, lambda args: build_graph(),
                       "a string parameter, taken verbatim (any character survives); "
                       "overrides --params-json")


def add_stage_commands(sub: argparse._SubParsersAction[Any],
                       common: Callable[[argparse.ArgumentParser], None],
                       graph_of: Callable[[argparse.Namespace], Graph], param_help: str) -> None:
    """Register ``stage run`` / ``stage merge`` (what a pod runs) for the graph that
    ``graph_of(args)`` builds: MADBench's and DEAF's pods share this one path
    (:func:`_pod_work`: parameter check, checksum self-repair, ``_logs/stage`` record)."""
    stage = sub.add_parser("stage", help="run one shard or merge one stage (what Argo runs)")
    ssub = stage.add_subparsers(dest="stage_command", required=True)
    for name, func in (("run", cmd_stage_run), ("merge", cmd_stage_merge)):
        p = ssub.add_parser(name)
        common(p)
        p.add_argument("--stage", required=True)
        p.add_argument("--num-shards", type=int, default=1)
        p.add_argument("--image", default="embedded")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--params-json", default="{}")
        p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help=param_help)
        add_stage_params_option(p)
        if name == "run":
            p.add_argument("--shard", type=int, default=0)
        allow_unpinned_arg(p, "false: refuse a model whose weights are unpinned (the full "
                              "workflows pass it); true: allow it")
        p.set_defaults(func=func, graph_of=graph_of)


def parse_set(values: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``stage.key=value`` overrides → {stage: {key: value}}; values parse as JSON if they can.

    ``stage.key=@FILE`` reads the value from a YAML (or JSON) file, so the file's contents,
    not its name, become the parameter (and the stage's fingerprint).
    """
    out: dict[str, dict[str, Any]] = {}
    for item in values:
        target, eq, raw = item.partition("=")
        stage, dot, key = target.partition(".")
        if not eq or not dot or not stage or not key:
            raise MadbenchError(f"--set {item!r}: expected STAGE.KEY=VALUE")
        if raw.startswith("@"):
            out.setdefault(stage, {})[key] = _value_file(raw[1:], item)
            continue
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        out.setdefault(stage, {})[key] = value
    return out


def _value_file(path: str, item: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"--set {item!r}: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"--set {item!r}: {path} is not YAML: {exc}") from None


def cmd_run(args: argparse.Namespace) -> int:
    params = parse_set(args.set)
    if args.sources:
        params.setdefault("ingest", {})["sources"] = args.sources
    if args.allow_outside_sources:
        params.setdefault("ingest", {})["allow_outside_sources"] = True
    graph = build_graph()
    check_params(graph, params)  # unknown stages and keys fail before any work
    opts = RunOptions(store=args.store, run_id=args.run_id, until=args.until,
                      workers=max(1, args.workers), seed=args.seed, params=params,
                      shards=parse_shards(args.shards, graph), progress=not args.no_progress)
    opts.lock_wait = max(0.0, args.lock_wait)
    opts.isolate = args.isolate_shards
    engine = None
    if args.engine != "inprocess":
        from madbench_common.benchmarks.madbench.sources import source_files
        from madbench_common.pipeline.container import ContainerEngine

        engine = ContainerEngine.create(args.engine, args.store, args.run_id, args.image,
                                        args.weights, source_files(args.sources), opts.workers)
    elif args.image or args.weights:
        raise ConfigError("--image and --weights need --engine podman|docker|buildah")
    runner = LocalRunner(build_graph, opts, engine, _interpreters(args, graph, opts))
    runner.preflight()  # every missing key, weight, tool, image at once, before any stage
    runner.execute()
    print_status(collect_status(RunStore(open_store(args.store), args.run_id), graph))
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    src = RunStore(open_store(args.src), args.run_id)
    dst = RunStore(open_store(args.dst), args.run_id)
    count = copy_run(src, dst)
    print(f"copied {count} objects: {src.store.uri(src.run_id)} -> {dst.store.uri(dst.run_id)}")
    return 0


def _interpreters(args: argparse.Namespace, graph: Any, opts: RunOptions) -> dict[str, Any]:
    from madbench_common.pipeline.interpreter import InterpreterEngine, parse_interpreters

    chosen = parse_interpreters(args.python)
    for stage in chosen:
        graph[stage]  # unknown stage names fail before any work
    return {stage: InterpreterEngine(python, args.store, args.run_id, opts.workers)
            for stage, python in chosen.items()}


def parse_shards(values: list[str], graph: Graph) -> dict[str, int]:
    """``--shards STAGE=N`` of ``madbench run`` and ``madbench deaf run``: N ≥ 1, and STAGE a
    stage of ``graph`` (a typo fails before any work instead of leaving one shard)."""
    out = {}
    for item in values:
        name, _, count = item.partition("=")
        if not count.isdigit() or int(count) < 1:
            raise ConfigError(f"--shards {item!r}: expected STAGE=N with N ≥ 1")
        graph[name]  # unknown stage names fail with the list of stages
        out[name] = int(count)
    return out


def cmd_status(args: argparse.Namespace) -> int:
    status = collect_status(RunStore(open_store(args.store), args.run_id), build_graph())
    if args.json:
        print(status.to_json())
    else:
        print_status(status, details=args.details)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    run = RunStore(open_store(args.store), args.run_id)
    marker = read_marker(run, args.stage)
    if marker is None:
        raise ConfigError(f"{run.uri(args.stage)}: stage {args.stage!r} has not finished")
    if args.render:
        _render_again(run, f"{marker['prefix']}/report", args.stage)
    text = run.get_bytes(f"{marker['prefix']}/report/report.md").decode()
    # plain print: Markdown rows must not be re-wrapped; controls shown, never sent
    print(visible(main_section(text), newlines=True))
    for section in zero_shot_sections(text):  # omni parse rates and prompts
        print("\n" + visible(section, newlines=True))
    for section in robustness_sections(text):  # AUC per robustness condition
        print("\n" + visible(section, newlines=True))
    print(f"report: {run.uri(marker['prefix'] + '/report/report.html')}")
    print(f"tables: {run.uri(marker['prefix'] + '/report/report.md')} (and report.json)")
    return 0


def _render_again(run: RunStore, prefix: str, stage: str) -> None:
    """Rewrite a run's report from its report.json records and the run's facts."""
    import json

    from madbench_common.benchmarks.madbench.eval.compare import CompareRun, results_of
    from madbench_common.benchmarks.madbench.eval.facts import run_facts
    from madbench_common.benchmarks.madbench.eval.report import write_report

    report = json.loads(run.get_bytes(f"{prefix}/report.json"))
    results = results_of(CompareRun("", report, run.uri(f"{prefix}/report.json")))
    facts = run_facts(run, build_graph(), writing=stage)
    write_report(results, lambda name, data: run.put_bytes(f"{prefix}/{name}", data),
                 runs=[facts], rejections=report.get("rejections"))


def main_section(markdown: str) -> str:
    """The first ``## `` section of a report (its summary)."""
    sections = markdown.split("\n## ")
    return "## " + sections[1].strip() if len(sections) > 1 else markdown


def zero_shot_sections(markdown: str) -> list[str]:
    """The report's ``## Zero-shot …`` sections (omni parse rates and prompts), if any."""
    return ["## " + part.strip() for part in markdown.split("\n## ")[1:]
            if part.startswith("Zero-shot")]


def robustness_sections(markdown: str) -> list[str]:
    """The report's compact robustness section (AUC by condition), if any."""
    return ["## " + part.strip() for part in markdown.split("\n## ")[1:]
            if part.startswith("Robustness: binary AUC by condition")]


def print_status(status: RunStatus, details: bool = False, table1: bool = True) -> None:
    """Stages, retries, MADBench's Table 1 (``table1``; other graphs, e.g. DEAF, have
    their own) and the quarantine."""
    console = Console()
    c = console_text
    table = Table(title=f"run {c(status.run_id)} — {c(status.uri)}")
    for col in ("stage", "state", "rows", "rejected", "faults / budget", "shards"):
        table.add_column(col, no_wrap=True)
    table.add_column("counts (Table 1)", overflow="fold")
    for s in status.stages:
        state = "[green]done" if s.done else ("[yellow]partial" if s.shards_done else "pending")
        shards = f"{s.shards_done}/{s.shards_total}" if not s.done and s.shards_total else ""
        counts = " ".join(f"{k}={v}" for k, v in s.counts.items())
        budget = "" if not s.done else f"{s.failed}" + (
            f" / {int(s.budget * s.rows)}" if s.budget is not None else "")
        table.add_row(c(s.stage), state, str(s.rows), str(s.rejected), budget, shards,
                      c(counts))
    console.print(table)
    if status.s3_retries:
        detail = ", ".join(f"{k} {v}" for k, v in sorted(status.s3_retries.items())
                           if k != "total")
        console.print(f"S3 transient errors retried: {status.s3_retries.get('total', 0)} "
                      f"({detail})")
    if table1:
        one = Table(title="Table 1 (paper §3.5)")
        one.add_column("statistic")
        one.add_column("count", justify="right")
        for name, value in table_one(status):
            one.add_row(c(name), c(value))
        console.print(one)
    if status.quarantine:
        console.print(_quarantine_table(status, details))


def _quarantine_table(status: RunStatus, details: bool) -> Table:
    """Quarantined rows; items and details quote input (clip ids, paths), so each cell is
    shown as plain text with its control characters escaped (:func:`console_text`)."""
    c = console_text
    if details:
        q = Table(title="quarantined inputs")
        for col in ("stage", "item", "reason", "detail"):
            q.add_column(col, overflow="fold")
        for e in status.quarantine:
            q.add_row(c(e.stage), c(e.item), c(e.reason), c(e.detail))
        return q
    groups: dict[tuple[str, str], list[str]] = {}
    for e in status.quarantine:
        groups.setdefault((e.stage, e.reason), []).append(e.item)
    q = Table(title="quarantined inputs (--details lists each one; a fault counts against "
                    "the stage's rejection budget, max_failed_fraction)")
    for col in ("stage", "reason", "kind", "count", "e.g."):
        q.add_column(col, overflow="fold")
    for (stage, reason), items in groups.items():
        q.add_row(c(stage), c(reason), "fault" if is_fault(reason) else "data",
                  str(len(items)), c(", ".join(items[:3])))
    return q


def parse_params(params_json: str, pairs: Sequence[str]) -> dict[str, Any]:
    """``--params-json`` merged with verbatim ``--param KEY=VALUE`` strings."""
    try:
        params = json.loads(params_json)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--params-json is not JSON: {exc}") from None
    if not isinstance(params, dict):
        raise ConfigError("--params-json must be a JSON object")
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise ConfigError(f"--param {pair!r}: expected KEY=VALUE")
        params[key] = value
    return params


def add_stage_params_option(p: argparse.ArgumentParser) -> None:
    """``--stage-params JSON``: the workflows' ``stage_params`` parameter."""
    p.add_argument("--stage-params", default="{}", metavar="JSON",
                   help="{stage: {param: value}} for any stages of the graph (the workflow "
                        "parameter stage_params); this stage's entry overrides its "
                        "parameters, an unknown stage fails")


def stage_overrides(graph: Graph, stage: str, text: str) -> dict[str, Any]:
    """This stage's entry of a ``stage_params`` JSON object, after checking all of it.

    The object maps stage names of ``graph`` to objects of parameters (``madbench run
    --set`` as one value). It fails (exit 3) on JSON that is not such an object, on a
    stage the graph does not have, and on a key that has a workflow parameter of its own
    (``model`` of a swappable stage: ``<stage>_model``; a key in ``Stage.workflow_params``:
    ``<stage>_<key>``; ``sources`` of a root stage: ``sources``), so that one value is never
    set in two places, and on a key the stage does not take or a value of the wrong type
    (:mod:`~madbench_common.pipeline.params`).
    """
    try:
        doc = json.loads(text or "{}")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--stage-params is not JSON: {exc}") from None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise ConfigError("--stage-params must be a JSON object {stage: {param: value}}")
    for name, values in doc.items():
        target = graph[name]  # an unknown stage fails, naming the graph's stages
        own = {"model": f"{name}_model"} if target.swappable else {}
        own.update({key: f"{name}_{key}" for key in target.workflow_params})
        if not target.inputs:
            own["sources"] = "sources"
        for key in values:
            if key in own:
                raise ConfigError(f"--stage-params {name}.{key}: set it with the workflow "
                                  f"parameter {own[key]} (-p {own[key]}=...)")
        check_stage_params(target, values, "--stage-params")
        check_stage_values(target, values, "--stage-params")
    return dict(doc.get(stage, {}))


def _context(args: argparse.Namespace) -> StageContext:
    params = parse_params(args.params_json, args.param)
    graph = args.graph_of(args)
    stage = graph[args.stage]
    check_stage_params(stage, params, "--params-json/--param")
    text = {k: params[k] for k in (pair.partition("=")[0] for pair in args.param)}
    params.update(decode_text_params(stage, text))
    check_stage_values(stage, {k: v for k, v in params.items() if k not in text},
                       "--params-json")
    check_stage_values(stage, {k: params[k] for k in text}, "--param")
    params.update(stage_overrides(graph, args.stage, args.stage_params))
    run = RunStore(open_store(args.store), args.run_id)
    return make_context(run, graph, args.stage, params, args.image, args.seed,
                        allowed_unpinned(args))


def _pod_work(args: argparse.Namespace, verb: str, work: Callable[[StageContext], Any]) -> Any:
    """Run one pod's work; log its time, peak RSS and S3 retries under ``_logs/stage/``.

    A damaged object met on the way has its shard invalidated, so resubmitting the
    workflow with the same run id recomputes it.
    """
    before, start = retry_stats(), time.perf_counter()
    ctx = _context(args)
    try:
        result = work(ctx)
    except ChecksumError as exc:
        if not exc.key:
            raise
        what = invalidate(ctx.run, exc.key)
        raise ChecksumError(f"{exc}; invalidated {what}: resubmit with the same run id to "
                            "recompute it", key=exc.key) from None
    retries = retries_since(before)
    record = {"stage": args.stage, "verb": verb, "shard": getattr(args, "shard", None),
              "num_shards": args.num_shards, "image": args.image,
              "seconds": round(time.perf_counter() - start, 3),
              "peak_rss": peak_rss_bytes(), "s3_retries": retries}
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    name = f"{verb}-{record['shard'] if verb == 'run' else 'all'}-{stamp}-{uuid.uuid4().hex[:6]}"
    ctx.run.put_bytes(f"_logs/stage/{args.stage}/{name}.json", json.dumps(record).encode())
    return result


def cmd_stage_run(args: argparse.Namespace) -> int:
    result = _pod_work(args, "run", lambda ctx: run_shard(ctx, args.shard, args.num_shards))
    print(json.dumps(result.__dict__))
    return 0


def cmd_stage_merge(args: argparse.Namespace) -> int:
    print(json.dumps(_pod_work(args, "merge", lambda ctx: merge_stage(ctx, args.num_shards))))
    return 0
