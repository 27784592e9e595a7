"""A local HTTP server speaking the hosted APIs' request/response shapes, for tests and the demo.

It is never a model: its answers are fixed functions of the request (by default it echoes
a misleading claim when the prompt carries one, like a sycophant, and otherwise declines),
and reports built on it say "stub". It checks what the real endpoints check (the key
header, the body's shape, that the audio is a decodable 16 kHz WAV) and can inject
errors: :class:`Fault` entries are consumed in order, one per request, so tests see
retries and backoff. Endpoints: Gemini, OpenAI-compatible, ElevenLabs and Azure Speech
(:func:`_handler`). Binds 127.0.0.1 on a free port; stop it by leaving the context.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

__all__ = ["STUB_KEY", "STUB_THOUGHT_TOKENS", "Fault", "StubServer", "default_reply", "main",
           "stub_process", "stub_server"]

STUB_KEY = "stub-key"
STUB_THOUGHT_TOKENS = 300
"""Thinking tokens the stub's Gemini spends per request (more than a 256-token cap)."""
_GEMINI = re.compile(r"^/v1beta/models/(?P<model>[^/:]+):generateContent$")
_TTS = re.compile(r"^/v1/text-to-speech/(?P<voice>[^/?]+)")


@dataclass(frozen=True)
class Fault:
    """One injected failure: the status, an optional ``Retry-After`` and a JSON body."""

    status: int
    retry_after: str | None = None
    message: str = "injected fault"


def default_reply(kind: str, prompt: str, audio_seconds: float) -> str:
    """The stub's answer: the prompt's leading claim if there is one, else a refusal;
    for the judge, Other."""
    if kind == "judge":
        return "The response commits to neither answer.\nLABEL: O"
    claim, sep, _ = prompt.partition(". ")
    if sep and "?" not in claim:
        return f"{claim}."
    return "I'm not able to tell that from the recording."


@dataclass
class StubServer:
    """State of a running stub: its URL, received requests and pending faults."""

    url: str = ""
    key: str = STUB_KEY
    reply: Callable[[str, str, float], str] = default_reply
    faults: list[Fault] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_fault(self) -> Fault | None:
        with self.lock:
            return self.faults.pop(0) if self.faults else None


def _wav_seconds(b64: str) -> float:
    """Duration of a base64 WAV, or raise ValueError if it is not 16 kHz audio."""
    data = base64.b64decode(b64, validate=True)
    try:
        audio, sr = sf.read(io.BytesIO(data), dtype="float32")
    except (RuntimeError, sf.SoundFileError) as exc:
        raise ValueError(f"audio is not a WAV: {exc}") from None
    if sr != 16000 or len(audio) == 0:
        raise ValueError(f"expected a non-empty 16 kHz WAV, got {sr} Hz, {len(audio)} samples")
    return float(len(audio) / sr)


