"""One pass of the rehearsal (:func:`rehearse`): the preflight, the sandbox (network
namespace, object store, API stub), each workflow executed with the parameters ``argo
submit -p`` would get, then the records. The work folder is locked for the pass; a pass
that is stopped or killed resumes at the next run."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import shutil
import signal
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from madbench_common.cluster.argo_local import Executor, Workflow, WorkflowResult
from madbench_common.cluster.lint import check_pods, image_slug
from madbench_common.cluster.rehearsal.images import ImageProvider
from madbench_common.cluster.rehearsal.objectstore import (
    _S3_KEYS,
    _S3_SECRET,
    _SOURCES,
    _STORE,
    _markers,
    _print_reports,
    _upload_sources,
)
from madbench_common.cluster.rehearsal.pods import PodRunner, StateMemo
from madbench_common.cluster.rehearsal.preflight import (
    _upstream_message,
    secret_problems,
    upstream_problems,
    weights_problems,
)
from madbench_common.cluster.rehearsal.profile import (
    ROOT,
    Options,
    Profile,
    WorkflowProfile,
    _fill,
    _graph_for,
    load_profile,
)
from madbench_common.cluster.rehearsal.records import add_parts, build_records, write_records
from madbench_common.cluster.rehearsal.state import State
from madbench_common.cluster.relaxations import relaxations as argo_relaxations
from madbench_common.core.errors import ConfigError

_API_SECRET = "madbench-api-keys"
_LOCK = ".lock"
_PRINT = threading.Lock()


def _say(text: str) -> None:
    stamp = datetime.now().strftime("%H:%M:%S")
    with _PRINT:
        print(f"[{stamp}] {text}", flush=True)


def workflow_params(wf: Workflow, flow: WorkflowProfile, profile: Profile,
                    provider: ImageProvider | None, fields: Mapping[str, Any],
                    overrides: Mapping[str, str] | None = None,
                    stage_sets: Mapping[str, Mapping[str, Any]] | None = None
                    ) -> dict[str, Any]:
    """The ``argo submit -p`` values of one workflow in the rehearsal: the profile's, then
    ``overrides`` (``-p NAME=VALUE`` of the command line, those this workflow declares)
    and ``stage_sets`` merged into ``stage_params`` (``--set STAGE.KEY=VALUE``)."""
    declared = wf.parameters()
    params: dict[str, Any] = {"store": _STORE, "run_id": flow.run_id}
    if "sources" in declared:
        params["sources"] = f"{_SOURCES}/sources.csv"
    stage_params = _fill(flow.stage_params, fields)
    for stage, values in (stage_sets or {}).items():
        stage_params.setdefault(stage, {}).update(values)
    params["stage_params"] = json.dumps(stage_params, sort_keys=True)
    for name in declared:
        if name.endswith("_shards"):
            params[name] = str(profile.shards)
    params.update(_fill(dict(flow.params), fields))
    params.update({k: v for k, v in (overrides or {}).items() if k in declared})
    for name, default in declared.items():
        if (name.endswith("_image") or name == "summary_image") and provider is not None:
            params[name] = provider.pinned(str(params.get(name, default)))
    return params


def rehearse(opts: Options) -> int:
    """Run the rehearsal; returns 0 when every workflow succeeded. The work folder is
    locked meanwhile: two passes in one folder would share its store, state and
    containers."""
    work = opts.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    path = work / _LOCK
    with open(path, "a") as fh:  # the lock goes with the process, killed or not
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"{work}: another rehearsal is using this work folder (it "
                              f"holds {path}); wait for it, stop it, or pass another "
                              "--work") from None
        return _rehearse(opts, work)


def _rehearse(opts: Options, work: Path) -> int:
    from madbench_common.cluster.sandbox import STUB_PORT, Namespace, NamespacedS3, start_stub
    from madbench_common.imagefactory.containers import remove_containers, run_engine
    from madbench_common.models.api_stub import STUB_KEY

    t0 = time.monotonic()
    # SIGTERM stops like Ctrl-C: running pods are stopped and the services shut down (a
    # SIGKILL leaves nothing either: pods, store and stub die with their parent)
    signal.signal(signal.SIGTERM, _interrupt)
    profile = load_profile()
    flows = [f for f in profile.workflows if f.name in opts.workflows]
    if unknown := set(opts.workflows) - {f.name for f in profile.workflows}:
        raise ConfigError(f"no workflow {sorted(unknown)} in the rehearsal profile")
    if opts.engine == "docker":
        raise ConfigError("the docker engine runs containers in the daemon's network, not the "
                          "rehearsal's namespace: use buildah (root) or podman")
    engine = run_engine(opts.engine)
    if opts.fresh:
        _say(f"--fresh: emptying {work}")
        for entry in work.iterdir():
            if entry.name != _LOCK:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
    state = State(work / "state.json")
    provider = ImageProvider(state, work, engine, opts.keep_images, _say,
                             image_tests=opts.image_tests)
    if gone := remove_containers(provider.prefix, engine):
        _say(f"removed {len(gone)} working containers a killed pass left: {', '.join(gone)}")
    fields = {"stub_port": STUB_PORT}

    # 1. preflight: everything that can fail without building or running anything.
    # An unsupported construct or a missing upstream mirror stops here; what the dry run
    # finds wrong with single pods (a missing image folder, module or weights callable) is
    # listed, and those pods then fail in place, each naming its reason (--strict: stop).
    workflows = {f.name: Workflow.load(ROOT / f.file) for f in flows}
    overrides, stage_sets = _overrides(opts, flows, workflows)
    images: dict[str, set[str]] = {}
    problems: list[str] = []
    for flow in flows:
        wf = workflows[flow.name]
        params = workflow_params(wf, flow, profile, None, fields, overrides,
                                 stage_sets[flow.name])
        pods = Executor(wf, params, name=f"rehearsal-{flow.name}").dry_run()
        problems += [f"{flow.file}: {p}" for p in check_pods(pods)
                     if not p.startswith("warning:")]
        images[flow.name] = {image_slug(p.image)[0] for p in pods}
        if missing_keys := secret_problems(pods, {_S3_SECRET: _S3_KEYS,
                                                  _API_SECRET: profile.api_keys}):
            raise ConfigError(f"{flow.file}: " + "; ".join(missing_keys) + " (add the key to "
                              "api_keys in the rehearsal profile, madbench_common/data/"
                              "rehearsal.yaml)")
    needed = sorted(set().union(*images.values()))
    if missing := upstream_problems(needed):
        raise ConfigError(_upstream_message(missing))
    problems += weights_problems(needed)
    for line in problems:
        _say(f"preflight: {line}")
    if problems and opts.strict:
        raise ConfigError(f"the dry run finds {len(problems)} problems (listed above)")
    _say(f"preflight: {', '.join(f.file for f in flows)}; {len(needed)} images; "
         f"{len(problems)} problems; engine {engine}; work folder {work}")

    # 2. sandbox
    state.begin_part()
    ns = Namespace().start()
    s3 = stub = None
    interrupted: KeyboardInterrupt | None = None
    markers: dict[str, dict[str, dict[str, Any]]] = {}
    results: dict[str, WorkflowResult] = {}
    memos: dict[str, StateMemo] = {}
    executors: dict[str, Executor] = {}
    departures: dict[str, list[dict[str, Any]]] = {}
    try:
        isolation = ns.check_isolated()
        s3 = NamespacedS3(work / "s3", ns)  # bound first: an interrupt during its start
        s3.start()  # still stops it (SeaweedFS outlived a Ctrl-C here)
        stub = start_stub(ns, work)
        clips = ns.call(_upload_sources, s3, ROOT / profile.sources_csv, profile.every)
        _say(f"sandbox: namespace {isolation}; object store and API stub inside; "
             f"{clips} source clips uploaded to {_SOURCES}/")
        secrets = {_S3_SECRET: {k: v for k, v in s3.env().items() if k in _S3_KEYS},
                   _API_SECRET: {k: STUB_KEY for k in profile.api_keys}}
        runner = PodRunner(provider, secrets, work, ns.path, engine,
                           cpu_deadline_scale=profile.cpu_deadline_scale)
        for i, flow in enumerate(flows):
            provider.retain = {slug for f in flows[i + 1:] for slug in images[f.name]}
            wf = workflows[flow.name]
            graph = _graph_for(flow.name)
            done_now = ns.call(_markers, s3, flow.run_id, graph)
            memo = StateMemo(state, flow.name, provider, functools.partial(set, done_now))
            memos[flow.name] = memo
            params = workflow_params(wf, flow, profile, provider, fields, overrides,
                                     stage_sets[flow.name])
            ex = Executor(wf, params, runner=runner, workers=opts.workers or profile.workers,
                          name=f"rehearsal-{flow.name}", stop_on_failure=not opts.keep_going,
                          memo=memo, backoff_scale=opts.backoff_scale,
                          pod_identity=provider.pod_identity,
                          rank=lambda pod: 0 if image_slug(pod.image.split("@", 1)[0])[0]
                          in provider.ready else 1)
            ex.on_event = _events(ex, provider)
            provider.cancel = ex.cancel
            executors[flow.name] = ex
            departures[flow.name] = [r.as_dict() for r in argo_relaxations(
                wf, params, cpu_deadline_scale=profile.cpu_deadline_scale,
                workers=opts.workers or profile.workers, stop_on_failure=not opts.keep_going,
                backoff_scale=opts.backoff_scale)]
            _say(f"{flow.name}: executing {flow.file} as workflow {ex.name} (run id "
                 f"{flow.run_id})")
            started = time.monotonic()
            try:
                results[flow.name] = ex.run()
            except KeyboardInterrupt:
                results[flow.name] = ex.snapshot("Interrupted", time.monotonic() - started)
                raise
            provider.release((), wait=True)  # what a build kept from going (release's doc)
            _say(f"{flow.name}: {results[flow.name].phase} in "
                 f"{results[flow.name].seconds:.0f} s")
            ns.call(_print_reports, s3, flow.name, flow.run_id, graph, flow.banner)
        markers = {f.name: ns.call(_markers, s3, f.run_id, _graph_for(f.name)) for f in flows}
    except KeyboardInterrupt as exc:
        # a stopped pass still says what it did (a session's end stops a pass of hours):
        # the pods done so far, their peaks and the rows of the stages that finished
        interrupted = exc
        if s3 is not None:
            with contextlib.suppress(Exception):
                markers = {n: ns.call(_markers, s3, f.run_id, _graph_for(n))
                           for f in flows if (n := f.name) in results}
    except BaseException:
        state.end_part("error")
        raise
    finally:
        if stub is not None:
            stub.terminate()
            stub.wait(timeout=10)
        if s3 is not None:
            s3.stop()
        ns.stop()
    wall = time.monotonic() - t0
    records = build_records(state, results, markers, provider, wall, opts, profile)
    records["argo_departures"] = departures  # per workflow, as cluster.relaxations lists them
    if interrupted is not None:
        records["complete"] = False
        records["interrupted"] = str(interrupted) or "Ctrl-C"
    state.end_part("interrupted" if interrupted is not None
                   else "complete" if records["complete"] else "incomplete")
    add_parts(records, state)
    write_records(records, opts.records)
    _say(f"records: {opts.records} and {opts.records.with_suffix('.md')}; wall time "
         f"{wall / 60:.1f} min")
    if interrupted is not None:
        raise interrupted
    bad = [n for n, r in results.items() if r.phase != "Succeeded"]
    for name in bad:
        for failure in results[name].failures:
            _say(f"{name}: FAILED {failure['podName']}: {failure['message'][-600:]}")
    return 0 if not bad and len(results) == len(flows) else 1


def _overrides(opts: Options, flows: list[WorkflowProfile], workflows: Mapping[str, Workflow]
               ) -> tuple[dict[str, str], dict[str, dict[str, dict[str, Any]]]]:
    """``-p NAME=VALUE`` (some workflow must declare NAME) and ``--set STAGE.KEY=VALUE``
    (some workflow's graph must have STAGE) from the command line, per workflow."""
    from madbench_common.cli.pipeline import parse_set

    params: dict[str, str] = {}
    for item in opts.params:
        name, eq, value = item.partition("=")
        if not eq or not any(name in wf.parameters() for wf in workflows.values()):
            raise ConfigError(f"-p {item!r}: no workflow of this rehearsal has a parameter "
                              f"{name!r}")
        params[name] = value
    sets = parse_set(opts.stage_sets)
    per: dict[str, dict[str, dict[str, Any]]] = {}
    for flow in flows:
        stages = set(_graph_for(flow.name).stages)
        per[flow.name] = {k: v for k, v in sets.items() if k in stages}
    if unknown := set(sets) - {s for p in per.values() for s in p}:
        raise ConfigError(f"--set: no workflow of this rehearsal has stage(s) {sorted(unknown)}")
    return params, per


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _events(ex: Executor, provider: ImageProvider) -> Callable[[str, dict[str, Any]], None]:
    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "pod_start":
            _say(f"start  {data['node']} (attempt {data['attempt']})")
        elif kind == "pod_skipped":
            _say(f"done before: {data['node']}")
        elif kind == "pod_retry":
            _say(f"retry  {data['node']} in {data['in_seconds']:.0f} s")
        elif kind == "pod_done":
            info = data["info"]
            rss = info.get("peak_rss_bytes")
            _say(f"{data['phase'].lower():9s} {data['node']} exit {data['exit_code']} "
                 f"{data['seconds']:.0f} s" + (f", peak RSS {rss / 2**20:.0f} MiB" if rss else "")
                 + ("" if data["phase"] == "Succeeded" else f"\n{data['message'][-1500:]}"))
            provider.release(ex.pending_images())

    return on_event
