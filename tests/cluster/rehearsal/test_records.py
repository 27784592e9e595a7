"""The record of a pass: rows, peaks and image tests per image, stages left with no row,
an interrupted pass, GPU pods run on the CPU, stand-ins and the API stub, relaxations and
rejection reasons."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from madbench_common.cluster.argo_local import Executor, Pod, PodResult, Workflow
from madbench_common.cluster.rehearsal.images import ImageProvider
from madbench_common.cluster.rehearsal.profile import BANNER, Options, load_profile
from madbench_common.cluster.rehearsal.records import build_records, records_markdown
from madbench_common.cluster.rehearsal.state import State
from madbench_common.cluster.relaxations import relaxations as argo_relaxations

ROOT = Path(__file__).resolve().parents[3]


def test_records_sum_rows_and_peaks_per_image(tmp_path: Path) -> None:
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    state.update_image("qc", image_id="sha", build_s=300, size_bytes=6_000_000_000,
                       torch="2.13.0", cuda="13.0", weights_callable="m:f", weights_files=7,
                       weights_bytes=2_500_000, weights_s=12.0)
    nodes: dict[str, dict[str, Any]] = {
        "w.source-qc.shard(0)": {"phase": "Succeeded", "template": "source-qc-shard",
                                 "image": "ghcr.io/madbench/qc:0.1.0@sha256:" + "a" * 64,
                                 "memo": False, "attempts": [{"phase": "Succeeded",
                                                              "peak_rss_bytes": 2**30}]},
        "w.source-qc-merge": {"phase": "Succeeded", "template": "source-qc-merge",
                              "image": "ghcr.io/madbench/qc:0.1.0", "memo": True,
                              "attempts": []},
        "w.split": {"phase": "Failed", "template": "split-shard",
                    "image": "ghcr.io/madbench/qc:0.1.0",
                    "attempts": [{"phase": "Failed", "exit_code": 3, "message": "no model",
                                  "peak_rss_bytes": 2**29}]},
    }
    results = {"full": WorkflowResult("w", "Failed", 100.0, nodes, [
        {"podName": "w.split", "phase": "Failed", "exitCode": 3, "message": "no model"}])}
    markers = {"full": {"source_qc": {"rows": 14, "rejected": 4}}}
    rec = build_records(state, results, markers, ImageProvider(state, tmp_path), 123.0,
                        Options(work=tmp_path, workflows=("full",)), load_profile())
    qc = rec["images"]["qc"]
    assert qc["rows_ok"] == 10 and qc["rows_rejected"] == 4
    assert qc["stages"] == {"full:source_qc": {"rows": 14, "rejected": 4, "reasons": {},
                                               "faults": 0, "max_failed_fraction": None},
                            "full:split": None}
    assert qc["peak_rss_mb"] == 1024 and qc["pods_run"] == 2 and qc["pods_skipped"] == 1
    assert qc["status"] == "failed" and qc["failures"][0]["exit_code"] == 3
    assert rec["complete"] is False and rec["note"] == BANNER and rec["wall_s"] == 123
    text = records_markdown(rec)
    assert "| qc | 300 | 6000 | 2.13.0 / 13.0 | 7 (2.5) | source_qc, split | 10 / 4 |" in text
    assert "random" in text.lower()


def test_a_resumed_pass_keeps_the_peaks_of_the_pods_it_skipped(tmp_path: Path) -> None:
    """A pass resumed across sessions skips most pods: their peak RSS and seconds are those
    of the run the memo recorded (the record of the first complete pass showed no peak
    for 17 of 28 images, whose pods had all run in an earlier part of the pass)."""
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    image = "ghcr.io/madbench/qc:0.1.0@sha256:" + "a" * 64
    nodes: dict[str, dict[str, Any]] = {
        "w.source-qc.shard(0)": {"phase": "Succeeded", "template": "source-qc-shard",
                                 "image": image, "memo": True, "attempts": [],
                                 "earlier": {"node": "w.source-qc.shard(0)", "image": image,
                                             "seconds": 40.0, "peak_rss_bytes": 3 * 2**30}},
        "w.source-qc-merge": {"phase": "Succeeded", "template": "source-qc-merge",
                              "image": image, "memo": False,
                              "attempts": [{"phase": "Succeeded", "seconds": 2.4,
                                            "peak_rss_bytes": 2**28}]},
    }
    results = {"full": WorkflowResult("w", "Succeeded", 3.0, nodes, [])}
    rec = build_records(state, results, {"full": {"source_qc": {"rows": 14, "rejected": 0}}},
                        ImageProvider(state, tmp_path), 3.0,
                        Options(work=tmp_path, workflows=("full",)), load_profile())
    qc = rec["images"]["qc"]
    assert qc["peak_rss_mb"] == 3072 and qc["pod_s"] == 42
    assert qc["pods_run"] == 1 and qc["pods_skipped"] == 1
    assert "| 1 / 1 | 42 | 3072 | — | — | ok |" in records_markdown(rec)


def test_a_stage_left_with_no_row_makes_the_pass_incomplete(tmp_path: Path) -> None:
    """Every pod succeeded, but component_qc rejected every row: the stages after it ran on
    nothing, so the pass is not complete and the record names the stage. A stage given no
    row (features_references of the full profile, which has no model) is no fault."""
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    node = {"phase": "Succeeded", "image": "ghcr.io/madbench/qc:0.1.0", "memo": False,
            "attempts": [{"phase": "Succeeded", "peak_rss_bytes": 2**20}]}
    nodes = {"w.source-qc.shard(0)": {**node, "template": "source-qc-shard"},
             "w.component-qc.shard(0)": {**node, "template": "component-qc-shard"}}
    opts = Options(work=tmp_path, workflows=("full",))

    def records(rows: int, rejected: int) -> dict[str, Any]:
        results = {"full": WorkflowResult("w", "Succeeded", 10.0, nodes, [])}
        markers = {"full": {"source_qc": {"rows": 14, "rejected": 0},
                            "component_qc": {"rows": rows, "rejected": rejected}}}
        return build_records(state, results, markers, ImageProvider(state, tmp_path), 10.0,
                             opts, load_profile())

    good = records(188, 135)
    assert good["complete"] is True and good["empty_stages"] == []
    assert records(0, 0)["empty_stages"] == []
    bad = records(188, 188)
    assert bad["complete"] is False and bad["empty_stages"] == ["full:component_qc"]
    assert "`full:component_qc`" in records_markdown(bad)


def test_an_interrupted_pass_still_records_what_it_ran(tmp_path: Path) -> None:
    """A session's end stops a pass of hours with SIGTERM: the record of that pass keeps
    the pods that finished (their images, peaks) and says it was interrupted."""
    import signal

    from tests.cluster.test_argo_local import Recorder, container, workflow

    def rule(pod: Pod, attempt: int) -> PodResult:
        if pod.node.endswith(".b"):
            signal.raise_signal(signal.SIGINT)  # as Ctrl-C: the main thread stops the run
            time.sleep(1)
        return PodResult("Succeeded", 0, info={"peak_rss_bytes": 2**27})

    wf = workflow([{"name": "a", "template": "a-shard"},
                   {"name": "b", "template": "b-shard", "dependencies": ["a"]}],
                  [container("a-shard", ["a"]), container("b-shard", ["b"])])
    ex = Executor(wf, runner=Recorder(rule), workers=1, name="w")
    # a shell starts a background job (`make test &`) with SIGINT ignored, and Python then
    # installs no handler: the raised SIGINT did nothing and the run finished
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            ex.run()
    finally:
        signal.signal(signal.SIGINT, previous)
    result = ex.snapshot("Interrupted", 2.0)
    assert result.phase == "Interrupted"
    assert result.nodes["w.a"]["phase"] == "Succeeded"
    assert result.nodes["w.a"]["attempts"][0]["peak_rss_bytes"] == 2**27
    state = State(tmp_path / "state.json")
    rec = build_records(state, {"full": result}, {}, ImageProvider(state, tmp_path), 2.0,
                        Options(work=tmp_path, workflows=("full",)), load_profile())
    assert rec["complete"] is False
    assert rec["images"]["reference-cpu"]["peak_rss_mb"] == 128
    rec["interrupted"] = "signal 15"
    assert "Interrupted (signal 15)" in records_markdown(rec)


def test_the_record_shows_the_image_test_of_the_image_the_pods_ran(tmp_path: Path) -> None:
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    state.update_image("qc", image_id="a" * 64, image_test={
        "result": "pass", "wall_s": 33, "image_id": "a" * 64, "stages": {}})
    state.update_image("tts-f5", image_id="d" * 64, image_test={  # an older build's test
        "result": "pass", "wall_s": 30, "image_id": "c" * 64, "stages": {}})
    nodes = {f"w.{stage}.shard(0)": {"phase": "Succeeded", "template": f"{stage}-shard",
                                     "image": f"ghcr.io/madbench/{slug}:0.1.0", "memo": False,
                                     "attempts": [{"phase": "Succeeded", "seconds": 1.0}]}
             for stage, slug in (("source-qc", "qc"), ("speech-tts-same-a", "tts-f5"))}
    results = {"full": WorkflowResult("w", "Succeeded", 3.0, nodes, [])}
    rec = build_records(state, results, {"full": {}}, ImageProvider(state, tmp_path), 3.0,
                        Options(work=tmp_path, workflows=("full",), image_tests=True),
                        load_profile())
    assert rec["images"]["qc"]["image_test"]["result"] == "pass"
    assert rec["images"]["tts-f5"]["image_test"] is None
    assert rec["profile"]["image_tests"] is True
    text = records_markdown(rec)
    assert "| pass (33 s) | ok |" in text and "| — | ok |" in text
    assert "Image tests (`make image-test` of the image the pods ran): 1 passed, 0 failed." \
        in text


def _node(template: str, image: str, gpu: int = 0, **extra: Any) -> dict[str, Any]:
    return {"phase": "Succeeded", "template": template, "image": image, "gpu": gpu,
            "memo": False, "attempts": [{"phase": "Succeeded", "seconds": 1.0}], **extra}


def test_every_image_whose_pods_request_a_gpu_is_recorded_as_run_on_the_cpu(
        tmp_path: Path) -> None:
    """27 of 28 images request nvidia.com/gpu; the record said so for one (the field came
    only from attempts that ran in this part, and memo entries dropped it)."""
    from madbench_common.cluster.argo_local import WorkflowResult
    from tests.cluster.rehearsal.support import omni_memo
    from tests.cluster.test_argo_local import Recorder, container, workflow

    # the executor's node snapshot carries the template's GPU request
    gpu = container("gpu", ["x"])
    gpu["container"]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    wf = workflow([{"name": "a", "template": "gpu"}, {"name": "b", "template": "cpu"}],
                  [gpu, container("cpu", ["y"])])
    nodes = Executor(wf, runner=Recorder(), name="w").run().nodes
    assert (nodes["w.a"]["gpu"], nodes["w.b"]["gpu"]) == (1, 0)

    memo, pod = omni_memo(tmp_path, gpu=1)
    state, provider = memo.state, memo.provider
    memo.record("k", pod, PodResult("Succeeded", 0, seconds=3.0))
    assert memo.entry("k", pod)["gpu_requested"] is True

    ran = _node("omni-baichuan15-shard", "ghcr.io/madbench/omni-baichuan15:0.1.0", gpu=1)
    skipped = {**_node("det-batfd-shard", "ghcr.io/madbench/det-batfd:0.1.0", gpu=1),
               "memo": True, "attempts": [], "earlier": {"seconds": 5.0}}  # an old entry
    cpu = _node("source-qc-shard", "ghcr.io/madbench/reference-cpu:0.1.0")
    results = {"full": WorkflowResult("w", "Succeeded", 3.0, {"w.a": ran, "w.b": skipped,
                                                              "w.c": cpu}, [])}
    rec = build_records(state, results, {"full": {}}, provider, 3.0,
                        Options(work=tmp_path, workflows=("full",)), load_profile())
    flags = {slug: r["gpu_requested_ran_on_cpu"] for slug, r in rec["images"].items()}
    assert flags == {"omni-baichuan15": True, "det-batfd": True, "reference-cpu": False}
    assert "| on CPU |" in records_markdown(rec)


def test_stand_ins_and_the_api_stub_are_marked_per_stage(tmp_path: Path) -> None:
    """The banner's "tiny checkpoint in the real release layout" does not hold for the
    stand-ins of hub-only code (DF-Arena, MiniCPM-o) nor for API models on the stub."""
    from madbench_common.cluster.argo_local import WorkflowResult
    from madbench_common.cluster.rehearsal.records import MODEL_KINDS, model_kind

    state = State(tmp_path / "state.json")
    full = {"w.1": _node("features-det-df-arena-shard", "ghcr.io/madbench/det-df-arena:0.1"),
            "w.2": _node("omni-minicpmo45-shard", "ghcr.io/madbench/omni-minicpmo45:0.1"),
            "w.3": _node("omni-baichuan15-shard", "ghcr.io/madbench/omni-baichuan15:0.1"),
            "w.4": _node("ingest-shard", "ghcr.io/madbench/reference-cpu:0.1")}
    deaf = {"d.1": _node("answer-gemini-25-flash-shard", "ghcr.io/madbench/deaf-tf5:0.1"),
            "d.2": _node("answer-qwen2-audio-shard", "ghcr.io/madbench/deaf-tf5:0.1"),
            "d.3": _node("bsc-speech-shard", "ghcr.io/madbench/reference-cpu:0.1"),
            "d.4": _node("deaf-judge-shard", "ghcr.io/madbench/reference-cpu:0.1")}
    results = {"full": WorkflowResult("w", "Succeeded", 3.0, full, []),
               "deaf": WorkflowResult("d", "Succeeded", 3.0, deaf, [])}
    rec = build_records(state, results, {}, ImageProvider(state, tmp_path), 3.0,
                        Options(work=tmp_path, workflows=("full", "deaf")), load_profile())
    kinds = {k: v for r in rec["images"].values() for k, v in r["models"].items()}
    assert kinds == {"full:features_det_df_arena": "stand_in",
                     "full:omni_minicpmo45": "stand_in",
                     "full:omni_baichuan15": "tiny_random", "full:ingest": "reference",
                     "deaf:answer_gemini_25_flash": "api_stub",
                     "deaf:answer_qwen2_audio": "tiny_random",
                     "deaf:bsc_speech": "api_stub",  # its workflow parameter names the stub
                     "deaf:deaf_judge": "api_stub"}
    assert set(kinds.values()) <= set(MODEL_KINDS)
    text = records_markdown(rec)
    assert "features_det_df_arena‡" in text and "omni_minicpmo45‡" in text
    assert "answer_gemini_25_flash§, answer_qwen2_audio |" in text
    assert "‡ (stand-in code" in rec["note"] and "§ (an API model" in rec["note"]
    assert model_kind("det-df-arena", "features_det_df_arena", None) == "stand_in"


def test_the_record_lists_the_relaxations_and_the_rejection_reasons_per_stage(
        tmp_path: Path) -> None:
    from madbench_common.cluster.argo_local import WorkflowResult

    state = State(tmp_path / "state.json")
    profile = load_profile()
    nodes = {"w.1": _node("tts-indextts2-shard", "ghcr.io/madbench/tts-indextts2:0.1", gpu=1),
             "w.2": _node("source-qc-shard", "ghcr.io/madbench/reference-cpu:0.1")}
    markers = {"full": {
        "tts_indextts2": {"rows": 26, "rejected": 17, "budget": {"max_failed_fraction": 0.05},
                          "reasons": {"generation_failed": 9, "device_error": 1,
                                      "too_long": 7}},
        "source_qc": {"rows": 14, "rejected": 0, "reasons": {}}}}
    rec = build_records(state, {"full": WorkflowResult("w", "Succeeded", 3.0, nodes, [])},
                        markers, ImageProvider(state, tmp_path), 3.0,
                        Options(work=tmp_path, workflows=("full",)), profile)
    tts = rec["images"]["tts-indextts2"]["stages"]["full:tts_indextts2"]
    assert tts["reasons"] == {"generation_failed": 9, "device_error": 1, "too_long": 7}
    assert tts["faults"] == 1 and tts["max_failed_fraction"] == 0.05
    assert rec["rejections"] == {"full:tts_indextts2": tts["reasons"]}
    relax = {r["name"]: r["value"] for r in rec["relaxations"]}
    assert set(relax) <= {"full:workflow_params", "full:stage_params"}  # the profile's own
    assert "component_qc" in relax["full:stage_params"]
    wf = Workflow.load(ROOT / "workflows" / "full.yaml")
    params = {k: str(profile.shards) for k in wf.parameters() if k.endswith("_shards")}
    rec["argo_departures"] = {"full": [r.as_dict() for r in argo_relaxations(
        wf, params, cpu_deadline_scale=profile.cpu_deadline_scale)]}
    text = records_markdown(rec)
    assert "- `full:shards`: ran each stage with the shard count of the rehearsal profile" in text
    assert "- `full:gpu_deadline_scale`: multiplied the activeDeadlineSeconds of those pods by 6" \
        in text
    assert text.count("multiplied") == 1  # each departure is stated once
    assert "- `full:stage_params`: workflows/full.yaml: the profile's stage parameters" in text
    assert "- `full:tts_indextts2`: **device_error** 1, generation_failed 9, too_long 7" in text
