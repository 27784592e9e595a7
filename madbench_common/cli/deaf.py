"""``madbench deaf …``: run the DEAF graph locally, one shard or merge (what Argo runs), status,
report and the workflow's exit summary. Thin wrappers; the logic lives in the package."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
from typing import Any

from madbench_common.benchmarks.deaf.graph import build_deaf_graph
from madbench_common.benchmarks.deaf.local_run import DeafRunner, python_of, stub_apis
from madbench_common.cli.pipeline import (
    add_stage_commands,
    parse_set,
    parse_shards,
    print_status,
)
from madbench_common.core.errors import ConfigError
from madbench_common.core.store import RunStore, open_store
from madbench_common.pipeline.graph import Graph
from madbench_common.pipeline.local import RunOptions
from madbench_common.pipeline.params import check_params
from madbench_common.pipeline.stage import read_marker
from madbench_common.pipeline.status import collect_status

__all__ = ["add_commands", "run_params"]


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="file:// path, plain path, or s3://bucket/prefix")
    p.add_argument("--run-id", required=True)
    p.add_argument("--models", default="",
                   help="answer stages: comma-separated names of the paper's models "
                        "(gemini_25_flash, gemini_3_flash, gpt_4o_audio, audio_flamingo3, "
                        "qwen2_audio, qwen3_omni, salmonn) or name=<registry slug> "
                        "(default: the paper's seven)")


def _models(args: argparse.Namespace) -> list[str]:
    return [m.strip() for m in args.models.split(",") if m.strip()]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``deaf`` and its subcommands."""
    deaf = sub.add_parser("deaf", help="DEAF: acoustic faithfulness of audio language models")
    dsub = deaf.add_subparsers(dest="deaf_command", required=True)
    run = dsub.add_parser("run", help="build the stimuli, ask the models, judge, report")
    _common(run)
    _run_options(run)
    run.set_defaults(func=cmd_run)
    status = dsub.add_parser("status", help="stages done and quarantined items")
    _common(status)
    status.set_defaults(func=cmd_status)
    report = dsub.add_parser("report", help="print Table 3 and where the report is")
    _common(report)
    report.set_defaults(func=cmd_report)
    add_stage_commands(dsub, _common, _graph,
                       "one parameter, verbatim (the workflow's swappable model slug)")
    summary = dsub.add_parser("exit-summary", help="write <store>/<run_id>/_RUN_SUMMARY.json")
    for name in ("store", "run-id", "workflow", "status"):
        summary.add_argument(f"--{name}", required=True)
    summary.add_argument("--duration", default="")
    summary.add_argument("--failures", default="")
    summary.set_defaults(func=cmd_exit_summary, models="")


def _run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--until", help="last stage to run (default: all)")
    run.add_argument("--workers", type=int, default=1)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--set", action="append", default=[], metavar="STAGE.KEY=VALUE")
    run.add_argument("--shards", action="append", default=[], metavar="STAGE=N")
    run.add_argument("--no-progress", action="store_true")
    run.add_argument("--emis", default="", help="a local EMIS copy: its sentences and clips")
    run.add_argument("--demand", default="", help="a local DEMAND folder (<CODE>/ch01.wav)")
    run.add_argument("--sentences", default="", help="a sentence CSV replacing its conflicts")
    run.add_argument("--library", default="", help="offline background library folder")
    run.add_argument("--per-stratum", type=int, default=0,
                     help="keep N sentences per (type, sub-dimension, condition, class); 0: all")
    run.add_argument("--snrs", default="", help="BSC SNRs in dB, e.g. --snrs=-10,0,10 (default: "
                                                "the paper's five)")
    run.add_argument("--repeats", type=int, default=0, help="answers per query (default 3)")
    run.add_argument("--judge-url", default="", help="OpenAI-compatible base URL of the LLM "
                     "judge (default: DeepSeek-R1 at OpenRouter, key in $JUDGE_API_KEY)")
    run.add_argument("--judge-model", default="", help="the judge's model id (default: "
                     "deepseek/deepseek-r1)")
    run.add_argument("--judge-mode", default="", help="llm (default: every answer to the LLM "
                     "judge, as the paper), rule+llm, or rule (offline keyword rules)")
    run.add_argument("--stub-apis", action="store_true",
                     help="answer the hosted-API stages and the LLM judge from a local stub "
                          "server (tests and the demo; never a model's answers)")
    run.add_argument("--venv", action="append", default=[], metavar="STAGE=VENV",
                     help="run STAGE's shards with VENV's Python (e.g. .venvs/deaf-tf5)")


