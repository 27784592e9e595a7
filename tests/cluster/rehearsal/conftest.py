"""Fixtures of the rehearsal's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def nothing_built_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """No local build of any image: the provider's lookup (``buildah inspect``) answers
    "none", so these tests of how parameters are bound need no container engine and do not
    depend on the images this machine holds."""
    from madbench_common.cluster.rehearsal import images

    monkeypatch.setattr(images, "_image_id", lambda _ref: None)
