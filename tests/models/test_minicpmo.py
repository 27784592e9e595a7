"""MiniCPM-o 4.5 adapter: message construction, the logit capture its scores rely on, and
weights resolution. Runs in ``.venvs/omni-minicpmo45`` (``make adapter-test
IMAGE=omni-minicpmo45``).

The architecture's forward is skipped: its modeling code is Hugging Face remote code
(``openbmb/MiniCPM-o-4_5``), and the hub cannot be reached here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="run make adapter-test IMAGE=omni-minicpmo45")
tf = pytest.importorskip("transformers", reason="run make adapter-test IMAGE=omni-minicpmo45")
pytest.importorskip("PIL", reason="run make adapter-test IMAGE=omni-minicpmo45")

from madbench_common.errors import ConfigError  # noqa: E402
from madbench_common.models._omni_hf import option_logprobs  # noqa: E402
from madbench_common.models._remote import first_step_logits  # noqa: E402
from madbench_common.models.minicpmo import MiniCPMo45, messages  # noqa: E402
from madbench_common.models.tiny_omni import _bpe, omni_texts  # noqa: E402
from madbench_common.omni.parse import parse_answer  # noqa: E402
from madbench_common.omni.scoring import label_probs  # noqa: E402
from madbench_common.prompts import load_prompt  # noqa: E402
from madbench_common.roles import OmniAnswer  # noqa: E402

BIN = load_prompt("P_bin").question("binary")


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

    tok = PreTrainedTokenizerFast(tokenizer_object=_bpe(omni_texts(), ["<eos>"]),
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


def test_forward_of_the_real_architecture() -> None:
    pytest.skip("MiniCPM-o 4.5's modeling code is Hugging Face remote code "
                "(openbmb/MiniCPM-o-4_5, trust_remote_code); the hub is unreachable here, so "
                "no tiny model of the architecture can be built")


def test_missing_weights_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="madbench weights fetch --image omni-minicpmo45"):
        MiniCPMo45(device="cpu", root=tmp_path)
