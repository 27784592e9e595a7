"""The one device switch of the adapter tests: ``MADBENCH_TEST_DEVICE`` (default ``cpu``).

``make adapter-test IMAGE=<slug> DEVICE=cuda`` sets it. Every adapter test module takes
its model device from :data:`DEVICE` here and no dtype: on CUDA each adapter then picks
the dtype it runs in on the cluster (bf16 for the omni, DEAF and scene models, fp16 for
Whisper's features, fp32 for the encoders), so a GPU run tests that dtype.
``tests/test_adapter_devices.py`` fails on any other literal CPU device in those modules.
"""

from __future__ import annotations

import os

__all__ = ["DEVICE", "ENV", "adapter_device"]

ENV = "MADBENCH_TEST_DEVICE"


def adapter_device() -> str:
    """``$MADBENCH_TEST_DEVICE`` (``cpu``, ``cuda``, ``cuda:1``, …), else ``cpu``."""
    return os.environ.get(ENV, "").strip() or "cpu"


DEVICE = adapter_device()
