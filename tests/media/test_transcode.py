"""Codec round trips through FFmpeg (PyAV): the output's bitrate and sample rate, measured."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.core.errors import ConfigError
from madbench_common.media.transcode import CodecSpec, decode_encoded, encode_audio, probe_encoded

SR = 16000
# (codec, sample rate, bitrate, relative bitrate tolerance, expected decoder)
CASES = [
    ("mp3", 16000, 24000, 0.001, "mp3float"),   # CBR: exact
    ("mp3", 16000, 64000, 0.001, "mp3float"),
    ("mp3", 44100, 128000, 0.001, "mp3float"),
    ("aac", 16000, 24000, 0.08, "aac"),         # FFmpeg's AAC: an average bitrate
    ("aac", 16000, 64000, 0.08, "aac"),
    ("aac", 44100, 128000, 0.08, "aac"),
    ("opus", 16000, 12000, 0.02, "opus"),       # hard CBR (vbr=off), Ogg page overhead
    ("opus", 48000, 32000, 0.02, "opus"),
    ("mulaw", 8000, 0, 0.001, "pcm_mulaw"),     # G.711: 8 bits x 8000 Hz = 64 kbit/s
]


def _signal(seconds: float = 3.0) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    rng = np.random.default_rng(0)
    x = 0.3 * np.sin(2 * np.pi * 440 * t) * (1 + 0.5 * np.sin(2 * np.pi * 2 * t))
    return (x + 0.02 * rng.normal(size=t.size)).astype(np.float32)


@pytest.mark.parametrize(("codec", "rate", "bitrate", "tol", "decoder"), CASES)
def test_round_trip_checks_bitrate_and_rate_on_the_output(codec: str, rate: int, bitrate: int,
                                                          tol: float, decoder: str) -> None:
    x = _signal()
    enc = encode_audio(x, SR, CodecSpec(codec, rate, bitrate))
    want = 8 * rate if codec == "mulaw" else bitrate
    assert enc.decoder == decoder and enc.channels == 1
    assert enc.sample_rate == rate
    assert enc.bitrate == pytest.approx(want, rel=tol)
    # probing the bytes again (what a downstream reader sees) gives the same facts
    again = probe_encoded(enc.data, codec)
    assert (again.sample_rate, again.bitrate) == (enc.sample_rate, enc.bitrate)
    y = decode_encoded(enc, SR)
    assert abs(y.size - x.size) <= 0.1 * SR  # codec priming/padding only
    n = min(x.size, y.size)
    lag = int(np.argmax(np.correlate(y[:4000], x[:4000], "full"))) - 3999
    assert lag == 0  # decoders remove the encoder delay: the chain stays aligned
    snr = 10 * np.log10(np.mean(x[:n] ** 2) / np.mean((y[:n] - x[:n]) ** 2))
    assert snr > 8.0  # a lossy copy of the same signal, not silence or garbage


def test_lower_bitrate_costs_fidelity() -> None:
    x = _signal()
    errors = []
    for bitrate in (24000, 64000):
        y = decode_encoded(encode_audio(x, SR, CodecSpec("aac", 16000, bitrate)), SR)[:x.size]
        errors.append(float(np.mean((y - x) ** 2)))
    assert errors[0] > errors[1]


@pytest.mark.parametrize("spec", [("flac", 16000, 1000), ("mp3", 16000, 0), ("aac", 0, 64000)])
def test_bad_specs_are_configuration_errors(spec: tuple[str, int, int]) -> None:
    with pytest.raises(ConfigError):
        CodecSpec(*spec)
