"""Microsoft neural text-to-speech over the Azure Speech REST API: DEAF's BSC narrator.

DEAF Appendix A.2.2: "All sentences are converted into speech using the Microsoft Neural
TTS system with the en-US-GuyNeural voice … The generated speech is first saved in MP3
format and then converted to WAV format. Subsequently, all audio signals are resampled to
16 kHz and converted to single-channel audio." :class:`AzureNeuralTTS` is that path. Tests
run it against the local stub (:mod:`~madbench_common.models.api_stub`), never the service.
"""

from __future__ import annotations

import io
import re
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import soundfile as sf

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models.deaf_roles import NARRATOR
from madbench_common.models.http_api import JsonApi, SpendMeter, api_key

__all__ = ["DEFAULT_FORMAT", "DEFAULT_VOICE", "AzureNeuralTTS", "check_format", "decode_audio",
           "ssml"]

DEFAULT_VOICE = "en-US-GuyNeural"
DEFAULT_FORMAT = "audio-24khz-48kbitrate-mono-mp3"
_FORMAT = re.compile(r"^(?P<kind>riff|raw|audio)-(?P<rate>\d+)(?P<unit>khz|hz)-(?P<rest>[\w-]+)$")


def ssml(text: str, voice: str, lang: str = "en-US") -> str:
    """The SSML document for ``text`` in ``voice`` (text and names XML-escaped).

    ``<speak>`` with one ``<voice name="en-US-GuyNeural">`` around the sentence, no prosody
    markup (the paper names none); sent as ``Content-Type: application/ssml+xml``."""
    return (f"<speak version='1.0' xmlns='http://www.w3.org/2001/10/synthesis' "
            f"xml:lang={quoteattr(lang)}><voice name={quoteattr(voice)}>{escape(text)}"
            "</voice></speak>")


def check_format(output_format: str) -> re.Match[str]:
    """The parts of an Azure output format this adapter reads (MP3, RIFF/WAV, raw PCM16)."""
    m = _FORMAT.match(output_format)
    readable = m is not None and (m["rest"].endswith("mp3") if m["kind"] == "audio" else
                                  m["rest"] == "16bit-mono-pcm")
    if m is None or not readable:
        raise ConfigError(f"output format {output_format!r}: expected an MP3 "
                          "(audio-24khz-48kbitrate-mono-mp3), riff-<rate>-16bit-mono-pcm or "
                          "raw-<rate>-16bit-mono-pcm format")
    return m


def decode_audio(data: bytes, output_format: str) -> tuple[Audio, Hertz]:
    """Mono float32 audio and its rate from a reply in ``output_format``."""
    m = check_format(output_format)
    if m["kind"] == "raw":
        rate = int(m["rate"]) * (1000 if m["unit"] == "khz" else 1)
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0, rate
    try:
        audio, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (RuntimeError, sf.LibsndfileError) as exc:
        raise ValueError(f"undecodable {output_format} reply ({len(data)} bytes): {exc}") \
            from None
    return audio[:, 0], int(sr)


class AzureNeuralTTS:
    """VoiceTTS over Azure Speech: ``voices`` maps profile → neural voice name.

    One request per sentence to ``POST
    https://<region>.tts.speech.microsoft.com/cognitiveservices/v1`` with the key in the
    ``Ocp-Apim-Subscription-Key`` header, read from ``$AZURE_SPEECH_KEY`` only (on the
    cluster: the API-key Secret, given to the ``bsc_speech`` pod alone), and
    ``X-Microsoft-OutputFormat`` ``audio-24khz-48kbitrate-mono-mp3`` by default: an MP3 as
    the paper saved (its bit rate is not given; this is the service's common MP3 format),
    decoded with libsndfile and resampled to the caller's rate (16 kHz in DEAF);
    ``riff-*``/``raw-*`` PCM formats are accepted too. Requests go through
    :class:`~madbench_common.models.http_api.JsonApi`: the rate limit (``rpm``), retries
    with backoff on 429/5xx, 401/403 as a configuration error (exit 3). Costs are per
    character (``usd_per_1m_chars``, the neural voices' list price when written,
    unverified) against the spend cap. BSC uses one profile, ``narrator``.
    """

    slug = "deaf-azure-tts"
    reference = False

    def __init__(self, voices: dict[str, str] | None = None, region: str = "eastus",
                 base_url: str = "", key_env: str = "AZURE_SPEECH_KEY",
                 output_format: str = DEFAULT_FORMAT, rpm: float = 60.0,
                 usd_per_1m_chars: float = 16.0, spend_cap_usd: float = 20.0,
                 api: JsonApi | None = None) -> None:
        self.voices = dict(voices or {NARRATOR: DEFAULT_VOICE})
        check_format(output_format)
        self.output_format = output_format
        url = base_url or f"https://{region}.tts.speech.microsoft.com"
        self.api = api or JsonApi(url, {"Ocp-Apim-Subscription-Key": api_key(key_env)},
                                  rpm=rpm, key_env=key_env)
        self.usd_per_char = usd_per_1m_chars / 1e6
        self.meter = SpendMeter(spend_cap_usd)
        names = ",".join(sorted(set(self.voices.values())))
        self.version = f"azure-neural-tts:{names}@{base_url or 'api'}+{output_format}"

    def synthesise(self, text: str, profile: str, sample_rate: Hertz, seed: int = 0) -> Audio:
        """``text`` in ``profile``'s voice, mono at ``sample_rate`` (``seed`` is unused:
        the service is deterministic per request and takes no seed)."""
        voice = self.voices.get(profile)
        if not voice:
            raise ConfigError(f"{self.slug}: no voice for profile {profile!r}; set "
                              "model_args.voices={profile: voice name}")
        cost = len(text) * self.usd_per_char
        self.meter.check(cost)
        data = self.api.post_bytes("/cognitiveservices/v1", ssml(text, voice).encode(), {
            "Content-Type": "application/ssml+xml",
            "X-Microsoft-OutputFormat": self.output_format,
            "User-Agent": "madbench-deaf"})
        self.meter.add(cost)
        audio, rate = decode_audio(data, self.output_format)
        if len(audio) == 0:
            raise ValueError(f"{self.slug}: empty audio for {text[:40]!r}")
        return resample(audio, rate, sample_rate)

