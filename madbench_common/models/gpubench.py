"""``madbench gpu-bench``: per-item GPU time and memory of each model, measured.

Compute does not depend on the weights: each model's full-size architecture is built with
random weights from the release's configuration (the card's ``arch``) and its production
adapter runs on the demo clips at its stage's batch size (``gpu.batch``). Per item it
records the median seconds of warm runs (decoding plus the call; the call alone beside),
peak GPU memory, dtype, batch, device, torch/CUDA, commit and date.

Only a full-size CUDA run is a measurement (``status: measured``, :func:`write_measured`).
``tiny`` runs the same path on the image test's tiny checkpoint, on the CPU in the main
suite, so it cannot rot; its figures are never written. A model whose packages, offline
configuration or full-size builder is missing is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib
import inspect
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from madbench_common.core.environ import environ
from madbench_common.core.errors import ConfigError, EnvironmentMissing
from madbench_common.core.types import Audio, Frames
from madbench_common.models import batching
from madbench_common.models.catalog import UNAVAILABLE, Card, cards

__all__ = ["BenchItem", "BenchRow", "bench_model", "demo_items", "gpu_bench", "rows_json",
           "write_measured"]

ROOT = Path(__file__).resolve().parents[2]
DEMO_CLIPS = ROOT / "data" / "demo" / "clips"
"""The demo corpus's clips (a checkout's ``data/``; not in the package or the images)."""
RATE = 16000
_PROMPT = "Is the audio in this clip real or fake? Answer Yes or No."
_CATALOG = Path(__file__).resolve().parent / "catalog"


@dataclass(frozen=True)
class BenchItem:
    """One demo clip as the stages hand it to a model: mono audio, RGB frames."""

    name: str
    audio: Audio
    frames: Frames
    fps: float


@dataclass(frozen=True)
class BenchRow:
    """One model's result (``status``: ``measured`` on CUDA at full size, ``timed`` for any
    other run, ``skipped`` or ``failed`` with the ``reason``)."""

    slug: str
    status: str
    reason: str = ""
    seconds_per_item: float | None = None
    """Median over the warm runs of an item's wall time as a stage spends it: decoding the
    clip, then the adapter's call (what ``madbench plan`` sizes shards with)."""
    model_seconds_per_item: float | None = None
    """The adapter's call alone (the GPU's share)."""
    peak_gpu_gb: float | None = None
    dtype: str = ""
    batch: int = 1
    device: str = ""
    device_name: str = ""
    torch: str = ""
    cuda: str = ""
    commit: str = ""
    date: str = ""
    items: int = 0
    runs: int = 0
    tiny: bool = False
    shape: str = ""
    """``full`` (the release's configuration) or ``tiny`` (the image test's checkpoint)."""
    run_seconds: list[float] = field(default_factory=list)


def demo_items(count: int, folder: Path = DEMO_CLIPS, fps: float = 2.0,
               size: int = 224) -> list[BenchItem]:
    """The first ``count`` demo clips, decoded once (16 kHz audio, frames at ``fps``)."""
    from madbench_common.media.audio import decode_audio
    from madbench_common.media.mux import sample_frames

    clips = sorted(folder.glob("*.mp4"))[:count]
    if not clips:
        raise ConfigError(f"no demo clips in {folder} (gpu-bench runs from a checkout)")
    out = []
    for clip in clips:
        frames, got = sample_frames(clip, fps=fps, size=size, max_frames=32)
        out.append(BenchItem(clip.stem, decode_audio(clip, RATE), frames, got))
    return out


