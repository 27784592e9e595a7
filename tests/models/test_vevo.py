"""Vevo-Timbre adapter on tiny random models of the real architectures, through real loading.

Runs in ``.venvs/vc-vevo`` (``make adapter-test IMAGE=vc-vevo``, Amphion on ``PYTHONPATH``).
Amphion's own builders make every part from copies of its Vevo configs with small widths
(content-style tokenizer, flow-matching transformer, Vocos), saved as
``model.safetensors`` where ``amphion/Vevo`` keeps them; HuBERT is torchaudio's
``wav2vec2_model`` with small ``HUBERT_LARGE`` parameters (the bundle is swapped for one
with the same checkpoint name), saved as ``hubert_fairseq_large_ll60k.pth`` in the
weights root's URL-file place, and loaded through ``bundle.get_model`` the way the
adapter routes it. ``inference_fm`` runs for real with 2 flow-matching steps on demo speech.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from .speech_cases import RATE, assert_placed, demo_case

# tests/conftest.py puts tests/ first on sys.path, so the package name `models` is this
# test package; Amphion's top-level `models` needs the name while it is imported. Take it
# over for the import, then give it back (Amphion's submodules stay cached by full name).
_AMPHION = [p for p in sys.path if (Path(p) / "models/vc/vevo/vevo_utils.py").exists()]
_OURS = sys.modules.get("models")
if _AMPHION:
    sys.path.insert(0, _AMPHION[0])
    sys.modules.pop("models", None)
try:
    vu = pytest.importorskip("models.vc.vevo.vevo_utils",
                             reason="run make adapter-test IMAGE=vc-vevo")
    from utils.util import load_config
finally:
    if _OURS is not None:
        sys.modules["models"] = _OURS

import json5  # noqa: E402
import torch  # noqa: E402

from madbench_common.speech_prep import GenerationFailed  # noqa: E402
from madbench_common.stages.speech_gen import generate_speech  # noqa: E402
from madbench_common.weights import WeightsMissing, install_local_snapshot  # noqa: E402

_HUBERT = {"extractor_conv_layer_config": [(32, 10, 5)] + [(32, 3, 2)] * 4 + [(32, 2, 2)] * 2,
           "encoder_embed_dim": 32, "encoder_pos_conv_kernel": 16, "encoder_pos_conv_groups": 4,
           "encoder_num_layers": 18, "encoder_num_heads": 2, "encoder_ff_interm_features": 64}
"""Upstream reads HuBERT layer 18, so the tiny encoder keeps 18 (narrow) layers."""


def _tiny_configs(root: Path, work: Path) -> dict[str, Path]:
    fmt = json5.loads((root / "models/vc/vevo/config/Vq8192ToMels.json").read_text())
    fmt["model"]["flow_matching_transformer"].update(
        hidden_size=32, num_layers=2, num_heads=2, cond_dim=32, cond_codebook_size=64)
    fmt["model"]["repcodec"].update(codebook_size=64, hidden_size=32, vocos_dim=32,
                                    vocos_intermediate_dim=64, vocos_num_layers=1)
    rng = np.random.default_rng(0)
    np.savez(work / "stats.npz", mean=rng.normal(size=32).astype(np.float32),
             std=rng.uniform(0.5, 2.0, 32).astype(np.float32))
    fmt["model"]["representation_stat_mean_var_path"] = str(work / "stats.npz")
    voc = json5.loads((root / "models/vc/vevo/config/Vocoder.json").read_text())
    voc["model"]["vocos"].update(dim=32, intermediate_dim=64, num_layers=1)
    out = {"fmt": work / "Vq8192ToMels.json", "vocoder": work / "Vocoder.json"}
    out["fmt"].write_text(json5.dumps(fmt))
    out["vocoder"].write_text(json5.dumps(voc))
    return out


def _write_tiny_checkpoints(weights: Path, work: Path, cfgs: dict[str, Path]) -> None:
    import torchaudio
    from safetensors.torch import save_file


    torch.manual_seed(5)
    fmt_cfg, voc_cfg = load_config(str(cfgs["fmt"])), load_config(str(cfgs["vocoder"]))
    built = {"tokenizer/vq8192": vu.build_vqvae_model(fmt_cfg.model.repcodec, "cpu"),
             "acoustic_modeling/Vq8192ToMels": vu.build_fmt_model(fmt_cfg, "cpu"),
             "acoustic_modeling/Vocoder": vu.build_vocoder_model(voc_cfg, "cpu")}
    for sub, model in built.items():
        (work / "vevo" / sub).mkdir(parents=True)
        save_file({k: v.detach().clone().contiguous() for k, v in model.state_dict().items()},
                  str(work / "vevo" / sub / "model.safetensors"))
    install_local_snapshot(weights, "amphion/Vevo", work / "vevo")
    params = {**torchaudio.pipelines.HUBERT_LARGE._params, **_HUBERT}
    hubert = torchaudio.models.wav2vec2_model(**params)
    dest = weights / "files" / "vc-vevo" / "hubert_fairseq_large_ll60k.pth"
    dest.parent.mkdir(parents=True)
    torch.save(hubert.state_dict(), dest)


@pytest.fixture(scope="module")
def vc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    import torchaudio

    from madbench_common.models.vevo import VevoTimbre, amphion_root

    weights, work = tmp_path_factory.mktemp("weights"), tmp_path_factory.mktemp("build")
    cfgs = _tiny_configs(amphion_root(), work)
    _write_tiny_checkpoints(weights, work, cfgs)
    tiny = dataclasses.replace(torchaudio.pipelines.HUBERT_LARGE,
                               _params={**torchaudio.pipelines.HUBERT_LARGE._params, **_HUBERT})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MADBENCH_WEIGHTS", str(weights))
        mp.setattr(torchaudio.pipelines, "HUBERT_LARGE", tiny)
        yield VevoTimbre(device="cpu", flow_matching_steps=2, configs=cfgs)


def test_missing_weights_name_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from madbench_common.models.vevo import VevoTimbre

    monkeypatch.setenv("MADBENCH_WEIGHTS", str(tmp_path))
    with pytest.raises(WeightsMissing, match="madbench weights fetch --image vc-vevo"):
        VevoTimbre(device="cpu")


def test_converts_at_24k_keeping_source_timing_and_seed(vc) -> None:  # type: ignore[no-untyped-def]
    case, target = demo_case("demo_002"), demo_case("demo_010")
    kw = {"sample_rate": RATE, "duration": case.duration, "ref_audio": target.active,
          "source_audio": case.active}
    a = vc.generate(**kw, seed=5)
    report = vc.last_report
    assert np.array_equal(a, vc.generate(**kw, seed=5)), "same seed must give the same audio"
    assert not np.array_equal(a, vc.generate(**kw, seed=6))
    assert a.dtype == np.float32 and len(a) == round(case.duration * RATE)
    assert report.model_rate == 24000 and report.duration_control == "model:source_timing"
    assert 0.9 < report.length_correction < 1.3


def test_placed_in_speech_regions(vc) -> None:  # type: ignore[no-untyped-def]
    case, target = demo_case("demo_002"), demo_case("demo_010")
    track = generate_speech(vc, source=case.speech, reference=target.active, rate=RATE,
                            starts=case.starts, ends=case.ends, text=case.transcript, seed=1)
    assert_placed(track, case)


def test_short_reference_fails_one_component(vc) -> None:  # type: ignore[no-untyped-def]
    case = demo_case("demo_002")
    with pytest.raises(GenerationFailed, match="reference_too_short"):
        vc.generate(sample_rate=RATE, duration=1.0, ref_audio=case.active[:RATE // 4],
                    source_audio=case.active)
