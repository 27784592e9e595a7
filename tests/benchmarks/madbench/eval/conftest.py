"""Session fixtures for the evaluation tests (synthetic samples and features)."""

from __future__ import annotations

import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval.fit import FeatureSet
from madbench_common.benchmarks.madbench.eval.tasks import CORE_PROTOCOLS

from .eval_synth import make_features, make_samples


@pytest.fixture(scope="session")
def samples() -> pd.DataFrame:
    return make_samples(120, CORE_PROTOCOLS, scene=True)


@pytest.fixture(scope="session")
def features(samples: pd.DataFrame) -> FeatureSet:
    return make_features(samples)