def _call(model: Any, role: str, item: BenchItem) -> Any:
    """The call a stage makes for one item, by the model's role."""
    a, f, fps = item.audio, item.frames, item.fps
    calls: dict[str, Callable[[], Any]] = {
        "encoder": lambda: model.encode(mode=_mode(model), audio=a, sample_rate=RATE,
                                        frames=f, fps=fps),
        "detector": lambda: model.score(a, RATE, frames=f, fps=fps),
        "omni": lambda: model.answer(_PROMPT, a, RATE, frames=f, fps=fps,
                                     choices=("Yes", "No"), max_new_tokens=8),
        "separator": lambda: model.separate(a, RATE),
        "vad": lambda: model.segments(a, RATE),
        "asr": lambda: model.transcribe(a, RATE),
        "speaker_embedder": lambda: model.embed(a, RATE),
        "audio_tagger": lambda: model.tag(a, RATE),
        "audio_text_scorer": lambda: model.score_texts(a, RATE, ["speech", "rain", "music"]),
        "scene_labeller": lambda: model.describe(f, fps, hint="rain on a busy street"),
        "face_cropper": lambda: model.crop(f, fps, size=96),
        "speech_generator": lambda: model.generate(
            sample_rate=RATE, duration=4.0, ref_audio=a[:3 * RATE], ref_text="a short test",
            text="the quick brown fox jumps over the lazy dog", source_audio=a[:4 * RATE]),
        "env_generator": lambda: model.generate(
            sample_rate=RATE, duration=4.0, prompt="rain on a window", frames=f, fps=fps,
            source_env=a[:4 * RATE]),
    }
    if role not in calls:
        raise EnvironmentMissing(f"gpu-bench has no item call for role {role!r}")
    return calls[role]()


def _mode(model: Any) -> str:
    """The mode a feature stage asks of an encoder: audio where it has it, else A-V."""
    modes = getattr(model, "modes", ("A",))
    return "AV" if "AV" in modes and "A" not in modes else "A"


def _batched(model: Any, role: str, items: Sequence[BenchItem], batch: int) -> None:
    """Run ``items`` as the stage would at ``batch`` items per call, through the stages' own
    batching (:mod:`madbench_common.models.batching`): the adapter's ``embed_batch`` /
    ``answer_batch`` where it has one, else one call per item."""
    if batch > 1 and role in ("encoder", "detector") and (hasattr(model, "embed")
                                                         or hasattr(model, "encode")):
        for i in range(0, len(items), batch):
            batching.embed_batch(model, [
                {"mode": _mode(model), "audio": c.audio, "sample_rate": RATE,
                 "frames": c.frames, "fps": c.fps} for c in items[i:i + batch]])
        return
    if batch > 1 and role == "omni":
        for i in range(0, len(items), batch):
            batching.answer_batch(model, [
                {"prompt": _PROMPT, "audio": c.audio, "sample_rate": RATE,
                 "frames": c.frames, "fps": c.fps, "choices": ("Yes", "No"),
                 "max_new_tokens": 8} for c in items[i:i + batch]])
        return
    for item in items:
        _call(model, role, item)


def _commit() -> str:
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        return subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    return os.environ.get("MADBENCH_COMMIT", "unknown")


def _image_tiny_builder(card: Card) -> str:
    """``image.yaml``'s ``image_test.weights`` of the card's image ('' where none)."""
    folder = Path(os.environ.get("MADBENCH_IMAGES_DIR") or ROOT / "images")
    path = folder / card.image / "image.yaml"
    if not path.is_file():
        return ""
    spec = yaml.safe_load(path.read_text()) or {}
    return str((spec.get("image_test") or {}).get("weights") or "")


def _builder(card: Card, tiny: bool) -> tuple[str, dict[str, Any]]:
    """The function that writes the checkpoint gpu-bench runs, and its arguments; a reason
    (``EnvironmentMissing``) where the model cannot be built."""
    arch = card.arch
    if tiny:
        if card.reference and card.image == "reference-cpu":
            return "", {}
        target = _image_tiny_builder(card)
        if not target:
            raise EnvironmentMissing(f"image {card.image!r} declares no tiny checkpoint "
                                     "(image.yaml image_test.weights)")
        return f"madbench_common.{target}" if not target.startswith("madbench_common.") \
            else target, {}
    if card.reference:
        raise EnvironmentMissing("a CPU reference or tiny test model: nothing to measure on "
                                 "a GPU (gpu-bench --tiny runs it)")
    if arch.get("config") == UNAVAILABLE or not arch.get("commit"):
        raise EnvironmentMissing(f"arch: {arch.get('config', 'no source')}; "
                                 f"{arch.get('reason', '')}".strip())
    if not arch.get("builder"):
        raise EnvironmentMissing(f"arch: the release's configuration was read ({arch['repo']} "
                                 f"{arch['file']}) but no builder writes it at full size yet")
    return f"madbench_common.{arch['builder']}", dict(arch.get("args") or {})


