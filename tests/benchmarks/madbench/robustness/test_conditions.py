"""Robustness conditions: the packaged list covers the issue's set; bad lists are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from madbench_common.benchmarks.madbench.robustness.conditions import (
    builtin_conditions,
    parse_conditions,
)
from madbench_common.cli.pipeline import parse_set
from madbench_common.core.errors import ConfigError


def test_the_packaged_list_covers_the_required_conditions() -> None:
    conds = {c.name: c for c in parse_conditions(builtin_conditions())}
    codecs: dict[str, set[int]] = {}
    for c in conds.values():
        if c.family == "codec":
            (step,) = c.chain
            codecs.setdefault(step.get("codec"), set()).add(int(step.get("bitrate")))
    assert {k: len(v) >= 2 for k, v in codecs.items()} == {"mp3": True, "aac": True,
                                                          "opus": True}
    tel = conds["telephone_g711"].chain
    assert [s.op for s in tel] == ["resample", "bandpass", "codec"]
    assert tel[0].get("sample_rate") == 8000 and tel[2].get("codec") == "mulaw"
    snrs = sorted(c.chain[0].get("snr_db") for c in conds.values() if c.family == "noise")
    assert snrs == [0, 5, 10, 20]
    assert {c.chain[0].get("sample_rate") for c in conds.values() if c.family == "resample"} \
        == {8000, 48000}  # down and back, up and back
    up = conds["upload_aac"].chain
    assert [(s.get("codec"), s.get("bitrate")) for s in up] == [("aac", 128000), ("aac", 64000)]


@pytest.mark.parametrize(("bad", "message"), [
    ([{"name": "x", "chain": [{"op": "codec", "codec": "flac", "sample_rate": 16000,
                               "bitrate": 1}]}], "codec 'flac'"),
    ([{"name": "x", "chain": [{"op": "noise", "snr": 3}]}], "takes ['snr_db']"),
    ([{"name": "x", "chain": [{"op": "reverb"}]}], "op one of"),
    ([{"name": "clean", "chain": [{"op": "noise", "snr_db": 3}]}], "not be 'clean'"),
    ([{"name": "x", "chain": []}], "non-empty"),
    ([{"name": "x", "chain": [{"op": "bandpass", "low": 3400, "high": 300}]}], "low < high"),
    ([{"name": "a", "chain": [{"op": "noise", "snr_db": 3}]}] * 2, "duplicate"),
    ("mp3", "expected a list"),
])
def test_bad_conditions_are_refused_with_the_condition_named(bad: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        parse_conditions(bad)


def test_a_user_list_extends_the_packaged_one_through_set_at_file(tmp_path: Path) -> None:
    mine = [*builtin_conditions(),
            {"name": "gsm_like", "family": "telephone",
             "chain": [{"op": "resample", "sample_rate": 8000},
                       {"op": "codec", "codec": "opus", "bitrate": 8000, "sample_rate": 8000}]}]
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"conditions": mine}))
    params = parse_set([f"perturb.conditions=@{path}"])
    conds = parse_conditions(params["perturb"]["conditions"])
    assert conds[-1].name == "gsm_like" and len(conds) == len(builtin_conditions()) + 1
    with pytest.raises(ConfigError, match="cannot read"):
        parse_set([f"perturb.conditions=@{tmp_path / 'missing.yaml'}"])