def _handler(state: StubServer) -> type[BaseHTTPRequestHandler]:
    """The endpoints. Gemini ``POST /v1beta/models/{model}:generateContent``, thinking as the
    real models do by default: unless ``thinkingConfig.thinkingBudget`` is 0 it spends
    :data:`STUB_THOUGHT_TOKENS` thinking tokens (fewer if the budget is smaller), counted
    against ``maxOutputTokens``: when thoughts and answer do not fit, the candidate ends
    with ``finishReason: MAX_TOKENS`` and no text part, as the API returns it.
    OpenAI-compatible ``POST /v1/chat/completions`` (audio answers and the text-only
    judge). ElevenLabs ``POST /v1/text-to-speech/{voice_id}`` (PCM, a tone whose pitch
    depends on the voice id). Azure Speech ``POST /cognitiveservices/v1`` (an SSML body
    with one ``<voice name=…>``, the key in ``Ocp-Apim-Subscription-Key``, the reply in
    the ``X-Microsoft-OutputFormat`` asked for: MP3, RIFF or raw 16-bit PCM, a tone as
    above)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json",
                  headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: int, message: str, headers: dict[str, str] | None = None
                   ) -> None:
            body = {"error": {"code": status, "message": message, "status": "STUB_ERROR"}}
            self._send(status, json.dumps(body).encode(), headers=headers)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path == "/cognitiveservices/v1":
                return self._azure(raw)
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                return self._error(400, "body is not JSON")
            state.requests.append({"path": self.path, "headers": dict(self.headers),
                                   "body": body})
            fault = state.next_fault()
            if fault is not None:
                extra = {"Retry-After": fault.retry_after} if fault.retry_after else None
                return self._error(fault.status, fault.message, extra)
            try:
                self._route(body)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                self._error(400, f"malformed request: {exc!r}")

        def _route(self, body: dict[str, Any]) -> None:
            if m := _GEMINI.match(self.path):
                return self._gemini(body) if self._auth("x-goog-api-key", state.key) else None
            if self.path == "/v1/chat/completions":
                ok = self._auth("Authorization", f"Bearer {state.key}")
                return self._chat(body) if ok else None
            if m := _TTS.match(self.path):
                return self._tts(body, m["voice"]) if self._auth("xi-api-key", state.key) \
                    else None
            self._error(404, f"no route {self.path}")

        def _auth(self, header: str, expected: str) -> bool:
            if self.headers.get(header) != expected:
                self._error(401, f"missing or wrong {header}")
                return False
            return True

        def _gemini(self, body: dict[str, Any]) -> None:
            parts = body["contents"][0]["parts"]
            audio = [p["inline_data"] for p in parts if "inline_data" in p]
            if len(audio) != 1 or audio[0]["mime_type"] != "audio/wav":
                raise ValueError("expected one inline audio/wav part")
            seconds = _wav_seconds(audio[0]["data"])
            prompt = " ".join(p["text"] for p in parts if "text" in p)
            if body["generationConfig"]["temperature"] != 0:
                raise ValueError("DEAF asks for temperature 0")
            text = state.reply("audio", prompt, seconds)
            config = body["generationConfig"]
            budget = int((config.get("thinkingConfig") or {}).get("thinkingBudget", -1))
            thoughts = STUB_THOUGHT_TOKENS if budget < 0 else min(budget, STUB_THOUGHT_TOKENS)
            words = len(text.split())
            cap = int(config.get("maxOutputTokens", 65536))
            content: dict[str, Any] = {"role": "model", "parts": [{"text": text}]}
            finish = "STOP"
            if thoughts + words > cap:  # thinking used the cap up: no answer text
                content, finish, words = {"role": "model"}, "MAX_TOKENS", 0
                thoughts = cap
            usage = {"promptTokenCount": 32 * round(seconds) + len(prompt.split()),
                     "candidatesTokenCount": words, "thoughtsTokenCount": thoughts,
                     "promptTokensDetails": [{"modality": "AUDIO",
                                              "tokenCount": 32 * round(seconds)}]}
            resp = {"candidates": [{"content": content, "finishReason": finish}],
                    "usageMetadata": usage}
            self._send(200, json.dumps(resp).encode())

        def _chat(self, body: dict[str, Any]) -> None:
            content = body["messages"][-1]["content"]
            seconds, prompt = 0.0, content if isinstance(content, str) else ""
            if isinstance(content, list):
                prompt = " ".join(c["text"] for c in content if c["type"] == "text")
                audio = [c["input_audio"] for c in content if c["type"] == "input_audio"]
                if len(audio) != 1 or audio[0]["format"] != "wav":
                    raise ValueError("expected one input_audio part in wav format")
                seconds = _wav_seconds(audio[0]["data"])
            text = state.reply("audio" if seconds else "judge", prompt, seconds)
            usage = {"prompt_tokens": 10 * round(seconds) + len(prompt.split()),
                     "completion_tokens": len(text.split()),
                     "prompt_tokens_details": {"audio_tokens": 10 * round(seconds)}}
            resp = {"choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": text}}],
                    "model": body["model"], "usage": usage}
            self._send(200, json.dumps(resp).encode())

        def _tts(self, body: dict[str, Any], voice: str) -> None:
            pcm = (_tone(str(body["text"]), voice, 16000) * 32767).astype("<i2")
            self._send(200, pcm.tobytes(), "application/octet-stream")

        def _azure(self, raw: bytes) -> None:
            state.requests.append({"path": self.path, "headers": dict(self.headers),
                                   "body": raw.decode("utf-8", "replace")})
            fault = state.next_fault()
            if fault is not None:
                extra = {"Retry-After": fault.retry_after} if fault.retry_after else None
                return self._error(fault.status, fault.message, extra)
            if not self._auth("Ocp-Apim-Subscription-Key", state.key):
                return None
            fmt = self.headers.get("X-Microsoft-OutputFormat", "")
            if self.headers.get("Content-Type", "").split(";")[0] != "application/ssml+xml":
                return self._error(400, "Content-Type must be application/ssml+xml")
            try:
                voice, text = _read_ssml(raw)
                body, ctype = _encode(_tone(text, voice, 24000), 24000, fmt)
            except ValueError as exc:
                return self._error(400, str(exc))
            self._send(200, body, ctype)

    return Handler


def _tone(text: str, voice: str, rate: int) -> np.ndarray:
    """A 0.1-amplitude tone, 60 ms per character (at least 0.5 s), pitch from the voice."""
    n = int(rate * max(0.5, 0.06 * len(text)))
    f0 = 100.0 + sum(map(ord, voice)) % 150
    return (0.1 * np.sin(2 * np.pi * f0 * np.arange(n) / rate)).astype(np.float32)


_SSML_NS = "{http://www.w3.org/2001/10/synthesis}"
_AZURE_FORMATS = {"audio-24khz-48kbitrate-mono-mp3": ("MP3", 24000),
                  "audio-16khz-32kbitrate-mono-mp3": ("MP3", 16000),
                  "riff-24khz-16bit-mono-pcm": ("WAV", 24000),
                  "riff-16khz-16bit-mono-pcm": ("WAV", 16000),
                  "raw-24khz-16bit-mono-pcm": ("RAW", 24000),
                  "raw-16khz-16bit-mono-pcm": ("RAW", 16000)}


def _read_ssml(raw: bytes) -> tuple[str, str]:
    """(voice name, spoken text) of an SSML ``<speak>`` with one ``<voice>``."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(raw)
    except ET.ParseError as exc:
        raise ValueError(f"SSML does not parse: {exc}") from None
    voices = root.findall(f"{_SSML_NS}voice") or root.findall("voice")
    if root.tag not in (f"{_SSML_NS}speak", "speak") or len(voices) != 1 \
            or not voices[0].get("name"):
        raise ValueError("expected <speak> with one <voice name=...>")
    return str(voices[0].get("name")), "".join(voices[0].itertext()).strip()


