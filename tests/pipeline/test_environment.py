"""A missing tool, model or weight fails the stage (exit 3); bad input stays a rejected row."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from madbench_common.core.errors import ConfigError, EnvironmentMissing, InputRejected
from madbench_common.models.registry import REGISTRY, ModelSpec, load_model
from madbench_common.models.weights import WeightsMissing
from madbench_common.pipeline.stage import MapStage
from tests.pipeline.toystages import ToyRow


class _Wrapping(MapStage[ToyRow]):
    """Stage code that turns every ConfigError into a rejected row, as generators did."""

    def __init__(self, error: Exception) -> None:
        super().__init__(SimpleNamespace(stage=SimpleNamespace(name="t"), params={}))  # type: ignore[arg-type]
        self.error = error

    def plan(self) -> list[str]:
        return ["a", "b"]

    def run_item(self, item: str) -> ToyRow:
        try:
            raise self.error
        except ConfigError as exc:
            raise InputRejected(item, "generation_failed", str(exc)) from None

    def rejected_row(self, item: str, exc: InputRejected) -> ToyRow:
        return ToyRow(clip_id=item, status="rejected", reason=exc.reason)


def _run(error: Exception) -> Sequence[ToyRow]:
    return _Wrapping(error).run_items(["a", "b"])


@pytest.mark.parametrize("error", [EnvironmentMissing("flite not found on PATH"),
                                   WeightsMissing("x.bin", "tts-f5", Path("/w"))])
def test_environment_errors_are_never_quarantined(error: Exception) -> None:
    with pytest.raises(EnvironmentMissing) as err:
        _run(error)
    assert err.value.exit_code == 3


def test_bad_input_stays_a_rejected_row() -> None:
    rows = _run(ConfigError("text is empty"))
    assert [(r.clip_id, r.status, r.reason) for r in rows] == [
        ("a", "rejected", "generation_failed"), ("b", "rejected", "generation_failed")]


def test_a_model_whose_package_is_missing_is_an_environment_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ModelSpec("test-missing", "asr", "no_such_package.asr:Model", False,
                          "asr-image", "test")
    monkeypatch.setitem(REGISTRY, "test-missing", spec)
    with pytest.raises(EnvironmentMissing, match=r"no_such_package.*asr-image"):
        load_model("test-missing")
