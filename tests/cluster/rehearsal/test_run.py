"""A pass: command-line overrides reach only the workflows that have them, one pass per work
folder, and the opt-in smoke rehearsal in real containers."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from madbench_common.cluster.argo_local import Workflow
from madbench_common.cluster.rehearsal.images import ImageProvider
from madbench_common.cluster.rehearsal.profile import Options, load_profile
from madbench_common.cluster.rehearsal.run import workflow_params
from madbench_common.cluster.rehearsal.state import State
from madbench_common.cluster.sandbox import STUB_PORT
from madbench_common.core.errors import ConfigError
from tests.cluster.rehearsal.support import ROOT


def test_command_line_overrides_reach_only_the_workflows_that_have_them(
        tmp_path: Path, nothing_built_here: None) -> None:
    from madbench_common.cluster.rehearsal.run import _overrides

    profile = load_profile()
    flows = [f for f in profile.workflows if f.name in ("full", "deaf")]
    workflows = {f.name: Workflow.load(ROOT / f.file) for f in flows}
    opts = Options(work=tmp_path, params=("separate_model=ref-deepfilternet3",
                                          "separate_image=ghcr.io/madbench/reference-cpu:0.1.0"),
                   stage_sets=("source_qc.asr=ref-pocketsphinx", "deaf_judge.mode=rule"))
    params, sets = _overrides(opts, flows, workflows)
    assert sets == {"full": {"source_qc": {"asr": "ref-pocketsphinx"}},
                    "deaf": {"deaf_judge": {"mode": "rule"}}}
    provider = ImageProvider(State(tmp_path / "state.json"), tmp_path)
    full = workflow_params(workflows["full"], flows[0], profile, provider,
                           {"stub_port": STUB_PORT}, params, sets["full"])
    assert full["separate_model"] == "ref-deepfilternet3"
    assert full["separate_image"]() == "ghcr.io/madbench/reference-cpu:0.1.0"  # nothing built
    assert json.loads(full["stage_params"])["source_qc"]["asr"] == "ref-pocketsphinx"
    assert json.loads(full["stage_params"])["source_qc"]["max_music_prob"] == 1.01  # profile kept
    deaf = workflow_params(workflows["deaf"], flows[1], profile, None, {"stub_port": STUB_PORT},
                           params, sets["deaf"])
    assert "separate_model" not in deaf
    with pytest.raises(ConfigError, match="no workflow of this rehearsal has a parameter"):
        _overrides(Options(work=tmp_path, params=("nope=1",)), flows, workflows)
    with pytest.raises(ConfigError, match="stage"):
        _overrides(Options(work=tmp_path, stage_sets=("nostage.k=1",)), flows, workflows)


def test_a_second_pass_in_one_work_folder_is_refused(tmp_path: Path) -> None:
    """Two passes in one folder would share its store, state and working containers
    (the second would remove the first's containers as a killed pass's leftovers)."""
    import fcntl
    import signal

    from madbench_common.cluster.rehearsal.run import rehearse

    tmp_path.joinpath(".lock").touch()
    with open(tmp_path / ".lock") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ConfigError, match="another rehearsal is using this work folder"):
            rehearse(Options(work=tmp_path, workflows=("nope",)))
    # free again: the pass starts (and stops at the unknown workflow, not at the lock)
    handler = signal.getsignal(signal.SIGTERM)  # a pass that starts sets its own
    try:
        with pytest.raises(ConfigError, match="no workflow"):
            rehearse(Options(work=tmp_path, workflows=("nope",)))
    finally:
        signal.signal(signal.SIGTERM, handler)


@pytest.mark.image
@pytest.mark.slow
@pytest.mark.needs_tools("buildah", root=True)
def test_smoke_rehearsal_in_real_containers(tmp_path: Path) -> None:
    """Opt-in (MADBENCH_IMAGE_TEST=1, root, buildah): workflows/smoke.yaml through the executor,
    every pod in reference-cpu under the pod policy, inside the private namespace with
    SeaweedFS; ends with the report and a record. Builds reference-cpu when missing."""
    if os.environ.get("MADBENCH_IMAGE_TEST") != "1":
        pytest.skip("opt-in: set MADBENCH_IMAGE_TEST=1 (runs ~200 pods in reference-cpu)")
    from madbench_common.cluster.rehearsal.run import rehearse

    records = tmp_path / "rehearsal.json"
    code = rehearse(Options(work=tmp_path / "work", workflows=("smoke",), keep_images=True,
                            records=records))
    rec = json.loads(records.read_text())
    assert code == 0, rec["workflows"]
    ref = rec["images"]["reference-cpu"]
    assert ref["rows_ok"] > 0 and ref["peak_rss_mb"] and ref["status"] == "ok"
    assert rec["workflows"]["smoke"]["phase"] == "Succeeded"
    # a second pass resumes: every pod is skipped by the memo
    code = rehearse(Options(work=tmp_path / "work", workflows=("smoke",), keep_images=True,
                            records=records))
    again = json.loads(records.read_text())["images"]["reference-cpu"]
    assert code == 0 and again["pods_run"] <= 1 and again["pods_skipped"] >= ref["pods"] - 1
    logs = "".join(p.read_text() for p in (tmp_path / "work" / "logs").rglob("*.log"))
    state = (tmp_path / "work" / "state.json").read_text()
    assert not re.search(r"AWS_SECRET_ACCESS_KEY=\w", logs + state)
