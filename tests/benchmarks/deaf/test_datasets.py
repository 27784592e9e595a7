"""The paper's data sets from an s3:// prefix (the cluster's way in) on a real S3 server,
read exactly as from a local folder: EMIS sentences and clips, DEMAND backgrounds."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from madbench_common.benchmarks.deaf.envlib import library_entries, load_background
from madbench_common.benchmarks.deaf.sentences import read_emis_clips, read_emis_sentences
from madbench_common.core.errors import ConfigError
from madbench_common.core.store import S3Store


def _wav(seconds: float, sr: int, f0: float) -> bytes:
    t = np.arange(int(seconds * sr)) / sr
    buf = io.BytesIO()
    sf.write(buf, (0.2 * np.sin(2 * np.pi * f0 * t)).astype(np.float32), sr, format="WAV")
    return buf.getvalue()


def _emis(put) -> None:  # type: ignore[no-untyped-def]
    put("meta/sentences.csv", b"ID,Sentence\n1,I am thrilled today.\n2,The bus leaves at noon.\n")
    put("wav/1_happyexplicit_sad_0011_cosyvoice.wav", _wav(0.5, 16000, 200))
    put("wav/2_neutral_angry_0012_f5.wav", _wav(0.5, 16000, 300))


def _demand(put) -> None:  # type: ignore[no-untyped-def]
    put("DKITCHEN/ch01.wav", _wav(2.0, 48000, 150))
    put("DKITCHEN/ch02.wav", _wav(2.0, 48000, 150))
    put("TBUS/ch01.wav", _wav(2.0, 48000, 90))


def _read_all(emis: str, demand: str) -> tuple[dict, dict, dict]:  # type: ignore[type-arg]
    sentences = {s.sentence_id: s for s in read_emis_sentences(emis)}
    clips = {(c.sentence_id, c.audio_emotion): c for c in read_emis_clips(emis)}
    entries = {e.env.code: e for e in library_entries(demand=demand)}
    return sentences, clips, entries


def _check(sentences: dict, clips: dict, entries: dict) -> None:  # type: ignore[type-arg]
    assert sentences["emis001"].label == "happy" and sentences["emis001"].condition == "explicit"
    assert sentences["emis002"].text == "The bus leaves at noon."
    clip = clips[("emis001", "sad")]
    audio, sr = sf.read(io.BytesIO(clip.read()))
    assert sr == 16000 and len(audio) == 8000 and clip.tts == "cosyvoice"
    have = {code for code, e in entries.items() if e.path}
    assert have == {"DKITCHEN", "TBUS"} and len(entries) == 18
    bus = load_background(entries["TBUS"], 16000, 1.0)
    assert len(bus) == 16000 and np.abs(bus).max() > 0.1


def test_emis_and_demand_from_s3_read_as_from_a_folder(s3_uri: str, tmp_path: Path) -> None:
    store = S3Store(s3_uri)
    _emis(lambda key, data: store.put_bytes(f"emis/{key}", data))
    _demand(lambda key, data: store.put_bytes(f"demand/{key}", data))
    remote = _read_all(f"{s3_uri}/emis", f"{s3_uri}/demand")
    _check(*remote)
    assert remote[2]["TBUS"].path == f"{s3_uri}/demand/TBUS/ch01.wav"

    def put_local(base: Path):  # type: ignore[no-untyped-def]
        def put(key: str, data: bytes) -> None:
            (base / key).parent.mkdir(parents=True, exist_ok=True)
            (base / key).write_bytes(data)
        return put

    _emis(put_local(tmp_path / "emis"))
    _demand(put_local(tmp_path / "demand"))
    _check(*_read_all(str(tmp_path / "emis"), str(tmp_path / "demand")))


def test_missing_copies_are_configuration_errors(s3_uri: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no EMIS WAVs"):
        read_emis_clips(f"{s3_uri}/nothing-here")
    with pytest.raises(ConfigError, match="no such folder"):
        read_emis_clips(str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match="DEMAND folder not found"):
        library_entries(demand=str(tmp_path / "absent"))
