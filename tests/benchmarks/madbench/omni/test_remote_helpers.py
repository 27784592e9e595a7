"""Helpers of the remote-code omni adapters: logit capture, omni layout, SDPA flash shim,
MiniCPM-o messages and Baichuan prompts (pure PyTorch/NumPy, no remote code)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import av
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from madbench_common.core.errors import ConfigError  # noqa: E402
from madbench_common.models._remote import (  # noqa: E402
    first_step_logits,
    flash_attn_varlen_sdpa,
    install_remote_shims,
    one_second_chunks,
)
from madbench_common.models.adapters.baichuan_omni import message, model_dir, write_frames  # noqa: E402
from madbench_common.models.adapters.minicpmo import messages  # noqa: E402


class TinyLM(torch.nn.Module):
    """A two-layer random causal scorer: logits for every position."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(50, 8)
        self.out = torch.nn.Linear(8, 50)

    def forward(self, ids: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.out(torch.cumsum(self.emb(ids), 1)))


def test_first_step_logits_is_the_prefill_last_position() -> None:
    lm, ids = TinyLM(), torch.tensor([[3, 7, 9, 11]])
    with first_step_logits(lm) as seen:
        lm(ids)  # prefill
        lm(ids[:, -1:])  # a decoding step
    assert seen.calls == 2 and seen.shapes == [(1, 4, 50), (1, 1, 50)]
    assert torch.allclose(seen.logits, lm(ids).logits[0, -1])
    lm(ids)
    assert seen.calls == 2  # the hook is gone


def test_one_second_chunks_pair_frames_with_audio() -> None:
    audio = np.arange(16000 * 3 + 100, dtype=np.float32)
    frames = [f"f{i}" for i in range(3)]
    chunks = one_second_chunks(audio, 16000, frames, 1.0)
    assert [f for f, _ in chunks] == ["f0", "f1", "f2", "f2"]
    assert [len(c) for _, c in chunks] == [16000, 16000, 16000, 100]
    assert [f for f, _ in one_second_chunks(audio[:32000], 16000, frames * 2, 2.0)] == [
        "f0", "f2"]
    assert [f for f, _ in one_second_chunks(audio[:8000], 16000, None, 0.0)] == [None]


def _naive(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    att = torch.einsum("qhd,khd->hqk", q, k) / q.shape[-1] ** 0.5
    if causal:
        att = att.masked_fill(~torch.ones_like(att[0], dtype=torch.bool).tril(), float("-inf"))
    return torch.einsum("hqk,khd->qhd", att.softmax(-1), v)


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_flash_shim_matches_attention_within_each_sequence(causal: bool) -> None:
    torch.manual_seed(1)
    lens = [5, 3, 7]
    q, k, v = (torch.randn(sum(lens), 2, 4) for _ in range(3))
    cu = torch.tensor([0, 5, 8, 15], dtype=torch.int32)
    out = flash_attn_varlen_sdpa(q, k, v, cu, cu, 7, 7, causal=causal)
    want = torch.cat([_naive(q[a:b], k[a:b], v[a:b], causal) for a, b in
                      zip(cu[:-1].tolist(), cu[1:].tolist())])
    assert out.shape == q.shape and torch.allclose(out, want, atol=1e-5)


def test_shims_only_stand_in_for_missing_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("flash_attn", "deepspeed"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    install_remote_shims()
    import deepspeed  # type: ignore[import-not-found]
    from flash_attn import flash_attn_varlen_func  # type: ignore[import-not-found]

    assert flash_attn_varlen_func is flash_attn_varlen_sdpa
    import importlib.util

    assert importlib.util.find_spec("flash_attn") is not None  # transformers probes this
    assert deepspeed.zero.register_external_parameter(object(), object()) is None


def test_minicpm_messages_audio_only() -> None:
    audio = np.zeros(16000 * 2 + 10, np.float32)
    [turn] = messages("Real or fake?", audio)
    assert turn["role"] == "user" and turn["content"][1] == "Real or fake?"
    assert turn["content"][0] is audio


def test_baichuan_prompt_layout() -> None:
    text = message("Is it fake?", "/tmp/a.wav", "/tmp/v.mp4")
    assert text.startswith("<B_SYS>") and text.endswith("Is it fake?<C_A>")
    assert text.index("<video_start_baichuan>") < text.index("<audio_start_baichuan>")
    assert json.dumps({"path": "/tmp/a.wav"}) in text and "audiotext" not in text
    assert "<video_start_baichuan>" not in message("Q", "/tmp/a.wav")


def test_baichuan_frames_become_a_video_at_their_rate(tmp_path: Path) -> None:
    frames = np.random.default_rng(0).integers(0, 255, (3, 31, 45, 3), dtype=np.uint8)
    path = write_frames(frames, 1.0, tmp_path / "v.mp4")
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        assert (s.width, s.height) == (44, 30) and float(s.average_rate) == 1.0
        assert sum(1 for _ in c.decode(s)) == 3


def test_baichuan_model_dir_needs_the_repositorys_code(tmp_path: Path) -> None:
    code, weights = tmp_path / "code", tmp_path / "weights"
    code.mkdir()
    weights.mkdir()
    with pytest.raises(ConfigError, match="MADBENCH_BAICHUAN_CODE"):
        model_dir(code, weights, tmp_path / "out")
    (code / "modeling_omni.py").write_text("# code")
    (code / "config.json").write_text("{}")
    (weights / "model-00001-of-00002.safetensors").write_bytes(b"w")
    (weights / "config.json").write_text('{"hub": true}')
    (weights / "modeling_omni.py").write_text("# the snapshot's copy, not used")
    out = model_dir(code, weights, tmp_path / "out")
    assert (out / "modeling_omni.py").read_text() == "# code"  # the pinned repository's code
    assert (out / "config.json").read_text() == '{"hub": true}'  # the release's config
    assert (out / "model-00001-of-00002.safetensors").is_symlink()
