"""core.environ: variables set for a block come back as they were, set or unset."""

from __future__ import annotations

import os

import pytest

from madbench_common.core.environ import environ


def test_values_hold_inside_and_are_put_back_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MB_ENV_SET", "before")
    monkeypatch.delenv("MB_ENV_UNSET", raising=False)
    with pytest.raises(RuntimeError), environ({"MB_ENV_SET": "in", "MB_ENV_UNSET": "in"}):
        assert os.environ["MB_ENV_SET"] == os.environ["MB_ENV_UNSET"] == "in"
        raise RuntimeError("the block fails: the variables are restored all the same")
    assert os.environ["MB_ENV_SET"] == "before"
    assert "MB_ENV_UNSET" not in os.environ