def run_params(args: argparse.Namespace, stages: list[str]) -> dict[str, dict[str, Any]]:
    """Per-stage parameters from the run options (``--set`` wins)."""
    params: dict[str, dict[str, Any]] = {}

    def put(stage: str, key: str, value: Any) -> None:
        if stage in stages:
            params.setdefault(stage, {})[key] = value

    for stage in ("deaf_sentences", "esc_tts_a", "esc_tts_b", "esc_tts_c"):
        if args.emis:
            put(stage, "emis", args.emis)
    for key in ("demand", "library"):
        if getattr(args, key):
            put("deaf_envlib", key, getattr(args, key))
    if args.sentences:
        put("deaf_sentences", "sentences", args.sentences)
    if args.per_stratum:
        put("deaf_sentences", "per_stratum", args.per_stratum)
    if args.snrs:
        put("bsc_mix", "snrs", [int(s) for s in args.snrs.split(",")])
    for stage in (s for s in stages if s.startswith("answer_")):
        if args.repeats:
            put(stage, "repeats", args.repeats)
    if args.judge_url:
        put("deaf_judge", "judge_base_url", args.judge_url)
    if args.judge_model:
        put("deaf_judge", "judge_model_id", args.judge_model)
    if args.judge_mode:
        put("deaf_judge", "mode", args.judge_mode)
    for stage, values in parse_set(args.set).items():
        params.setdefault(stage, {}).update(values)
    return params


def cmd_run(args: argparse.Namespace) -> int:
    models = _models(args)
    factory = functools.partial(build_deaf_graph, tuple(models))
    graph = factory()
    params = run_params(args, list(graph.stages))
    check_params(graph, params)  # unknown stages and keys fail before any work
    venvs = {}
    for item in args.venv:
        stage, eq, venv = item.partition("=")
        if not eq:
            raise ConfigError(f"--venv {item!r}: expected STAGE=VENV")
        venvs[stage] = python_of(venv)
    opts = RunOptions(store=args.store, run_id=args.run_id, until=args.until,
                      workers=max(1, args.workers), seed=args.seed, params=params,
                      shards=parse_shards(args.shards, graph),
                      progress=not args.no_progress)
    stub = stub_apis(graph, params) if args.stub_apis else contextlib.nullcontext()
    with stub:
        runner = DeafRunner(factory, opts, venvs, models)
        runner.preflight()  # every missing key, weight, tool at once, before any stage
        runner.execute()
    print_status(collect_status(RunStore(open_store(args.store), args.run_id), graph),
                 table1=False)
    _print_report(RunStore(open_store(args.store), args.run_id), quiet=True)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    run = RunStore(open_store(args.store), args.run_id)
    print_status(collect_status(run, build_deaf_graph(tuple(_models(args)))), table1=False)
    return 0


def _print_report(run: RunStore, quiet: bool = False) -> None:
    marker = read_marker(run, "deaf_report")
    if marker is None:
        if not quiet:
            raise ConfigError(f"{run.uri('deaf_report')}: the report stage has not finished")
        return
    base = f"{marker['prefix']}/report"
    text = run.get_bytes(f"{base}/report.md").decode()
    table = text.split("\n## ")[1] if "\n## " in text else text
    print("## " + table.strip())
    print(f"report: {run.uri(base + '/report.html')}")
    print(f"tables: {run.uri(base + '/report.md')} (and report.json, radar.png)")


def cmd_report(args: argparse.Namespace) -> int:
    _print_report(RunStore(open_store(args.store), args.run_id))
    return 0


def _graph(args: argparse.Namespace) -> Graph:
    """The DEAF graph a pod runs in: its answer stages are the ``--models`` given."""
    return build_deaf_graph(tuple(_models(args)))


def cmd_exit_summary(args: argparse.Namespace) -> int:
    from madbench_common.pipeline.summary import write_exit_summary

    summary = write_exit_summary(build_deaf_graph(), args.store, args.run_id, args.workflow,
                                 args.status, args.duration, args.failures)
    print(json.dumps(summary, indent=1, sort_keys=True))
    return 0
