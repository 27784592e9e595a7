"""IndexTTS2's adapter refuses GPT output that holds no speech token (numpy stands in for
the torch tensor: the check uses only ``shape``, indexing and ``all``), so the row is a
``no_speech_tokens`` rejection instead of a convolution error inside the mel stage."""

from __future__ import annotations

import numpy as np
import pytest

from madbench_common.models.adapters.indextts2 import LengthControl, check_codes
from madbench_common.models.speech_prep import GenerationFailed
from madbench_common.pipeline.failures import model_rejection

STOP = 8193


@pytest.mark.parametrize("codes", [np.full((1, 5), STOP), np.zeros((1, 0), np.int64),
                                   np.array([[STOP, 12, 40]])])
def test_a_sequence_that_stops_at_once_is_a_data_rejection(codes: np.ndarray) -> None:
    with pytest.raises(GenerationFailed, match="before its first speech token") as err:
        check_codes(codes, STOP)
    assert err.value.why == "no_speech_tokens" and err.value.data_error
    assert model_rejection(err.value, "clip", "generation_failed").reason == "generation_failed"


def test_speech_tokens_before_the_stop_pass_and_arm_the_regulator() -> None:
    control = LengthControl(100, STOP)
    out = (np.array([[5, 9, STOP]]), "latent")
    assert control.gpt_call(lambda: out)() is out and control.armed
    empty = LengthControl(100, STOP)
    with pytest.raises(GenerationFailed):
        empty.gpt_call(lambda: (np.array([[STOP, STOP]]), "latent"))()
    assert not empty.armed  # no regulator call will follow a refused output
