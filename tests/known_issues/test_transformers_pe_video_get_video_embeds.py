"""transformers 5.24.0: ``PeAudioVideoModel.get_video_embeds`` raises AttributeError.

``PeVideoModel.get_video_features`` is indented inside ``__init__`` (a local function,
not a method), and ``PeAudioVideoModel.get_video_embeds`` calls the missing
``video_model.get_video_embeds``. The PE-AV adapter computes the video embedding as
``forward`` does. When this test fails after a transformers bump, the upstream method
works: switch the adapter back to ``get_video_embeds`` and delete this test.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="run make adapter-test IMAGE=enc-tf5")
pytest.importorskip("timm", reason="run make adapter-test IMAGE=enc-tf5")


def test_pe_video_model_has_no_get_video_embeds() -> None:
    from transformers import PeAudioVideoModel, PeVideoModel

    assert not hasattr(PeVideoModel, "get_video_embeds")
    assert not hasattr(PeVideoModel, "get_video_features")
    assert hasattr(PeAudioVideoModel, "get_video_embeds")  # …which calls the missing method
