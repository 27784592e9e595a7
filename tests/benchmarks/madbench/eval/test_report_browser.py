"""The HTML report read as a person reads it, in headless Chromium (``make test``
installs chromium with the other test tools, so CI runs it; elsewhere it skips naming
chromium where it is missing).

A small synthetic run (three models, robustness conditions, one model name, the run id, a
generator and the quarantined clip ids carrying HTML) is rendered; then:

* a screenshot of the first screen (1400 × 900) and one of Table 2 alone;
* a probe script, appended to a copy of the page and run by Chromium (``--dump-dom``),
  measures where the summary's headline table ends, counts the legends, records the rows'
  order before and after a click on a column header, and looks for injected elements.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from madbench_common.benchmarks.madbench.eval.fit import FeatureSet
from madbench_common.benchmarks.madbench.eval.report import write_report
from madbench_common.benchmarks.madbench.eval.screenshot import dump_dom, screenshot
from madbench_common.benchmarks.madbench.eval.suite import EvalConfig, ModelInfo, run_evaluation

from .eval_synth import make_features
from .test_robustness_eval import _perturbed

pytestmark = pytest.mark.needs_tools("chromium")

HOSTILE = '<script>window.PWNED=1</script><img id=pwn src=x onerror="window.PWNED=2">'
FIRST_SCREEN = 900  # px: the screenshot's height, 1400 × 900
BLUE = np.array([31, 119, 180])  # the dot plot's binary-AUC dots (and the first curve)

# Runs after the page's own script: measure, click "Mean" of Table 2(a), write it all down.
PROBE = r"""
(function () {
  var out = {};
  var head = document.getElementById('tbl-summary').getBoundingClientRect();
  out.summaryTop = head.top; out.summaryBottom = head.bottom;
  out.viewport = window.innerHeight;
  out.legends = document.querySelectorAll('.legend').length;
  out.daggerNotes = (document.body.innerText.match(/CPU reference implementation/g) || []).length;
  out.scripts = document.scripts.length;
  out.pwned = window.PWNED || 0;
  out.injected = document.querySelectorAll('#pwn, img').length;
  var t = document.getElementById('tbl-table2a');
  function order() {
    return Array.prototype.map.call(t.querySelectorAll('tbody tr:not(.group)'),
      function (tr) { return tr.cells[0].textContent + '=' + tr.cells[tr.cells.length - 1]
        .getAttribute('data-v'); });
  }
  out.before = order();
  var th = t.querySelectorAll('thead th');
  th[th.length - 1].click();
  out.after = order();
  out.sorted = th[th.length - 1].getAttribute('aria-sort');
  out.intervalsInCells = Array.prototype.filter.call(document.querySelectorAll('td'),
    function (td) { return (td.textContent.match(/\[/g) || []).length > 1; }).length;
  var pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


@pytest.fixture(scope="module")
def page(samples: pd.DataFrame, features: FeatureSet, tmp_path_factory: pytest.TempPathFactory
         ) -> Path:
    """report.html of three models (a hostile name and generator included) and run facts."""
    hostile = samples.assign(speech_generator=samples["speech_generator"].replace(
        "tts0", "tts0" + HOSTILE))
    perturbed, fs = _perturbed(hostile, features)
    cfg = EvalConfig(n_boot=20, logo=False)
    audio = FeatureSet({k: v for k, v in fs.matrices.items() if k[0] == "A"})
    results = [
        run_evaluation(ModelInfo("det", "Det" + HOSTILE, "av_detector"), hostile,
                       features=fs, config=cfg, perturbed=perturbed),
        # ref-c before ref-a: a lower Mean first, so sorting must move a row
        run_evaluation(ModelInfo("ref-c", "ref-c", "av_encoder", reference=True,
                                 stands_in_for="CAV-MAE Sync"), hostile,
                       features=make_features(hostile, seed=9), config=cfg),
        run_evaluation(ModelInfo("ref-a", "ref-a", "av_encoder", reference=True,
                                 stands_in_for="PE-AV"), hostile,
                       features=make_features(hostile, seed=5), config=cfg),
        run_evaluation(ModelInfo("ref-b", "ref-b", "audio_encoder", reference=True,
                                 stands_in_for="WavLM"), hostile, features=audio, config=cfg),
    ]
    facts = {"run_id": "demo" + HOSTILE, "store": "file:///tmp/runs", "pipeline": "madbench",
             "commit": "0123abcd", "images": {"embedded": ["ingest", "evaluate"]},
             "stages_done": 2, "stages": 2,
             "clips": {"ingested": 30, "eligible": 28, "in_samples": 27, "train": 19, "val": 3,
                       "test": 5},
             "samples": {"balanced": {"total": 108, "train": 76, "val": 12, "test": 20}},
             "quarantine": {"total": 1, "by_reason": {"no_speech": 1}, "by_stage": [
                 {"stage": "source_qc", "reason": "no_speech", "count": 1,
                  "examples": ["clip" + HOSTILE]}]}}
    out = tmp_path_factory.mktemp("report")
    write_report(results, lambda n, b: (out / n).write_bytes(b), runs=[facts])
    return out / "report.html"


def _probe(html: Path) -> dict[str, object]:
    dom = dump_dom(html, PROBE)
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    data: dict[str, object] = json.loads(found.group(1).replace("&amp;", "&")
                                         .replace("&lt;", "<").replace("&gt;", ">"))
    return data


def _share(png: Path, colour: np.ndarray, tol: int = 40) -> float:
    from PIL import Image

    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    return float((np.abs(img - colour).sum(axis=2) < tol).mean())


def test_first_screen_and_a_table_as_screenshots(page: Path, tmp_path: Path) -> None:
    from PIL import Image

    top = screenshot(page, tmp_path / "top.png", width=1400, height=900)
    table = screenshot(page, tmp_path / "table2.png", width=1400, height=900,
                       fragment="table2a")
    assert Image.open(top).size == Image.open(table).size == (1400, 900)
    # text on white, not blank; the summary's dot plot is drawn on the first screen
    assert 0.5 < _share(top, np.array([255, 255, 255]), 10) < 0.995
    assert _share(top, BLUE) > 0.00002
    # Table 2's page starts with the table: its best-value cells (green) and its ROC curves
    assert _share(table, np.array([230, 244, 230]), 6) > 0.0005


def test_summary_legend_sorting_and_escaping(page: Path) -> None:
    p = _probe(page)
    # the headline table is on the first screen (the 1400 × 900 screenshot), whole
    assert 0 < float(p["summaryTop"]) < float(p["summaryBottom"]) <= FIRST_SCREEN
    # one legend; the † meaning written once
    assert p["legends"] == 1 and p["daggerNotes"] == 1
    # sorting: a click on "Mean" ranks every model by it (descending first), across groups
    before, after = p["before"], p["after"]
    assert isinstance(before, list) and isinstance(after, list)
    assert sorted(before) == sorted(after) and before != after
    values = [float(x.rsplit("=", 1)[1]) for x in after]
    assert values == sorted(values, reverse=True) and p["sorted"] == "descending"
    # no cell holds more than one interval
    assert p["intervalsInCells"] == 0
    # input text stays text: only the report's own script and the probe ran
    assert p["scripts"] == 2 and p["pwned"] == 0 and p["injected"] == 0


def test_hostile_text_is_escaped_in_the_source(page: Path) -> None:
    text = page.read_text()
    assert HOSTILE not in text and "<script>window.PWNED" not in text
    assert text.count("<script>") == 1
    assert "Det&lt;script&gt;window.PWNED=1&lt;/script&gt;" in text
    md = (page.parent / "report.md").read_text()  # Markdown keeps the text as it is
    assert md.startswith("# MADBench run demo") and "## Summary" in md
