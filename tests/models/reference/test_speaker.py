"""Reference speaker embedder: no numba JIT at run time, same embeddings as Resemblyzer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from madbench_common.media.audio import decode_audio
from madbench_common.models.reference.speaker import ResemblyzerEmbedder, mel_power

DEMO = Path(__file__).resolve().parents[3] / "data" / "demo" / "clips" / "demo_002.mp4"


def test_embedding_runs_no_numba_code(tmp_path: Path) -> None:
    """Each pod used to spend ~20 s compiling librosa's numba kernels."""
    code = ("import sys, numpy as np\n"
            "from madbench_common.models.registry import load_model\n"
            "m = load_model('ref-resemblyzer')\n"
            "x = np.random.default_rng(0).standard_normal(32000).astype('float32') * 0.1\n"
            "e = m.embed(x, 16000)\n"
            "assert abs(float(np.linalg.norm(e)) - 1) < 1e-5\n"
            "print(sorted(k for k in sys.modules if k.split('.')[0] == 'numba'))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"NUMBA_CACHE_DIR": str(tmp_path),
                                          "PYTHONPATH": str(DEMO.parents[3])})
    assert out.stdout.strip() == "[]"


@pytest.mark.slow
def test_matches_resemblyzer_librosa_path() -> None:
    """Against Resemblyzer's own librosa spectrogram and embed_utterance (compiles numba)."""
    if not DEMO.exists():
        pytest.skip("data/demo not built")
    from resemblyzer import preprocess_wav
    from resemblyzer.audio import wav_to_mel_spectrogram

    wav = preprocess_wav(decode_audio(DEMO, 16000))
    ref = wav_to_mel_spectrogram(wav)
    ours = mel_power(wav)
    assert ours.shape == ref.shape
    assert np.max(np.abs(ours - ref)) <= 1e-5 * np.max(ref)
    embedder = ResemblyzerEmbedder()
    theirs = embedder._encoder.embed_utterance(wav)
    assert float(np.dot(embedder.embed_utterance(wav), theirs)) > 0.99999
