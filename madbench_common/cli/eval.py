"""``madbench eval`` (your own model's features or scores, no images) and ``madbench compare``
(runs side by side from their report.json files)."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console

from madbench_common.models.registry import GROUPS

__all__ = ["add_commands"]


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Register ``eval`` and ``compare``."""
    _add_compare(sub)
    p = sub.add_parser("eval", help="evaluate a model from per-sample features or scores, or "
                       "across datasets (--train A --test B)")
    p.add_argument("--samples", help="samples manifest (path, file:// or s3://)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--features", help="Parquet/CSV: sample_id[, mode, pairing], features")
    src.add_argument("--scores", help="Parquet/CSV: sample_id[, task, mode, pairing], score"
                     "[, probs, parsed, excluded]")
    p.add_argument("--out", help="report directory (default madbench-eval-<model>)")
    p.add_argument("--model", default="", help="model name in the report (or a registry slug)")
    p.add_argument("--group", default="", choices=("", *GROUPS),
                   help="the report's row group for this model (default: the registry's)")
    p.add_argument("--score-kind", choices=("auto", "prob", "llr", "raw"), default="auto",
                   help="how to read 'score': auto = prob if every score is in [0, 1], else raw")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (0 = none)")
    p.add_argument("--no-logo", action="store_true", help="skip leave-one-generator-out")
    p.add_argument("--drop-constant", action="store_true", help="drop constant feature columns")
    p.add_argument("--seed", type=int, default=0)
    x = p.add_argument_group("cross-dataset: heads fitted on one corpus's train "
                             "split, scored on another's test split")
    x.add_argument("--train", metavar="CORPUS:PATH", help="training corpus: madbench:<store>/"
                   "<run_id>, fakeavceleb:DIR, asvspoof2019_la:DIR, asvspoof5:DIR, "
                   "in_the_wild:DIR")
    x.add_argument("--test", metavar="CORPUS:PATH", help="test corpus (same forms)")
    x.add_argument("--encoder", default="ref-lfcc-stats",
                   help="registry encoder or detector run on both corpora (default "
                        "ref-lfcc-stats)")
    x.add_argument("--mode", default="A", choices=("A", "AV"), help="input mode (AV needs "
                   "video on both sides: madbench, fakeavceleb)")
    x.add_argument("--both-directions", action="store_true",
                   help="also test --train's corpus with heads fitted on --test's")
    x.add_argument("--protocol", default="balanced",
                   help="the MADBench protocol a run contributes (default balanced)")
    x.add_argument("--fakeavceleb-video", default="real", choices=("real", "all"),
                   help="FakeAVCeleb: real-video types only (default) or all four")
    x.add_argument("--cache", help="feature cache folder (default <out>/.features)")
    p.set_defaults(func=_eval)


def _eval(args: argparse.Namespace) -> int:
    if args.train or args.test:
        return _cross(args)
    from madbench_common.core.errors import ConfigError

    if not args.samples or not (args.features or args.scores):
        raise ConfigError("madbench eval needs --samples with --features or --scores, or "
                          "--train CORPUS:PATH --test CORPUS:PATH")
    from madbench_common.benchmarks.madbench.eval.byom import run_byom
    from madbench_common.benchmarks.madbench.eval.report import main_table
    from madbench_common.benchmarks.madbench.eval.suite import EvalConfig

    config = EvalConfig(n_boot=args.n_boot, seed=args.seed, logo=not args.no_logo,
                        score_kind=args.score_kind)
    run = run_byom(args.samples, features=args.features, scores=args.scores, out=args.out,
                   model=args.model, group=args.group, config=config,
                   drop_constant=args.drop_constant)
    console = Console(width=max(Console().width, 200))
    console.print(main_table([run.result]), markup=False, soft_wrap=True)
    console.print(f"report: {run.out_dir.resolve() / 'report.html'}", markup=False)
    return 0


def _cross(args: argparse.Namespace) -> int:
    from pathlib import Path

    from madbench_common.benchmarks.madbench.corpora import load_corpus
    from madbench_common.benchmarks.madbench.corpora.cross import cross_evaluate
    from madbench_common.benchmarks.madbench.eval.report import main_table, write_report
    from madbench_common.benchmarks.madbench.eval.suite import EvalConfig
    from madbench_common.benchmarks.madbench.eval.tables import cross_table
    from madbench_common.core.errors import ConfigError

    if not (args.train and args.test):
        raise ConfigError("cross-dataset evaluation needs both --train and --test")
    corpora = [load_corpus(spec, video=args.fakeavceleb_video) for spec in (args.train,
                                                                             args.test)]
    out = Path(args.out or f"madbench-eval-{corpora[0].name}-{corpora[1].name}")
    cache = Path(args.cache) if args.cache else out / ".features"
    config = EvalConfig(n_boot=args.n_boot, seed=args.seed, logo=False)
    pairs = [(0, 1), (1, 0)] if args.both_directions else [(0, 1)]
    console = Console(width=max(Console().width, 200))
    for a, b in pairs:
        result = cross_evaluate(corpora[a], corpora[b], args.encoder, mode=args.mode,
                                protocol=args.protocol, cache=cache, config=config)
        where = out / f"{corpora[a].name}-to-{corpora[b].name}"
        where.mkdir(parents=True, exist_ok=True)
        write_report([result], _writer(where))
        table = cross_table([result])
        row = table.sections[0][1][0]
        console.print(f"{row[1]} → {row[2]}: tasks {row[4]}; not evaluated: {row[5]}",
                      markup=False, soft_wrap=True)
        console.print(main_table([result]), markup=False, soft_wrap=True)
        console.print(f"report: {(where / 'report.html').resolve()}", markup=False)
    return 0


def _writer(folder: Any) -> Any:
    return lambda name, data: (folder / name).write_bytes(data)


def _add_compare(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser("compare", help="models and conditions of several runs side by side "
                       "(from their report.json files)")
    p.add_argument("runs", nargs="+", metavar="RUN",
                   help="a report.json, a folder with one, or a run root <store>/<run_id> "
                        "(local, file:// or s3://)")
    p.add_argument("--labels", default="", help="comma-separated labels, one per run "
                   "(default: the run id each report.json records)")
    p.add_argument("--out", default="madbench-compare", help="report directory")
    p.set_defaults(func=_compare)


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from madbench_common.benchmarks.madbench.eval.compare import (
        facts_of,
        load_runs,
        results_of,
    )
    from madbench_common.benchmarks.madbench.eval.report import render_markdown, write_report
    from madbench_common.benchmarks.madbench.stages.evaluate import order_results
    from madbench_common.cli.pipeline import main_section, robustness_sections

    labels = [x.strip() for x in args.labels.split(",")] if args.labels else None
    runs = load_runs(list(args.runs), labels)
    results = order_results([res for run in runs for res in results_of(run)])
    facts = facts_of(runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_report(results, lambda n, b: (out / n).write_bytes(b), runs=facts)
    md = render_markdown(results, facts)
    print(main_section(md))
    for section in robustness_sections(md):
        print("\n" + section)
    print(f"report: {(out / 'report.html').resolve()}")
    return 0
