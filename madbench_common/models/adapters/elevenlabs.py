"""ElevenLabs text-to-speech (Eleven Multilingual v2) as a DEAF VoiceTTS: the paper's SIC voices.

DEAF §2.1 and Appendix A.2.3 synthesise SIC with ElevenLabs' ``eleven_multilingual_v2`` in
four voice profiles, exported as 16 kHz 16-bit mono PCM (:class:`ElevenLabsTTS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from madbench_common.core.errors import ConfigError
from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample
from madbench_common.models.http_api import JsonApi, SpendMeter, api_key

__all__ = ["ELEVENLABS_VOICES", "ElevenLabsTTS"]

ELEVENLABS_VOICES: Mapping[str, str] = MappingProxyType({
    "young_male": "TX3LPaxmHKxFdv7VOQHJ",      # "Liam": male, young, American
    "young_female": "EXAVITQu4vr4xnSDxMaL",    # "Sarah" (formerly "Bella"): female, young
    "elderly_male": "pqHfZKP75CvOlQylNhV4",    # "Bill": male, old, American
    "elderly_female": "pFZP5JQG7iQjIQuC4Bku",  # "Lily": female, middle-aged, British, raspy
})
"""The default SIC voices: ElevenLabs *premade* (default) voices, one per profile.

DEAF's own voice ids (its Table 8) are not in the text we have, so these are a documented
choice, not the paper's voices. Premade voices are public: every ElevenLabs account can
use them, and ``GET https://api.elevenlabs.io/v1/voices`` lists them with
``category: premade`` and ``labels`` (gender, age, accent); ElevenLabs' "default voices"
documentation page shows the same set. The ages above are those labels as several public
copies of that list show them (not re-checked against the API from this machine, which
reaches no network). The premade set has no voice labelled old and female: Lily
(middle-aged, raspy) is the closest, so for a faithful elderly-female profile pass a
Voice Library voice id. Override the whole set with the workflow parameter
``sic_tts_voices`` (``argo submit -p 'sic_tts_voices={"young_male": "…", …}'``) or
``--set sic_tts.voices=…`` locally. Voice ids are not secrets."""

DEFAULT_BASE = "https://api.elevenlabs.io"
_RATE = 16000


class ElevenLabsTTS:
    """VoiceTTS over the ElevenLabs API; ``voices`` maps profile → voice id.

    ``POST /v1/text-to-speech/{voice_id}?output_format=pcm_16000`` with the key from
    ``$ELEVENLABS_API_KEY`` only. The paper's voice ids (its Table 8) are not in the text
    we have, so ``voices`` defaults to the documented premade set
    :data:`ELEVENLABS_VOICES` (the ``sic_tts_voices`` workflow parameter; DEAF's design
    re-exports it); a mapping given replaces it, and a profile it lacks is a configuration
    error. Costs are per character (``usd_per_1k_chars``, unverified list price) against
    the spend cap.
    """

    slug = "deaf-elevenlabs"
    model_id = "eleven_multilingual_v2"
    reference = False

    def __init__(self, voices: dict[str, str] | None = None, base_url: str = DEFAULT_BASE,
                 key_env: str = "ELEVENLABS_API_KEY", rpm: float = 30.0,
                 usd_per_1k_chars: float = 0.30, spend_cap_usd: float = 20.0,
                 api: JsonApi | None = None) -> None:
        self.voices = dict(ELEVENLABS_VOICES if voices is None else voices)
        self.api = api or JsonApi(base_url, {"xi-api-key": api_key(key_env)}, rpm=rpm,
                                  key_env=key_env)
        self.usd_per_char = usd_per_1k_chars / 1000.0
        self.meter = SpendMeter(spend_cap_usd)
        self.version = f"{self.model_id}@{'api' if base_url == DEFAULT_BASE else base_url}"

    def synthesise(self, text: str, profile: str, sample_rate: Hertz, seed: int = 0) -> Audio:
        voice = self.voices.get(profile)
        if not voice:
            raise ConfigError(f"{self.slug}: no voice id for profile {profile!r}; set the "
                              "stage parameter voices={profile: voice_id, ...} (workflow "
                              "parameter sic_tts_voices)")
        cost = len(text) * self.usd_per_char
        self.meter.check(cost)
        pcm = self.api.post(f"/v1/text-to-speech/{voice}?output_format=pcm_{_RATE}",
                            {"text": text, "model_id": self.model_id, "seed": int(seed)},
                            raw=True)
        self.meter.add(cost)
        audio = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
        return resample(audio, _RATE, sample_rate)