def _resolve(target: str) -> Callable[..., Any]:
    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        raise EnvironmentMissing(f"the builder {target} needs the Python module "
                                 f"{exc.name!r}, which this interpreter lacks") from None


def _weights_env(root: Path) -> contextlib.AbstractContextManager[None]:
    """The weights root at ``root``, offline: a built checkpoint is all an adapter reads."""
    return environ({"MADBENCH_WEIGHTS": str(root), "HF_HUB_OFFLINE": "1",
                    "TRANSFORMERS_OFFLINE": "1"})


def _torch_facts(device: str) -> dict[str, Any]:
    import torch

    cuda = device.startswith("cuda")
    return {"torch": torch.__version__, "cuda": str(torch.version.cuda or "") if cuda else "",
            "device_name": torch.cuda.get_device_name(0) if cuda else "cpu"}


def _model_dtype(model: Any) -> str:
    """The dtype of the adapter's torch module; float32 for the numpy references."""
    for name in ("model", "net", "network", "pipe", "thinker"):
        inner = getattr(model, name, None)
        dtype = getattr(inner, "dtype", None)
        if dtype is not None:
            return str(dtype).removeprefix("torch.")
    return "float32"


def bench_model(card: Card, items: Sequence[BenchItem], *, device: str, tiny: bool,
                runs: int = 3) -> BenchRow:
    """Build ``card``'s model (full size, or the image test's tiny one with ``tiny``), run
    its adapter over ``items`` once to warm up and ``runs`` times more, and time it."""
    batch = int(card.gpu[0].get("batch", 1)) if card.gpu else 1
    base: dict[str, Any] = {"slug": card.slug, "batch": batch, "tiny": tiny,
                            "shape": "tiny" if tiny else "full", "device": device}
    if not card.arch.get("repo"):  # a hosted API, a placeholder, a CPU-only graph
        return BenchRow(status="skipped", reason=str(card.arch.get("reason", "no arch")),
                        **base)
    try:
        with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp, _weights_env(Path(tmp)):
            try:
                model = _build(card, tiny, Path(tmp))
            except ImportError as exc:  # a builder's upstream import: the image has it
                what = f"the Python module {exc.name!r}" if exc.name else str(exc).strip()
                return BenchRow(status="skipped", reason=f"needs {what}, which this "
                                f"interpreter lacks (it runs in image {card.image!r})", **base)
            except ConfigError as exc:  # no config, no builder, a package not installed
                return BenchRow(status="skipped", reason=str(exc), **base)
            try:
                return _timed(card, model, items, device=device, runs=runs, base=base)
            finally:
                del model
                _free(device)
    except Exception as exc:  # one model's failure is its row, never the whole run's
        return BenchRow(status="failed", reason=f"{type(exc).__name__}: {exc}"[:500], **base)


def _build(card: Card, tiny: bool, root: Path) -> Any:
    """Write the checkpoint under ``root`` (the weights root) and load the adapter on it."""
    from madbench_common.models.registry import load_model

    target, args = _builder(card, tiny)
    if target:
        build = _resolve(target)
        params = inspect.signature(build).parameters
        if not any(p.kind is p.VAR_KEYWORD for p in params.values()) and set(args) - set(params):
            raise EnvironmentMissing(f"{target} does not take {sorted(set(args) - set(params))}")
        build(root, **args)
    return load_model.__wrapped__(card.slug)  # not cached: freed after its row


