"""The report's figures: DET on normal-deviate axes, AUC/EER legends, deterministic SVG."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from madbench_common.benchmarks.madbench.eval import figures
from madbench_common.benchmarks.madbench.eval import metrics as M
from madbench_common.benchmarks.madbench.eval.figures import (
    figures_html,
    generator_bars,
    roc_curves,
)
from madbench_common.benchmarks.madbench.eval.fit import FeatureSet
from madbench_common.benchmarks.madbench.eval.suite import (
    MAX_POINTS,
    EvalConfig,
    EvalResult,
    ModelInfo,
    run_evaluation,
)


@pytest.fixture(scope="module")
def results(samples: pd.DataFrame, features: FeatureSet) -> list[EvalResult]:
    audio = FeatureSet({k: v for k, v in features.matrices.items() if k[0] == "A"})
    cfg = EvalConfig(n_boot=0, logo=False)
    return [run_evaluation(ModelInfo("av", "AVEnc", "av_encoder"), samples, features=features,
                           config=cfg),
            run_evaluation(ModelInfo("a", "AEnc", "audio_encoder"), samples, features=audio,
                           config=cfg)]


def test_det_axes_are_normal_deviates() -> None:
    plt = figures._pyplot()
    fig, ax = plt.subplots()
    figures.det_axes(ax)
    np.testing.assert_allclose(ax.get_xticks(), norm.ppf(figures.DET_TICKS))
    np.testing.assert_allclose(ax.get_yticks(), norm.ppf(figures.DET_TICKS))
    assert [t.get_text() for t in ax.get_xticklabels()][:4] == ["0.1", "0.5", "1", "2"]
    assert "normal deviate" in ax.get_xlabel() and "miss" in ax.get_ylabel()
    plt.close(fig)


def test_curves_carry_the_tables_auc_and_eer(results: list[EvalResult]) -> None:
    r = results[0]
    g = next(g for g in r.groups if (g.protocol, g.mode) == ("balanced", "AV"))
    rec = next(c for c in r.tables["curves"] if (c["protocol"], c["mode"], c["task"])
               == ("balanced", "AV", "binary"))
    from madbench_common.benchmarks.madbench.eval.tasks import task_labels

    mask, y = task_labels(g.test, "binary")
    assert rec["auc"] == pytest.approx(M.auc(y, g.scores["binary"][mask]))
    assert rec["eer"] == pytest.approx(M.eer_asvspoof(y, g.scores["binary"][mask]))
    assert rec["fpr"][0] == 0 and rec["tpr"][-1] == 1 and len(rec["fpr"]) <= MAX_POINTS


def test_roc_det_figure_legend_and_axes(results: list[EvalResult]) -> None:
    curves = roc_curves(results, "balanced")
    assert [label for label, _ in curves] == ["AVEnc", "AEnc"]
    fig = figures.roc_det_figure("Balanced", curves)
    roc, det = fig.axes[:2]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert all(re_ok(t) for t in labels) and len(labels) == 2
    assert roc.get_xlabel().startswith("False-positive rate")
    assert roc.get_ylabel().startswith("True-positive rate")
    assert det.get_title() == "DET" and "normal deviate" in det.get_xlabel()
    figures._pyplot().close(fig)


def re_ok(text: str) -> bool:
    import re

    return re.fullmatch(r"\w+ \(AUC \d\.\d{3}, EER \d+\.\d%\)", text) is not None


def test_figures_html_is_deterministic_svg(results: list[EvalResult]) -> None:
    first, second = figures_html(results), figures_html(results)
    assert first == second
    assert first.count("<svg") == 5  # three core protocols, scene consistency, generators
    assert "ROC and DET: Scene consistency" in first and "Per-generator detection" in first
    assert "AUC 0." in first and "EER" in first  # legends are text, not paths
    gens, bars = generator_bars(results)
    assert "speech:tts0" in gens and len(bars) == 2
