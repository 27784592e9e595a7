"""Microsoft CLAP adapter: msclap's own CLAP classes (real HTSAT size, tiny GPT-2 text tower),
random weights saved in the real checkpoint layout and loaded through msclap's wrapper."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("msclap", reason="run make adapter-test IMAGE=enc-msclap")

import torch

from madbench_common.errors import ConfigError
from madbench_common.models.msclap import MsClapEncoder, windows

from .tiny import demo_audio, install


def _tiny_gpt2(dest: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2Model, GPT2TokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel()
    tk.train_from_iterator(["a dog barks", "speech in a room", "rain on a roof"],
                           trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"]))
    GPT2TokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>",
                      bos_token="<|endoftext|>").save_pretrained(dest)
    torch.manual_seed(0)
    GPT2Model(GPT2Config(n_embd=768, n_layer=1, n_head=12, vocab_size=300,
                         n_positions=128)).save_pretrained(dest)


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import yaml
    from msclap.models.clap import CLAP

    root = tmp_path_factory.mktemp("weights")
    gpt = tmp_path_factory.mktemp("gpt2")
    _tiny_gpt2(gpt)
    text = install(root, "openai-community/gpt2", gpt)
    import msclap

    cfg = yaml.safe_load((Path(msclap.__file__).parent / "configs" / "config_2023.yml")
                         .read_text())
    torch.manual_seed(0)
    clap = CLAP(audioenc_name=cfg["audioenc_name"], sample_rate=cfg["sampling_rate"],
                window_size=cfg["window_size"], hop_size=cfg["hop_size"],
                mel_bins=cfg["mel_bins"], fmin=cfg["fmin"], fmax=cfg["fmax"],
                classes_num=cfg["num_classes"], out_emb=cfg["out_emb"], text_model=str(text),
                transformer_embed_dim=cfg["transformer_embed_dim"], d_proj=cfg["d_proj"])
    ckpt = tmp_path_factory.mktemp("msclap")
    torch.save({"model": clap.state_dict()}, ckpt / "CLAP_weights_2023.pth")
    install(root, "microsoft/msclap", ckpt)
    return root


def test_windows_cover_the_clip_and_repeat_the_tail() -> None:
    x = np.arange(10, dtype=np.float32)
    w = windows(x, 4)
    assert w.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 8, 9]]
    assert windows(x[:3], 4).tolist() == [[0, 1, 2, 0]]


def test_clip_embedding_from_7s_windows(weights: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(weights))
    enc = MsClapEncoder()
    (a1, rate), (a2, _) = demo_audio(1, 9.0), demo_audio(2, 9.0)
    audio = np.concatenate([a1, a2])[: 9 * rate]  # 9 s of real speech → two 7 s windows
    out = enc.embed(mode="A", audio=audio, sample_rate=rate)
    assert out.vector.shape == (1024,) and np.isfinite(out.vector).all()
    assert out.spec.audio_rate == 44100 and out.spec.audio_seconds == pytest.approx(14.0)
    assert out.spec.crop.startswith("2 consecutive 7 s windows")
    # the clip feature is the mean of the windows' embeddings, each computed by msclap
    first = enc.embed(mode="A", audio=audio[: 7 * rate], sample_rate=rate).vector
    assert not np.allclose(first, out.vector)
    again = enc.embed(mode="A", audio=audio, sample_rate=rate).vector
    assert np.array_equal(again, out.vector)
    with pytest.raises(ValueError, match="audio only"):
        enc.embed(mode="AV", audio=audio, sample_rate=rate)


def test_a_checkpoint_without_the_audio_tower_is_refused(
        weights: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "w"
    bad = tmp_path / "bad"
    bad.mkdir()
    torch.save({"model": {}}, bad / "CLAP_weights_2023.pth")
    install(root, "microsoft/msclap", bad)
    gpt = weights / "huggingface" / "hub" / "models--openai-community--gpt2" / "snapshots"
    install(root, "openai-community/gpt2", next(gpt.iterdir()))
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(root))
    with pytest.raises(ConfigError, match="not a CLAP 2023 checkpoint"):
        MsClapEncoder()
