"""MiniCPM-o 4.5 adapter: message construction, the logit capture its scores rely on, weights
resolution, and everything around the forward on a stand-in of its hub-only remote code.
Runs in ``.venvs/omni-minicpmo45`` (``make adapter-test IMAGE=omni-minicpmo45``).

The architecture's forward is not run here: its modeling code is Hugging Face remote code
(``openbmb/MiniCPM-o-4_5``), and the hub cannot be reached here (images/README.md, "What
adapter tests cannot run offline", says where it is run instead). The adapter's
real loading (``trust_remote_code`` from the snapshot, the remote-code copy off the
read-only weights), its ``chat()`` call, the prefill-logit scores and the ``omni_minicpmo45``
rows run on a stand-in snapshot (:mod:`madbench_common.models.tiny.remote`) whose
``chat()`` returns the answer string as the release's does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="run make adapter-test IMAGE=omni-minicpmo45")
tf = pytest.importorskip("transformers", reason="run make adapter-test IMAGE=omni-minicpmo45")
pytest.importorskip("PIL", reason="run make adapter-test IMAGE=omni-minicpmo45")

from madbench_common.benchmarks.madbench.omni.parse import parse_answer  # noqa: E402
from madbench_common.benchmarks.madbench.omni.scoring import label_probs  # noqa: E402
from madbench_common.core.errors import ConfigError  # noqa: E402
from madbench_common.models._omni_hf import option_logprobs  # noqa: E402
from madbench_common.models._remote import first_step_logits  # noqa: E402
from madbench_common.models.adapters.minicpmo import MiniCPMo45, messages  # noqa: E402
from madbench_common.models.roles import OmniAnswer  # noqa: E402
from madbench_common.models.tiny.omni import byte_bpe, omni_texts  # noqa: E402
from madbench_common.models.weights import weights_root  # noqa: E402
from tests.benchmarks.madbench.omni.questions import BIN  # noqa: E402
from tests.models.device import DEVICE  # noqa: E402

from .tiny import demo_audio, demo_frames  # noqa: E402


def test_omni_layout_is_frame_then_one_second_of_audio() -> None:
    audio = np.random.default_rng(0).normal(0, 0.1, 16000 * 3).astype(np.float32)
    frames = np.random.default_rng(1).integers(0, 255, (3, 20, 30, 3), dtype=np.uint8)
    [turn] = messages(BIN.full_text, audio, frames, 1.0)
    content = turn["content"]
    assert [type(c).__name__ for c in content] == ["Image", "ndarray"] * 3 + ["str"]
    assert content[0].mode == "RGB" and content[0].size == (30, 20)
    assert np.array_equal(np.asarray(content[2]), frames[1])
    assert all(len(c) == 16000 for c in content[1:6:2])
    assert content[-1] == BIN.full_text


def test_scores_come_from_the_prefill_of_a_greedy_generate() -> None:
    """The hook MiniCPMo45 puts on ``model.llm`` reads the prefill's last position: on a tiny
    transformers causal LM, that equals a separate forward on the same ids."""
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    tok = PreTrainedTokenizerFast(tokenizer_object=byte_bpe(omni_texts(), ["<eos>"]),
                                  eos_token="<eos>")
    torch.manual_seed(0)
    lm = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok), hidden_size=32,
                                      intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1)).eval()
    ids = tok(BIN.full_text, return_tensors="pt")["input_ids"]
    with torch.inference_mode(), first_step_logits(lm) as seen:
        lm.generate(ids, max_new_tokens=3, do_sample=False)
    assert seen.calls == 3  # prefill, then two decoding steps (generate keeps the last logits)
    with torch.inference_mode():
        want = lm(ids).logits[0, -1].float()
    assert torch.allclose(seen.logits, want, atol=1e-5)
    ans = OmniAnswer("Fake.", option_logprobs(seen.logits, tok, BIN.choices()), "forward")
    probs = label_probs(BIN, ans)
    assert probs is not None and sum(probs.probs.values()) == pytest.approx(1.0)
    assert parse_answer(ans.text, BIN) == "fake"


@pytest.fixture(scope="module")
def standin() -> Path:
    from madbench_common.models.tiny.remote import minicpmo

    return minicpmo(weights_root())


@pytest.fixture(scope="module")
def model(standin: Path) -> Iterator[MiniCPMo45]:
    import transformers.dynamic_module_utils as dmu

    with pytest.MonkeyPatch.context() as mp:
        # as on the pod's read-only weights volume: no remote-code cache can be made there
        mp.setattr(dmu, "HF_MODULES_CACHE", str(standin / "config.json" / "modules"))
        yield MiniCPMo45(device=DEVICE)


def test_standin_snapshot_names_the_release(tmp_path: Path) -> None:
    from madbench_common.models.tiny.remote import STANDIN_MARKER, minicpmo

    snap = minicpmo(tmp_path)
    assert json.loads((snap / "config.json").read_text())["auto_map"]["AutoModel"] == \
        "modeling_minicpmo.MiniCPMO"
    assert "openbmb/MiniCPM-o-4_5" in (snap / STANDIN_MARKER).read_text()


def test_loads_through_the_remote_code_path(model: MiniCPMo45) -> None:
    assert type(model.model).__module__.startswith("transformers_modules.")
    assert type(model.model.llm).__name__ == "Qwen3ForCausalLM"
    assert model.model.config.init_tts is False  # the adapter's from_pretrained override
    assert not hasattr(model.model, "tts")


def test_answer_and_prefill_scores_on_the_standin(model: MiniCPMo45) -> None:
    audio, rate = demo_audio(2, 2.5)
    frames, fps = demo_frames(2, fps=1.0, size=64, max_frames=3)
    choices = BIN.choices()
    a = model.answer(BIN.full_text, audio, rate, choices=choices)
    av = model.answer(BIN.full_text, audio, rate, frames=frames, fps=fps, choices=choices)
    assert isinstance(a.text, str) and a.logits == av.logits == "forward"
    assert [o.text for o in a.options] == list(choices)
    assert all(o.logprob < 0 for o in a.options)
    assert [o.logprob for o in av.options] != pytest.approx([o.logprob for o in a.options])
    # the scores: the first LLM call of that chat() — a separate prefill gives the same
    tok, msgs = model.tokenizer, messages(BIN.full_text, model._audio(audio, rate))
    text, media = model.model._prompt(tok, msgs, False, False, False)
    assert text.endswith("<|tts_bos|>")  # audio switches the TTS template on, as released
    with torch.inference_mode():
        logits = model.model.llm(inputs_embeds=model.model._embed(tok, text, media)).logits
    want = option_logprobs(logits[0, -1].float(), tok, choices)
    assert [o.logprob for o in a.options] == pytest.approx([o.logprob for o in want], abs=1e-4)


def test_omni_stage_writes_score_rows(standin: Path, tmp_path: Path) -> None:
    from madbench_common.benchmarks.madbench.rows import ScoreRow
    from madbench_common.models.registry import load_model

    from .stage_rows import assembled_run, run_stage

    load_model.cache_clear()  # the registry loads the stand-in as a pod would
    run = assembled_run(tmp_path, clips=(2,))
    marker, rows = run_stage(run, "omni_minicpmo45",
                             {"model": "omni-minicpmo45", "frame_size": 64, "max_frames": 3},
                             ScoreRow)
    assert marker["rows"] == 8 and marker["rejected"] == 0  # 4 tasks x (A, A-V)
    assert {(r.task, r.mode) for r in rows} == {(t, m) for t in ("binary", "fourway", "speech",
                                                                 "env") for m in ("A", "AV")}
    assert all(r.model == "omni-minicpmo45" and r.prompt_hash for r in rows)
    assert all(r.model_version.endswith("+tiny-random") for r in rows)
    binary = [r for r in rows if r.task == "binary"]
    assert all(r.score is not None and 0.0 <= r.score <= 1.0 for r in binary)
    assert all(len(r.probs) == 4 for r in rows if r.task == "fourway")


def test_missing_weights_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="madbench weights fetch --image omni-minicpmo45"):
        MiniCPMo45(device=DEVICE, root=tmp_path)
