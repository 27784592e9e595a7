"""Component plan: balanced rotation of generator settings, one stage per setting."""

from __future__ import annotations

from collections import Counter

import numpy as np

from madbench_common.pipeline.definition import build_graph
from madbench_common.stages.clips import assign_settings
from madbench_common.stages.plan_components import generator_stages


def test_six_speech_and_six_env_settings_two_per_branch() -> None:
    stages = list(build_graph())
    for kind, branches in (("speech", ("tts_same", "tts_cross", "vc")),
                           ("env", ("t2a", "v2a", "a2a"))):
        gens = generator_stages(stages, kind)
        assert len(gens) == 6
        assert Counter(s.params["branch"] for s in gens) == dict.fromkeys(branches, 2)
        assert all(s.gpu == 1 and s.model for s in gens)


def test_assign_settings_is_balanced_distinct_and_deterministic() -> None:
    groups = {"train": [f"c{i}" for i in range(19)], "test": [f"t{i}" for i in range(6)]}
    settings = list("abcdef")
    a = assign_settings(groups, settings, 2, np.random.default_rng(0))
    b = assign_settings(groups, settings, 2, np.random.default_rng(0))
    assert a == b
    assert all(len(set(v)) == 2 for v in a.values())
    for name, clips in groups.items():
        use = Counter(s for c in clips for s in a[c])
        assert max(use.values()) - min(use.values()) <= 1, name
    full = assign_settings(groups, settings, 6, np.random.default_rng(0))
    assert all(sorted(v) == settings for v in full.values())