def _free(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


def _timed(card: Card, model: Any, items: Sequence[BenchItem], *, device: str, runs: int,
           base: dict[str, Any]) -> BenchRow:
    import torch

    cuda = device.startswith("cuda")

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    with torch.inference_mode():
        _batched(model, card.role, items, base["batch"])  # warm-up: kernels, caches
        sync()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        seconds, model_seconds = [], []
        for _ in range(runs):  # a stage decodes each item, then calls the model
            start = time.perf_counter()
            fresh = demo_items(len(items))
            decoded = time.perf_counter()
            _batched(model, card.role, fresh, base["batch"])
            sync()
            seconds.append((time.perf_counter() - start) / len(items))
            model_seconds.append((time.perf_counter() - decoded) / len(items))
    peak = torch.cuda.max_memory_allocated() / 1e9 if cuda else None
    measured = cuda and not base["tiny"]
    return BenchRow(status="measured" if measured else "timed",
                    seconds_per_item=round(statistics.median(seconds), 6),
                    model_seconds_per_item=round(statistics.median(model_seconds), 6),
                    peak_gpu_gb=None if peak is None else round(peak, 3),
                    dtype=_model_dtype(model), commit=_commit(),
                    date=datetime.date.today().isoformat(), items=len(items), runs=runs,
                    run_seconds=[round(s, 6) for s in seconds], **_torch_facts(device),
                    **base)


def gpu_bench(slugs: Sequence[str] = (), *, device: str = "cuda", tiny: bool = False,
              clips: int = 4, runs: int = 3) -> list[BenchRow]:
    """:func:`bench_model` for each card named (every card where none is)."""
    known = cards()
    if unknown := sorted(set(slugs) - set(known)):
        raise ConfigError(f"unknown model(s) {unknown}; see madbench_common/models/catalog")
    if device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise EnvironmentMissing("--device cuda: torch sees no GPU here (--device cpu "
                                     "--tiny runs the CPU path)")
    items = demo_items(clips)
    return [bench_model(known[s], items, device=device, tiny=tiny, runs=runs)
            for s in (slugs or sorted(known))]


def write_measured(rows: Sequence[BenchRow], folder: Path = _CATALOG) -> list[str]:
    """Write each ``measured`` row into its card's ``gpu`` block (``status: measured``,
    ``gpu_mem_gb``, ``gpu_s_per_item`` and how); refuses any other row. The slugs written."""
    written = []
    for row in rows:
        if row.status != "measured" or row.tiny or not row.device.startswith("cuda"):
            raise ConfigError(f"{row.slug}: only a full-size CUDA measurement is written into "
                              f"a card (this row is {row.status!r} on {row.device!r})")
        path = folder / f"{row.slug}.yaml"
        text = path.read_text()
        head = "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))
        raw = yaml.safe_load(text)
        blocks = raw.get("gpu")
        if not blocks:
            raise ConfigError(f"{path}: no gpu block to record the measurement in")
        block = blocks[0] if isinstance(blocks, list) else blocks
        assert row.seconds_per_item is not None and row.peak_gpu_gb is not None
        block.update(status="measured", gpu_mem_gb=round(row.peak_gpu_gb + 0.05, 1),
                     gpu_s_per_item=round(row.seconds_per_item, 4),
                     measured={"device": row.device_name, "torch": row.torch,
                               "cuda": row.cuda, "dtype": row.dtype, "batch": row.batch,
                               "commit": row.commit, "date": row.date, "runs": row.runs})
        path.write_text(head + yaml.safe_dump(raw, sort_keys=False, width=95,
                                              allow_unicode=True))
        written.append(row.slug)
    return written


def rows_json(rows: Sequence[BenchRow]) -> list[dict[str, Any]]:
    """The rows as JSON objects (``--json``)."""
    return [asdict(r) for r in rows]
