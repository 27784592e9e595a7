"""SALMONN (DEAF's seventh model) on a tiny random checkpoint of the real architecture.

Runs in ``.venvs/deaf-salmonn`` (``make adapter-test IMAGE=deaf-salmonn``: the SALMONN
repository on ``PYTHONPATH``, ``HF_HOME`` = the weights root's ``huggingface``): the tiny
builder writes the release layout with the repository's own classes (Whisper encoder,
BEATs, window-level Q-Former, Vicuna LLaMA + peft LoRA), and the adapter loads it with
``SALMONN.from_config`` and runs the real forward and generation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("peft", reason="run make adapter-test IMAGE=deaf-salmonn")

from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters import salmonn
from madbench_common.models.registry import REGISTRY
from madbench_common.models.tiny import salmonn as tiny
from madbench_common.models.weights import check_weights, weights_root
from tests.models.device import DEVICE

QUESTION = "What are the gender and the approximate age of the speaker?"


@pytest.fixture(scope="module")
def root() -> Path:
    base = weights_root()
    tiny.install_tiny(base)
    return base


@pytest.fixture(scope="module")
def model(root: Path) -> salmonn.Salmonn:
    return salmonn.Salmonn(device=DEVICE, root=root)


def _clip(kind: str, seconds: float = 2.0, sr: int = 22050) -> np.ndarray:
    if kind == "silence":
        return np.zeros(int(seconds * sr), np.float32)
    return (0.3 * np.random.default_rng(0).standard_normal(int(seconds * sr))).astype(np.float32)


def test_tiny_checkpoint_is_in_the_release_layout(root: Path) -> None:
    """Every file weights.yaml lists is where the fetch puts it, and nothing else is there."""
    assert check_weights("deaf-salmonn", root) == []
    hub = root / "huggingface" / "hub"

    def files(repo: str) -> set[str]:
        snap = hub / f"models--{repo.replace('/', '--')}" / "snapshots" / tiny.REVISION
        return {p.name for p in snap.iterdir()}

    assert files(salmonn.CKPT_REPO) == {"salmonn_v1.pth"}
    assert files(salmonn.WHISPER) == {"config.json", "preprocessor_config.json",
                                      "pytorch_model.bin", "generation_config.json"}
    assert files(salmonn.BERT) == {"config.json"}
    assert files(salmonn.VICUNA) == {"config.json", "generation_config.json", "pytorch_model.bin",
                                     "tokenizer.model", "tokenizer_config.json",
                                     "special_tokens_map.json"}
    assert (root / "files" / "deaf-salmonn" / salmonn.BEATS_FILE).is_file()


def test_checkpoint_holds_what_training_saves(root: Path, model: salmonn.Salmonn) -> None:
    """salmonn_v1.pth has the trained parts only (runner.py drops frozen parameters), and
    those are what the adapter's model now holds: Q-Former, projection and LoRA."""
    import torch

    path = (root / "huggingface" / "hub" / "models--tsinghua-ee--SALMONN" / "snapshots"
            / tiny.REVISION / salmonn.CKPT_FILE)
    state = torch.load(path, map_location="cpu")["model"]
    lora = [k for k in state if ".lora_B." in k]
    assert lora and all(".self_attn.q_proj." in k or ".self_attn.v_proj." in k for k in lora)
    assert any(k.startswith("speech_Qformer.bert.encoder.layer.0.crossattention") for k in state)
    assert {"speech_query_tokens", "speech_llama_proj.weight", "ln_audio.weight"} <= set(state)
    frozen = ("speech_encoder.", "beats.", "llama_model.base_model.model.model.embed_tokens",
              "llama_model.base_model.model.lm_head")
    assert not any(k.startswith(frozen) for k in state)
    assert not any(k.endswith("_proj.weight") and ".lora_" not in k
                   for k in state if k.startswith("llama_model."))
    held = model.model.state_dict()
    assert all(torch.equal(held[k].float(), state[k].float()) for k in lora)
    assert float(state[lora[0]].abs().sum()) > 0  # LoRA changes the LLM


