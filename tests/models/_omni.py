"""Checks every transformers omni adapter passes on its tiny random model (Qwen, Gemma)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from madbench_common.benchmarks.madbench.omni.ask import Media, ask
from madbench_common.benchmarks.madbench.omni.parse import REFUSAL, UNPARSED
from madbench_common.benchmarks.madbench.omni.sanity import modality_sanity
from madbench_common.benchmarks.madbench.omni.scoring import label_probs
from madbench_common.core.store import FileStore
from madbench_common.models.answer_cache import ResponseCache
from tests.benchmarks.madbench.omni.questions import BIN, FOUR, SC
from tests.models.device import DEVICE, expected_dtype
from tests.models.tiny import tiny_root


def clip(seed: int, seconds: float = 2.0, video: bool = False, frames: int = 4) -> Media:
    """Tone plus noise at 22.05 kHz (the adapter resamples) and random frames."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(22050 * seconds)) / 22050
    audio = (0.2 * np.sin(2 * np.pi * (220 + 40 * seed) * t)
             + rng.normal(0, 0.02, t.size)).astype(np.float32)
    pixels = rng.integers(0, 255, (frames, 112, 144, 3), dtype=np.uint8) if video else None
    return Media(audio, 22050, pixels, 2.0 if video else 0.0)


def check_answer_position(model: Any) -> None:
    """Option log-probs from generate equal a separate forward pass's last position."""
    import torch

    m = clip(0)
    ans = model.answer(BIN.full_text, m.audio, m.sample_rate, choices=BIN.choices(),
                       max_new_tokens=4)
    assert ans.logits == "generate" and len(ans.options) == len(BIN.choices())
    batch = model.inputs(BIN.full_text, m.audio, m.sample_rate)
    with torch.inference_mode():
        last = model.model(**batch).logits[0, -1].float()
    logp = torch.log_softmax(last, -1)
    for opt in ans.options:
        assert opt.logprob == pytest.approx(float(logp[opt.token_id]), abs=1e-4)
    probs = label_probs(BIN, ans)
    assert probs is not None and sum(probs.probs.values()) == pytest.approx(1.0)
    assert 0.0 < probs.mass < 1.0


def check_four_way_and_scene(model: Any) -> None:
    m = clip(1, video=True)
    for q in (FOUR, SC):
        ans = model.answer(q.full_text, m.audio, m.sample_rate, m.frames, m.fps,
                           choices=q.choices(), max_new_tokens=3)
        probs = label_probs(q, ans)
        assert probs is not None and len(probs.probs) == len(q.labels)


def check_parsed_never_guessed(model: Any) -> None:
    out = ask(model, BIN, inputs=("x",), mode="A", load=lambda: clip(3), max_new_tokens=6)
    assert out.parsed in ("fake", "real", REFUSAL, UNPARSED)
    assert not out.excluded  # logits exist, so even an unparsed answer has a score


def check_cache(model: Any, tmp_path: Path) -> None:
    cache = ResponseCache(FileStore(str(tmp_path)))
    first = ask(model, BIN, inputs=("a",), mode="A", load=lambda: clip(4), cache=cache)
    again = ask(model, BIN, inputs=("a",), mode="A", load=lambda: clip(99), cache=cache)
    assert cache.hits == 1 and cache.misses == 1 and again.cached
    assert again.answer == first.answer


def check_sanity(model: Any) -> None:
    clips = [clip(i, video=True) for i in range(3)]
    checks = {c.name: c for c in modality_sanity(model, clips, BIN, SC)}
    assert set(checks) == {"silence", "noise", "shuffled_video"}
    assert all(c.passed and c.max_change > 1e-6 for c in checks.values()), checks


def model_fixture(adapter: Any, install: Callable[[Path], Any]) -> Any:
    """A test module's ``model`` fixture: ``adapter`` on the tiny checkpoint that
    ``install`` writes into a fresh weights root."""

    @pytest.fixture(scope="module", name="model")
    def model(tmp_path_factory: pytest.TempPathFactory) -> Any:
        return adapter(device=DEVICE, root=tiny_root(tmp_path_factory, install))

    return model


def require_omni_image(attr: str, what: str) -> None:
    """Skip the calling test module outside the omni-qwen25omni image's venv: torchvision,
    torch and a transformers that has ``attr`` (``what`` says which model needs it)."""
    reason = "run make adapter-test IMAGE=omni-qwen25omni"
    pytest.importorskip("torchvision", reason=reason)
    pytest.importorskip("torch", reason=reason)
    tf = pytest.importorskip("transformers", reason=reason)
    if not hasattr(tf, attr):
        pytest.skip(f"transformers without {what}: {reason}", allow_module_level=True)


class OmniChecks:
    """The checks every omni adapter passes on its tiny checkpoint; a test module subclasses
    this as ``Test…`` with its adapter class, the builder of its tiny checkpoint and the
    transformers class the adapter loads, beside a ``model`` fixture."""

    adapter: Any = None
    install: Callable[[Path], Any]
    model_class = ""

    def test_answer_position(self, model: Any) -> None:
        check_answer_position(model)

    def test_generated_text_is_parsed_never_guessed(self, model: Any) -> None:
        check_parsed_never_guessed(model)

    def test_cache_serves_a_rerun(self, model: Any, tmp_path: Path) -> None:
        check_cache(model, tmp_path)

    def test_modality_sanity_silence_noise_and_shuffled_video(self, model: Any) -> None:
        check_sanity(model)

    def test_missing_weights_name_the_fix(self, tmp_path: Path) -> None:
        from madbench_common.core.errors import ConfigError

        with pytest.raises(ConfigError, match="madbench weights fetch --image omni-qwen25omni"):
            self.adapter(device=DEVICE, root=tmp_path)

    def test_loads_straight_onto_the_device(self, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
        """``from_pretrained`` gets the device (``device_map``): no host copy of the model
        first."""
        import torch
        import transformers

        full = getattr(transformers, self.model_class)
        self.install(tmp_path)
        seen: list[dict[str, Any]] = []
        load = full.from_pretrained

        def spy(*a: Any, **k: Any) -> Any:
            seen.append(k)
            return load(*a, **k)

        monkeypatch.setattr(full, "from_pretrained", spy)
        model = self.adapter(device=DEVICE, root=tmp_path)
        assert seen[0]["device_map"] == torch.device(DEVICE)
        assert {p.device.type for p in model.model.parameters()} == {model.device.type}

    def test_loads_in_the_cards_dtype(self, model: Any) -> None:
        """float32 on the CPU; on a GPU the dtype the catalog card declares (bf16)."""
        assert str(model.model.dtype) == f"torch.{expected_dtype(model.slug)}"
