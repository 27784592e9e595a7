"""The HTML report in a headless browser: tables and matplotlib figures render (``make test``
installs chromium, so CI runs it; elsewhere it skips naming chromium where it is missing)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval.fit import FeatureSet
from madbench_common.benchmarks.madbench.eval.report import render_html
from madbench_common.benchmarks.madbench.eval.screenshot import screenshot
from madbench_common.benchmarks.madbench.eval.suite import EvalConfig, ModelInfo, run_evaluation

from .test_robustness_eval import _perturbed

pytestmark = pytest.mark.needs_tools("chromium")

BLUE = np.array([31, 119, 180])  # the first curve's colour (matplotlib tab:blue)


def _colour_share(png: Path, colour: np.ndarray, tol: int = 40) -> float:
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    return float((np.abs(img - colour).sum(axis=2) < tol).mean())


def test_report_renders_tables_and_figures(samples: pd.DataFrame, features: FeatureSet,
                                           tmp_path: Path) -> None:
    perturbed, fs = _perturbed(samples, features)
    cfg = EvalConfig(n_boot=0, logo=False)
    results = [run_evaluation(ModelInfo("enc", "AVEnc", "av_encoder"), samples, features=fs,
                              config=cfg, perturbed=perturbed)]
    page = tmp_path / "report.html"
    page.write_text(render_html(results), encoding="utf-8")
    top = screenshot(page, tmp_path / "top.png", height=900)
    # Table 2 with its ROC/DET figure beneath it
    figures = screenshot(page, tmp_path / "figures.png", height=2400, fragment="table2a")
    from PIL import Image

    assert Image.open(figures).size == (1400, 2400)
    # the top of the page is text on white: mostly white, but not blank
    assert 0.5 < _colour_share(top, np.array([255, 255, 255]), 10) < 0.995
    # the figures: the curves' blue is drawn (inline SVG rendered, not a broken image)
    assert _colour_share(figures, BLUE) > 0.001
    assert _colour_share(top, BLUE) > 0  # the summary's dot plot (binary AUC dots)
