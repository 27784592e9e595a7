"""Baichuan-Omni-1.5 adapter: the prompt against the pinned repository's tokens, the upstream
model stack importing through the flash-attn/deepspeed shims, weights resolution, and the
adapter's real loading, processor, forward and first-token scoring on a tiny random
``OmniForCausalLM`` (upstream classes, tiny config, a tokenizer trained here;
:mod:`madbench_common.models.tiny.baichuan`) in the release layout.

Runs in ``.venvs/omni-baichuan15`` (``make adapter-test IMAGE=omni-baichuan15``), with the
repository fetched to ``images/omni-baichuan15/.upstream/``.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="run make adapter-test IMAGE=omni-baichuan15")
tf = pytest.importorskip("transformers", reason="run make adapter-test IMAGE=omni-baichuan15")
if not tf.__version__.startswith("4.45"):
    pytest.skip("needs transformers 4.45: run make adapter-test IMAGE=omni-baichuan15",
                allow_module_level=True)

from madbench_common.core.errors import ConfigError  # noqa: E402
from madbench_common.models._omni_hf import TINY_MARKER  # noqa: E402
from madbench_common.models._remote import install_remote_shims  # noqa: E402
from madbench_common.models.adapters.baichuan_omni import (  # noqa: E402
    CODE_ENV,
    BaichuanOmni15,
    message,
    model_dir,
    sdpa_vision,
)
from madbench_common.models.weights import weights_root  # noqa: E402
from tests.models.device import DEVICE  # noqa: E402

from .tiny import demo_audio, demo_frames  # noqa: E402

CODE = (Path(__file__).resolve().parents[2] / "images" / "omni-baichuan15" / ".upstream"
        / "baichuan-omni" / "baichuan-omni" / "model")
needs_repo = pytest.mark.skipif(not (CODE / "modeling_omni.py").exists(),
                                reason=f"{CODE} missing: make adapter-test fetches upstream_src")


@needs_repo
def test_prompt_tags_are_the_repositorys_special_tokens() -> None:
    added = json.loads((CODE / "added_tokens.json").read_text())
    config = json.loads((CODE / "config.json").read_text())
    text = message("Is it fake?", "/tmp/a.wav", "/tmp/v.mp4")
    for tag in ("<B_SYS>", "<C_Q>", "<C_A>", "<audio_start_baichuan>", "<audio_end_baichuan>",
                "<video_start_baichuan>", "<video_end_baichuan>"):
        assert tag in text and tag in added, tag
    assert added["<audio_start_baichuan>"] == config["audio_config"]["audio_start_token_id"]
    assert added["<video_start_baichuan>"] == config["video_config"]["video_start_token_id"]


@needs_repo
def test_upstream_model_stack_imports_through_the_shims(tmp_path: Path) -> None:
    install_remote_shims()
    pkg = tmp_path / "mb_baichuan_model"
    pkg.symlink_to(CODE, target_is_directory=True)
    sys.path.insert(0, str(tmp_path))
    try:
        modeling = importlib.import_module("mb_baichuan_model.modeling_omni")
        config = modeling.OmniConfig.from_pretrained(str(CODE))
    finally:
        sys.path.remove(str(tmp_path))
    assert modeling.OmniForCausalLM.config_class is modeling.OmniConfig
    assert config.video_config.max_frame_num >= 8
    assert getattr(sys.modules["flash_attn"], "__madbench_shim__", False)


@needs_repo
def test_model_dir_takes_code_from_the_repository_and_data_from_the_snapshot(
        tmp_path: Path) -> None:
    weights = tmp_path / "snapshot"
    weights.mkdir()
    for name in ("model.safetensors.index.json", "config.json", "tokenizer.json",
                 "modeling_omni.py"):
        (weights / name).write_text("{}")
    out = model_dir(CODE, weights, tmp_path / "model")
    assert (out / "modeling_omni.py").read_text() == (CODE / "modeling_omni.py").read_text()
    assert not (out / "modeling_omni.py").is_symlink()
    for name in ("model.safetensors.index.json", "config.json", "tokenizer.json"):
        assert (out / name).resolve() == (weights / name).resolve()
    assert not (out / "vocab.json").exists()  # the repository's data files are not used
    (weights / "config.json").unlink()
    with pytest.raises(ConfigError, match=r"no config\.json"):
        model_dir(CODE, weights, tmp_path / "again")


@pytest.fixture(scope="module")
def tiny() -> Iterator[Path]:
    """The tiny release in the weights root the adapter reads (``$MADBENCH_WEIGHTS``)."""
    from madbench_common.models.tiny.baichuan import baichuan_omni

    if not (CODE / "modeling_omni.py").exists():
        pytest.skip(f"{CODE} missing: make adapter-test fetches upstream_src")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CODE_ENV, str(CODE))
        yield baichuan_omni(weights_root())


@pytest.fixture(scope="module")
def model(tiny: Path) -> Iterator[BaichuanOmni15]:
    import transformers.dynamic_module_utils as dmu

    with pytest.MonkeyPatch.context() as mp:
        # as on the pod's read-only weights volume: no modules cache can be made there
        mp.setattr(dmu, "HF_MODULES_CACHE", str(tiny / "config.json" / "modules"))
        mp.setenv(CODE_ENV, str(CODE))
        yield BaichuanOmni15(device=DEVICE)


@needs_repo
def test_tiny_config_is_the_releases_shrunk(tmp_path: Path) -> None:
    from madbench_common.models.tiny.baichuan import baichuan_omni

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CODE_ENV, str(CODE))
        snap = baichuan_omni(tmp_path)
    config = json.loads((snap / "config.json").read_text())
    added = json.loads((snap / "added_tokens.json").read_text())
    release = json.loads((CODE / "config.json").read_text())
    assert config["auto_map"] == release["auto_map"]
    assert config["audio_config"]["audio_start_token_id"] == added["<audio_start_baichuan>"]
    assert config["video_config"]["video_place_token_id"] == added["<video_palce_baichuan>"]
    assert config["visual_config"]["_attn_implementation"] == "flash_attention_2"  # as released
    assert (snap / TINY_MARKER).exists()


@needs_repo
def test_vision_attention_falls_back_to_sdpa_without_flash_attn(model: BaichuanOmni15) -> None:
    cfg = model.model.config
    assert cfg.visual_config._attn_implementation == "sdpa"
    assert type(model.model.model.visual_model.blocks[0].attn).__name__ == "VisionSdpaAttention"
    assert sdpa_vision(cfg) is cfg


@needs_repo
def test_forward_and_first_token_scores_on_the_tiny_model(model: BaichuanOmni15,
                                                          tmp_path: Path) -> None:
    import torch

    audio, rate = demo_audio(1, 3.0)
    frames, fps = demo_frames(1, fps=1.0, size=112, max_frames=4)
    question, choices = "Is this recording real or fake?", (" real", " fake")
    a = model.answer(question, audio, rate, choices=choices)
    av = model.answer(question, audio, rate, frames=frames, fps=fps, choices=choices)
    assert a.logits == av.logits == "generate" and "+tiny-random" in model.version
    assert [o.text for o in a.options] == list(choices)
    batch = model.inputs(question, tmp_path, audio, rate)
    pad = model.model.config.audio_config.audio_pad_token_id
    assert int(batch["bridge_length"].sum()) == int((batch["input_ids"] == pad).sum())
    with torch.inference_mode():  # the scores: log-softmax of the prompt's last logits
        logits = model.model(**batch).logits[0, -1].float()
    ref = torch.log_softmax(logits, -1)
    ids = [model.tokenizer(c, add_special_tokens=False)["input_ids"][0] for c in choices]
    assert [o.token_id for o in a.options] == ids
    assert [o.logprob for o in a.options] == pytest.approx(ref[ids].tolist(), abs=1e-4)
    assert [o.logprob for o in av.options] != pytest.approx([o.logprob for o in a.options],
                                                           abs=1e-6)  # the video is seen
    assert pad in model.generation_kwargs()["suppress_tokens"]


def test_missing_weights_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="madbench weights fetch --image omni-baichuan15"):
        BaichuanOmni15(device=DEVICE, root=tmp_path)


@needs_repo
def test_omni_stage_writes_score_rows(tiny: Path, tmp_path: Path) -> None:
    from madbench_common.benchmarks.madbench.rows import ScoreRow
    from madbench_common.models.registry import load_model

    from .stage_rows import assembled_run, run_stage

    load_model.cache_clear()  # the registry loads the tiny release as a pod would
    run = assembled_run(tmp_path, clips=(2,))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CODE_ENV, str(CODE))
        marker, rows = run_stage(run, "omni_baichuan15",
                                 {"model": "omni-baichuan15", "frame_size": 112,
                                  "max_frames": 4}, ScoreRow)
    assert marker["rows"] == 8 and marker["rejected"] == 0  # 4 tasks x (A, A-V)
    assert all(r.model == "omni-baichuan15" and r.model_version.endswith("+tiny-random")
               for r in rows)
    assert all(r.score is not None and 0.0 <= r.score <= 1.0
               for r in rows if r.task == "binary")
