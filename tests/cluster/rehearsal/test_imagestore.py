"""The machine's image store: a build that cannot fit on the disk stops before it starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from madbench_common.cluster.rehearsal.images import ImageProvider
from madbench_common.cluster.rehearsal.state import State
from madbench_common.core.errors import ConfigError


def test_a_build_that_cannot_fit_on_the_disk_stops_before_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """torch-2.0.1's base build peaks at 17 GiB; a pass started it at about 17 GiB free and
    failed minutes in with "no space left on device", twice (the second time 12 GB were
    temp folders that killed builds had left in /var/tmp). The check names the need from
    the lock's measured peaks, the free space and the leftovers, before the build."""
    from madbench_common.cluster.rehearsal import images
    from madbench_common.cluster.rehearsal import imagestore as store

    lock = {"python-py311": {"build": {"disk_peak_gb": 4.8}},
            "torch-2.0.1-py311": {"build": {"disk_peak_gb": 17.0}},
            "deaf-salmonn": {"build": {"disk_peak_gb": 1.2}}}
    tmp = tmp_path / "var-tmp"
    (tmp / "buildah123456" / "layer").mkdir(parents=True)
    (tmp / "buildah123456" / "layer" / "blob").write_bytes(b"\0" * 4096)
    (tmp / "storage987").mkdir()
    (tmp / "unrelated").mkdir()
    monkeypatch.setattr(store, "_BUILD_TMP", tmp)
    monkeypatch.setattr(store, "_STORAGE", tmp_path / "no-store")
    gib = 2**30
    base_present = lambda s: s == "python-py311"  # noqa: E731
    problem = store.disk_problem("deaf-salmonn", present=base_present, lock=lock,
                                 free=lambda _p: 17 * gib)
    assert problem is not None
    assert "17.0 GiB free" in problem and "at least 20.2 GiB" in problem
    assert "torch-2.0.1-py311 17.0, deaf-salmonn 1.2" in problem and "python-py311" not in problem
    assert "2 temp folders" in problem and "buildah123456, storage987" in problem
    assert "unrelated" not in problem
    # with the base built only the leaf's peak counts; with room enough, no problem
    assert store.disk_problem("deaf-salmonn", present=lambda s: True, lock=lock,
                              free=lambda _p: 17 * gib) is None
    assert store.disk_problem("deaf-salmonn", present=base_present, lock=lock,
                              free=lambda _p: 21 * gib) is None
    assert store.disk_problem("no-such-image", lock=lock, free=lambda _p: 0) is None

    state = State(tmp_path / "state.json")
    provider = ImageProvider(state, tmp_path)
    ran: list[Any] = []
    # the provider checks through the name it imported
    monkeypatch.setattr(images, "disk_problem", lambda slug: f"image {slug}: no room")
    monkeypatch.setattr(provider, "_run_logged", lambda *a: ran.append(a))
    with pytest.raises(ConfigError, match="image deaf-salmonn: no room"):
        provider._run_build(["image", "deaf-salmonn"], tmp_path / "log", {}, "deaf-salmonn")
    assert ran == []
