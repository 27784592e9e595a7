"""Table 5 cell sources, the §5.1 native-vs-head check and Table 4's donor loop share,
on hand-made result records (numbers chosen by hand, no fitting)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from madbench_common.benchmarks.madbench.eval.fit import GroupScores
from madbench_common.benchmarks.madbench.eval.suite import EvalResult, ModelInfo
from madbench_common.benchmarks.madbench.eval.tables import head_check, paper_tables, table4, table5


def _mean(source: str, task: str, metric: str, value: float, mode: str = "A") -> dict:
    return {"source": source, "mode": mode, "task": task, "metric": metric,
            "protocols": ["balanced", "scene_matched", "scene_mismatched"], "value": value,
            "value_lo": value - 0.01, "value_hi": value + 0.01, "excluded_rate": 0.0}


def _task(source: str, task: str, mode: str = "A") -> dict:
    return {"source": source, "task": task, "mode": mode, "protocol": "balanced",
            "pairing": "paired", "auc": 0.5}


def _detector() -> EvalResult:
    """A detector with native binary scores (AUC 0.524) and heads on its features: binary
    head 0.536, four-way macro-F1 0.201, speech 0.55, env 0.517."""
    means = [_mean("native", "binary", "auc", 0.524), _mean("head", "binary", "auc", 0.536),
             _mean("head", "fourway", "macro_f1", 0.201), _mean("head", "speech", "auc", 0.55),
             _mean("head", "env", "auc", 0.517)]
    tasks = [_task("native", "binary"), _task("head", "binary"), _task("head", "fourway"),
             _task("head", "speech"), _task("head", "env")]
    return EvalResult(ModelInfo("det", "DetX", "audio_detector"),
                      {"means": means, "tasks": tasks})


def test_table5_marks_native_and_head_cells() -> None:
    t = table5([_detector()])
    (_, rows), = t.sections
    binary, fourway, speech, env = rows[0][2:]
    assert binary.startswith("0.524") and binary.endswith(" ⁿ")  # native direct transfer
    assert fourway.startswith("0.201") and fourway.endswith(" ʰ")  # H_4way on features
    assert speech.endswith(" ʰ") and env.endswith(" ʰ")
    assert t.marks == ["ⁿ", "ʰ"]  # explained once, in the report's legend


def test_head_check_shows_the_binary_head_against_the_native_scores() -> None:
    """§5.1: 0.536 (H_bin) − 0.524 (native) = +0.012, BA-TFD+'s gain in the paper."""
    t = head_check([_detector()])
    (_, rows), = t.sections
    name, mode, native, head, gain = rows[0]
    assert (name, mode) == ("DetX", "A")
    assert native.startswith("0.524 [0.514, 0.534]") and head.startswith("0.536")
    assert gain == "+0.012"
    only_head = EvalResult(ModelInfo("enc", "Enc", "audio_encoder"),
                           {"means": [_mean("head", "binary", "auc", 0.9)],
                            "tasks": [_task("head", "binary")]})
    assert not head_check([only_head]).sections  # nothing to compare
    assert "head_check" in [x.key for x in paper_tables([_detector()])]


def test_table4_reports_the_share_of_looped_donors() -> None:
    """Test rows: D-R inconsistent ×4 (one looped), S-R inconsistent ×2 (none looped),
    consistent rows and D-S are not counted."""
    rows = ([("D-R", False, f) for f in ("loop", "trim", "exact", "trim")]
            + [("S-R", False, "trim"), ("S-R", False, "exact"), ("D-R", True, ""),
               ("D-S", False, "loop")])
    test = pd.DataFrame(rows, columns=["sc_condition", "scene_consistent", "env_fit"])
    group = GroupScores("scene_consistency", "AV", "paired", test,
                        {"scene": np.zeros(len(test))})
    r = EvalResult(ModelInfo("enc", "Enc", "av_encoder"), {}, [group])
    notes = " ".join(table4([r]).notes)
    assert "D-R 1 / 4; S-R 0 / 2" in notes