def test_answers_through_the_real_forward_and_generate(model: salmonn.Salmonn) -> None:
    assert model.version.startswith(f"{salmonn.CKPT_REPO}@000000000000+vicuna-13b-v1.1@")
    assert model.version.endswith("+tiny-random") and model.generate_cfg["num_beams"] == 4
    noise = model.answer(QUESTION, _clip("noise"), 22050, choices=("young", "elderly"),
                         max_new_tokens=6)
    assert isinstance(noise.text, str) and noise.seconds > 0 and noise.logits == "forward"
    assert [o.text for o in noise.options] == ["young", "elderly"]
    assert all(np.isfinite(o.logprob) and o.logprob < 0 for o in noise.options)
    again = model.answer(QUESTION, _clip("noise"), 22050, choices=("young", "elderly"),
                         max_new_tokens=6)
    assert again.text == noise.text and again.options == noise.options  # beam search, no sampling
    silence = model.answer(QUESTION, _clip("silence"), 22050, choices=("young", "elderly"),
                           max_new_tokens=1)
    assert silence.options != noise.options  # the audio reaches the LLM
    with pytest.raises(ConfigError, match="audio-only"):
        model.answer(QUESTION, _clip("noise"), 22050, frames=np.zeros((2, 8, 8, 3), np.uint8))


def test_generation_follows_salmonn_generate(model: salmonn.Salmonn) -> None:
    """The LLM's input: bos, then the prompt with one audio token per 0.333 s window of
    Whisper's 30 s (88 windows of 17 frames), as SALMONN.generate builds it; greedy
    decoding with the same inputs stops at </s> like upstream's stopping criterion."""
    import torch

    samples = salmonn.prepare_sample(_clip("noise"), 22050, model.extractor)
    text = model.prompt(QUESTION)
    assert text == f"USER: <Speech><SpeechHere></Speech> {QUESTION}\nASSISTANT:"
    before, after = text.split("<SpeechHere>")
    tok = model.model.llama_tokenizer
    n_text = sum(len(tok(t, add_special_tokens=False).input_ids) for t in (before, after))
    with torch.inference_mode():
        embeds, attns = model._embeds(samples, text)
    assert embeds.shape == (1, 1 + n_text + 88, model.model.llama_model.config.hidden_size)
    assert attns.shape == embeds.shape[:2] and bool(attns.all())
    assert REGISTRY["deaf-salmonn"].target == "madbench_common.models.adapters.salmonn:Salmonn"


def test_sample_is_prepare_one_sample() -> None:
    from transformers import WhisperFeatureExtractor

    ext = WhisperFeatureExtractor(feature_size=80)
    short = salmonn.prepare_sample(np.ones(8000, np.float32), 16000, ext)
    assert short["raw_wav"].shape == (1, 16000) and float(short["raw_wav"][0, -1]) == 0.0
    assert short["spectrogram"].shape == (1, 80, 3000)
    long = salmonn.prepare_sample(np.ones(41 * 8000, np.float32), 8000, ext)
    assert long["raw_wav"].shape == (1, 30 * 16000) and not bool(long["padding_mask"].any())


def test_checkpoint_of_another_model_is_refused(root: Path, model: salmonn.Salmonn,
                                                tmp_path: Path) -> None:
    """strict=False would load nothing from a wrong checkpoint without a word: refused."""
    import torch

    path = tmp_path / "other.pth"
    state: dict[str, Any] = {"model": {"speech_Qformer.other.weight": torch.zeros(2)}}
    torch.save(state, path)
    with pytest.raises(ConfigError, match="none of its 1 keys is a SALMONN parameter"):
        salmonn.Salmonn._load_checkpoint(model.model, path)
    torch.save({"model": {"speech_query_tokens": model.model.speech_query_tokens.data}}, path)
    with pytest.raises(ConfigError, match=r"trained SALMONN weights .* would stay random"):
        salmonn.Salmonn._load_checkpoint(model.model, path)


def test_missing_weights_name_the_fetch(tmp_path: Path) -> None:
    from madbench_common.models.weights import WeightsMissing

    with pytest.raises(WeightsMissing, match="madbench weights fetch --image deaf-salmonn"):
        salmonn.Salmonn(device=DEVICE, root=tmp_path)


def test_the_stage_runtime_runs_in_this_environment() -> None:
    """What the image's pods import besides the model (the stage runtime, manifests via
    pyarrow, the DEAF stages) works with these pins: every madbench_common module imports,
    or lacks only another image's library (torch 2.0.1 keeps NumPy 1, and pyarrow 26
    refuses NumPy 1 at import: the lock holds pyarrow < 26)."""
    from madbench_common.testing.imagetest import check_imports

    lacking = {m.split(" ")[0] for m in check_imports()}  # other failures raise
    pods = {"madbench_common.cli", "madbench_common.cli.deaf",
            "madbench_common.benchmarks.deaf.stages_eval",
            "madbench_common.benchmarks.deaf.stage_report", "madbench_common.pipeline.stage",
            "madbench_common.models.adapters.salmonn", "madbench_common.models.tiny.salmonn"}
    assert not lacking & pods, lacking
