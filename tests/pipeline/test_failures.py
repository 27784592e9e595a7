"""One bad item never stops a run; a fault of the whole stage fails it with the README's
exit code and one line naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from madbench_common.core.errors import EnvironmentMissing, MadbenchError, StoreWriteError
from madbench_common.core.manifest import read_manifest_bytes
from madbench_common.pipeline.failures import StageFailed
from madbench_common.pipeline.local import LocalRunner, RunOptions
from tests.pipeline.toystages import ToyRow, failing_graph


def _run(tmp: Path, stage: str, fail: dict[str, str], workers: int = 1,
         budget: float | None = None) -> dict[str, ToyRow]:
    params: dict[str, Any] = {"fail": fail}
    if budget is not None:
        params["max_failed_fraction"] = budget
    opts = RunOptions(store=str(tmp / "store"), run_id="r", until=stage, progress=False,
                      workers=workers, params={stage: params},
                      shards={"flaky": 2, "batch": 2, "whole": 1})
    graph = failing_graph()
    keep = [s.name for s in graph if s.name != stage]
    opts.params.update({name: {"n": 0} for name in keep})
    LocalRunner(failing_graph, opts).execute()
    data = (tmp / "store" / "r" / stage / "manifest.parquet").read_bytes()
    return {r.clip_id: r for r in read_manifest_bytes(ToyRow, data)}


@pytest.mark.parametrize("stage", ["flaky", "batch"])
def test_one_failing_item_is_quarantined_and_the_others_go_on(tmp_path: Path,
                                                              stage: str) -> None:
    rows = _run(tmp_path, stage, {"c01": "runtime", "c03": "name", "c04": "encoding"},
                budget=0.5)  # one item_failed of 6 rows: over the default budget
    assert [r.clip_id for r in rows.values() if r.ok] == ["c00", "c02", "c05"]
    assert rows["c01"].reason == "item_failed"
    assert "RuntimeError: model blew up on c01" in rows["c01"].detail
    assert rows["c03"].reason == "io_error" and "File name too long" in rows["c03"].detail
    assert rows["c03"].detail.startswith("/store/c03")  # names the file
    assert rows["c04"].reason == "bad_encoding" and "UnicodeDecodeError" in rows["c04"].detail
    assert rows["c02"].value == 2


@pytest.mark.parametrize(("how", "kind", "code", "words"), [
    ("disk", StoreWriteError, 75, "no space left"),
    ("module", EnvironmentMissing, 3, "madbench_no_such_module"),
    ("readonly", EnvironmentMissing, 3, "read-only file system"),
])
@pytest.mark.parametrize("stage", ["flaky", "batch"])
def test_a_fault_of_the_whole_stage_fails_it_with_its_exit_code(
        tmp_path: Path, stage: str, how: str, kind: type[MadbenchError], code: int,
        words: str) -> None:
    with pytest.raises(kind) as err:
        _run(tmp_path, stage, {"c02": how})
    assert err.value.exit_code == code and words in str(err.value)
    assert not (tmp_path / "store" / "r" / stage / "_SUCCESS").exists()


def test_a_stage_that_is_not_separable_fails_as_a_whole_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(StageFailed) as err:
        _run(tmp_path, "whole", {"c02": "runtime"})
    text = str(err.value)
    assert err.value.exit_code == 3 and "\n" not in text
    assert text.startswith("stage whole shard 1/1 failed: RuntimeError: model blew up on c02")


def test_the_cli_prints_one_line_not_a_traceback(tmp_path: Path) -> None:
    """What a pod's log shows when the stage fails as a whole."""
    import json
    import os
    import subprocess
    import sys

    env: dict[str, Any] = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    code = ("import sys; from madbench_common import cli; "
            "from tests.pipeline.toystages import failing_graph; "
            "import madbench_common.cli.pipeline as cp; cp.build_graph = failing_graph; "
            "sys.exit(cli.main(sys.argv[1:]))")
    done = subprocess.run(
        [sys.executable, "-c", code, "stage", "run", "--stage", "whole", "--store",
         str(tmp_path / "s"), "--run-id", "r", "--params-json",
         json.dumps({"fail": {"c01": "runtime"}})], capture_output=True, text=True, env=env,
        timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "stage whole shard 1/1 failed: RuntimeError: model blew up on c01" in done.stderr


_MARKER_GONE = """
import os, sys
from madbench_common import cli
import madbench_common.cli.pipeline as cp
import madbench_common.pipeline.local as local
from tests.pipeline.toystages import failing_graph
cp.build_graph = failing_graph
runner, real = os.getpid(), local.make_context
def make_context(run, graph, stage, *args, **kwargs):
    if os.getpid() != runner:  # a shard worker, reading an upstream marker the store lost
        raise FileNotFoundError(run.uri("ingest/_SUCCESS") + ": no such object")
    return real(run, graph, stage, *args, **kwargs)
local.make_context = make_context
sys.exit(cli.main(sys.argv[1:]))
"""


def test_a_store_error_in_a_worker_is_one_line_naming_the_object(tmp_path: Path) -> None:
    """A store reply nobody expected, met by a shard worker before its shard runs (while
    it reads the upstream markers): ``madbench run`` says which stage, shard and object, in
    one line, exit 3, as for a shard that failed as a whole; it ended in a traceback from
    the worker's future (exit 1) on a resume on S3."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    store = tmp_path / "s"
    done = subprocess.run(
        [sys.executable, "-c", _MARKER_GONE, "run", "--store", str(store), "--run-id", "r",
         "--until", "flaky", "--workers", "2", "--no-progress"],
        capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr[-2000:]
    assert lines[0].startswith("error: stage flaky shard ")
    assert f"FileNotFoundError: {store.resolve().as_uri()}/r/ingest/_SUCCESS: no such object" \
        in lines[0]