def _encode(audio: np.ndarray, rate: int, fmt: str) -> tuple[bytes, str]:
    """``audio`` (at ``rate``) in the Azure output format ``fmt``, and its content type."""
    if fmt not in _AZURE_FORMATS:
        raise ValueError(f"unsupported X-Microsoft-OutputFormat {fmt!r}")
    kind, target = _AZURE_FORMATS[fmt]
    x = np.interp(np.arange(int(len(audio) * target / rate)) * rate / target,
                  np.arange(len(audio)), audio).astype(np.float32)
    if kind == "RAW":
        return (x * 32767).astype("<i2").tobytes(), "audio/x-wav"
    buf = io.BytesIO()
    if kind == "MP3":
        sf.write(buf, x, target, format="MP3", subtype="MPEG_LAYER_III")
        return buf.getvalue(), "audio/mpeg"
    sf.write(buf, x, target, format="WAV", subtype="PCM_16")
    return buf.getvalue(), "audio/x-wav"


@contextmanager
def stub_server(reply: Callable[[str, str, float], str] = default_reply,
                faults: list[Fault] | None = None, key: str = STUB_KEY) -> Iterator[StubServer]:
    """Run a stub on 127.0.0.1 (free port) for the ``with`` block."""
    state = StubServer(key=key, reply=reply, faults=list(faults or []))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@contextmanager
def stub_process(timeout_s: float = 30.0) -> Iterator[str]:
    """Run a stub in a child process (default replies) for the block; yield its URL.

    A separate process, not a thread: runs that fork worker processes must not fork a
    process with a live server thread (the children's calls to it time out).
    """
    with tempfile.TemporaryDirectory(prefix="deaf-stub-") as tmp:
        port_file = Path(tmp) / "port"
        proc = subprocess.Popen([sys.executable, "-m", "madbench_common.models.api_stub",
                                 "--port-file", str(port_file)])
        try:
            deadline = time.monotonic() + timeout_s
            while not port_file.exists() or not port_file.read_text().strip():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the API stub server did not start")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{int(port_file.read_text())}"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> None:
    """``python -m madbench_common.models.api_stub --port-file F [--port N]``: serve until
    terminated (``--port``: a fixed port, e.g. inside a private network namespace where no
    other server can hold it; default a free one)."""
    parser = argparse.ArgumentParser(description="local API stub (tests and the demo)")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    state = StubServer()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _handler(state))
    tmp = Path(args.port_file).with_suffix(".tmp")
    tmp.write_text(str(server.server_address[1]))
    tmp.replace(args.port_file)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
