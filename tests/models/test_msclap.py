"""Microsoft CLAP adapter: msclap's own CLAP classes (the released CNN14 of the 2022 model the
paper cites, a 1-layer BERT text tower), random weights saved in the real checkpoint layout
(madbench_common.models.tiny.eval.msclap, the image test's builder) and loaded through
msclap's wrapper; the 2023 option (HTSAT + GPT-2) the same way."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("msclap", reason="run make adapter-test IMAGE=enc-msclap")


from madbench_common.core.errors import ConfigError
from madbench_common.models.adapters.msclap import (
    PAPER_VERSION,
    VERSIONS,
    MsClapEncoder,
    windows,
)

from .tiny import demo_audio


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from madbench_common.models.tiny.eval import msclap

    return msclap(tmp_path_factory.mktemp("weights"))


def test_windows_cover_the_clip_and_repeat_the_tail() -> None:
    x = np.arange(10, dtype=np.float32)
    w = windows(x, 4)
    assert w.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 8, 9]]
    assert windows(x[:3], 4).tolist() == [[0, 1, 2, 0]]


def test_the_paper_model_is_msclap_2022() -> None:
    """§4.2 cites CLAP (Elizalde et al., ICASSP 2023): msclap's 2022 weights, CNN14 + BERT."""
    assert PAPER_VERSION == "2022"
    assert VERSIONS["2022"][:2] == ("CLAP_weights_2022.pth", "google-bert/bert-base-uncased")
    import msclap
    import yaml

    cfg = yaml.safe_load((Path(msclap.__file__).parent / "configs" / "config_2022.yml")
                         .read_text())
    assert (cfg["audioenc_name"], cfg["duration"], cfg["text_model"]) == (
        "Cnn14", 5, "bert-base-uncased")


def test_clip_embedding_from_5s_windows(weights: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MADBENCH_WEIGHTS", str(weights))
    enc = MsClapEncoder()
    assert type(enc.wrapper.clap.audio_encoder.base).__name__ == "Cnn14"
    assert type(enc.wrapper.clap.caption_encoder.base).__name__ == "BertModel"
    (a1, rate), (a2, _) = demo_audio(1, 9.0), demo_audio(2, 9.0)
    audio = np.concatenate([a1, a2])[: 9 * rate]  # 9 s of real speech → two 5 s windows
    out = enc.embed(mode="A", audio=audio, sample_rate=rate)
    assert out.vector.shape == (1024,) and np.isfinite(out.vector).all()
    assert out.spec.audio_rate == 44100 and out.spec.audio_seconds == pytest.approx(10.0)
    assert out.spec.crop.startswith("2 consecutive 5 s windows")
    # the clip feature is the mean of the windows' embeddings, each computed by msclap
    first = enc.embed(mode="A", audio=audio[: 5 * rate], sample_rate=rate).vector
    assert not np.allclose(first, out.vector)
    again = enc.embed(mode="A", audio=audio, sample_rate=rate).vector
    assert np.array_equal(again, out.vector)
    with pytest.raises(ValueError, match="audio only"):
        enc.embed(mode="AV", audio=audio, sample_rate=rate)


def test_a_checkpoint_without_the_audio_tower_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from madbench_common.models.tiny.eval import msclap

    monkeypatch.setenv("MADBENCH_WEIGHTS", str(msclap(tmp_path, audio_state=False)))
    with pytest.raises(ConfigError, match="not a CLAP 2022 checkpoint"):
        MsClapEncoder()


def test_the_2023_option_is_labelled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from madbench_common.models.tiny.eval import msclap_2023

    monkeypatch.setenv("MADBENCH_WEIGHTS", str(msclap_2023(tmp_path)))
    enc = MsClapEncoder(msclap_version="2023")
    assert type(enc.wrapper.clap.audio_encoder.base).__name__ == "HTSATWrapper"
    assert enc.version.endswith("+2023") and enc.seconds == 7
    (audio, rate) = demo_audio(1, 3.0)
    assert enc.embed(mode="A", audio=audio, sample_rate=rate).vector.shape == (1024,)
    with pytest.raises(ConfigError, match="msclap_version"):
        MsClapEncoder(msclap_version="2021")
