"""DF-Arena-1B: everything around the forward, on a stand-in of its hub-only remote code.

The release's architecture is Hugging Face remote code in its checkpoint repository, which
cannot be read offline, so its forward is not run here (images/README.md, "What adapter
tests cannot run offline", says where it is run instead). The adapter's real
loading (``AutoModel.from_pretrained(..., trust_remote_code=True)`` on the snapshot, with its
backbone's ``Wav2Vec2Config.from_pretrained("facebook/wav2vec2-xls-r-1b")`` resolved from
the Hugging Face cache under ``HF_HUB_OFFLINE=1``), its pre-processing, the parsing of the
plain ``{"logits": …}`` dict the release's ``forward`` returns, and the
``features_det_df_arena`` / ``scores_det_df_arena`` rows run on a stand-in snapshot
(:mod:`madbench_common.models.tiny.remote`) whose remote code returns exactly that.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters.df_arena import (
    NB_SAMP,
    REPO,
    classifier_hook,
    logits_of,
    p_spoof,
    prepare,
)
from madbench_common.models.weights import WeightsMissing, weights_root

from .tiny import demo_audio

ID2LABEL = {"0": "spoof", "1": "bonafide"}  # the checkpoint's config.json


def test_input_is_the_first_64600_samples_tiled() -> None:
    audio, rate = demo_audio(4, 6.0)
    x = prepare(audio, rate)
    assert x.shape == (NB_SAMP,) and np.array_equal(x, audio[:NB_SAMP])
    short = prepare(audio[:20000], rate)
    assert np.array_equal(short[20000:40000], audio[:20000])  # repeated from its start
    at_48k = prepare(np.repeat(audio[:16000], 3), 48000)  # resampled to 16 kHz first
    assert at_48k.shape == (NB_SAMP,)


def test_score_is_p_spoof_from_the_config_labels() -> None:
    assert p_spoof([2.0, 0.0], ID2LABEL) == pytest.approx(1 / (1 + np.exp(-2)))
    assert p_spoof([0.0, 2.0], {0: "bonafide", 1: "spoof"}) == pytest.approx(0.8807970779)
    with pytest.raises(ConfigError, match="spoof"):
        p_spoof([0.0, 1.0], {0: "fake", 1: "real"})


def test_features_are_the_classifier_input() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    body = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Tanh())
    model = torch.nn.Sequential(body, torch.nn.Linear(6, 2))  # any net ending in a 2-way head
    get = classifier_hook(model, 2)
    x = torch.randn(1, 8)
    model(x)
    assert np.allclose(get(), body(x)[0].detach().numpy())
    with pytest.raises(ConfigError, match="classifier"):
        classifier_hook(torch.nn.Sequential(torch.nn.Linear(4, 3)), 2)


def test_logits_are_read_from_what_the_remote_forward_returns() -> None:
    torch = pytest.importorskip("torch")
    z = torch.tensor([[1.0, -1.0]])
    assert logits_of({"logits": z}) is z  # the release: a plain dict, no ModelOutput
    assert logits_of((z, None)) is z and logits_of(z) is z
    transformers = pytest.importorskip("transformers")
    assert logits_of(transformers.modeling_outputs.SequenceClassifierOutput(logits=z)) is z
    with pytest.raises(ConfigError, match="no 'logits'"):
        logits_of({"scores": z})
    with pytest.raises(ConfigError, match="has no logits"):
        logits_of("spoof")


@pytest.fixture(scope="module")
def standin() -> Path:
    """The stand-in snapshot in the weights root the adapter reads (its HF cache is where
    the backbone's by-name config lookup goes)."""
    pytest.importorskip("transformers", reason="run make adapter-test IMAGE=det-df-arena")
    from madbench_common.models.tiny.remote import df_arena

    return df_arena(weights_root())


@pytest.fixture(scope="module")
def detector(standin: Path) -> Iterator[object]:
    import transformers.dynamic_module_utils as dmu

    from madbench_common.models.adapters.df_arena import DfArenaDetector

    with pytest.MonkeyPatch.context() as mp:
        # as on the pod's read-only weights volume: no remote-code cache can be made there
        mp.setattr(dmu, "HF_MODULES_CACHE", str(standin / "config.json" / "modules"))
        yield DfArenaDetector()


def test_standin_snapshot_names_the_release(tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason="run make adapter-test IMAGE=det-df-arena")
    from madbench_common.models.tiny.remote import STANDIN_MARKER, df_arena

    snap = df_arena(tmp_path)
    assert (snap / "pytorch_model.bin").exists() and (snap / "modeling_antispoofing.py").exists()
    assert REPO in (snap / STANDIN_MARKER).read_text()


def test_loads_through_the_remote_code_path_offline(detector: object, standin: Path) -> None:
    import transformers.dynamic_module_utils as dmu

    model = detector.model  # type: ignore[attr-defined]
    assert type(model).__module__.startswith("transformers_modules.")  # trust_remote_code
    assert model.backbone.ssl_model.config.hidden_size == 32  # the cached xls-r-1b config
    assert str(standin / "config.json" / "modules") != dmu.HF_MODULES_CACHE  # moved to tmp
    assert detector.id2label == {0: "spoof", 1: "bonafide"}  # type: ignore[attr-defined]


def test_score_and_features_from_the_dict_output(detector: object) -> None:
    import torch

    audio, rate = demo_audio(3, 2.0)
    emb = detector.embed(mode="A", audio=audio, sample_rate=rate)  # type: ignore[attr-defined]
    model, extractor = detector.model, detector.extractor  # type: ignore[attr-defined]
    inputs = extractor(prepare(audio, rate), sampling_rate=16000, return_tensors="pt")
    assert inputs["input_values"].shape == (NB_SAMP,)  # the release's 1-D input
    with torch.no_grad():
        out = model(**inputs)
    assert isinstance(out, dict) and set(out) == {"logits"}
    z = out["logits"][0].double()
    assert emb.score == pytest.approx(float(torch.softmax(z, -1)[0]), abs=1e-6)  # P(spoof)
    assert emb.score_kind == "prob" and emb.vector.shape == (32,)
    assert emb.spec.audio_rate == 16000 and emb.spec.audio_seconds == pytest.approx(4.0375)
    again = detector.embed(mode="A", audio=audio, sample_rate=rate)  # type: ignore[attr-defined]
    assert np.array_equal(again.vector, emb.vector)
    with pytest.raises(ValueError, match="mode A"):
        detector.embed(mode="AV", audio=audio, sample_rate=rate)  # type: ignore[attr-defined]


def test_feature_and_score_stages_write_rows(detector: object, tmp_path: Path) -> None:
    from madbench_common.benchmarks.madbench.rows import FeatureRow, ScoreRow

    from .stage_rows import assembled_run, run_stage

    run = assembled_run(tmp_path)
    marker, feats = run_stage(run, "features_det_df_arena", {"model": "det-df-arena"},
                              FeatureRow)
    assert marker["rows"] == 2 and marker["rejected"] == 0
    assert {f.mode for f in feats} == {"A"} and all(len(f.features) == 32 for f in feats)
    assert all(0.0 < f.score < 1.0 and f.score_kind == "prob" for f in feats)
    assert {f.model_slug for f in feats} == {"det-df-arena"}
    _, scores = run_stage(run, "scores_det_df_arena", {}, ScoreRow)
    assert [(s.task, s.model) for s in scores] == [("binary", "det-df-arena")] * 2
    assert [s.score for s in scores] == [f.score for f in feats]


def test_missing_xlsr_config_names_the_fetch(tmp_path: Path) -> None:
    pytest.importorskip("transformers", reason="run make adapter-test IMAGE=det-df-arena")
    from madbench_common.models.adapters.df_arena import DfArenaDetector

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MADBENCH_WEIGHTS", str(tmp_path))
        with pytest.raises(WeightsMissing, match="madbench weights fetch --image det-df-arena"):
            DfArenaDetector()
