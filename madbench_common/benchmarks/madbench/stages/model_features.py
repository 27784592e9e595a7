"""Feature stage of one paper model (``features_<slug>``): frozen features, exact inputs, scores.

One such stage per frozen encoder or pretrained detector of paper §4.2 runs on the model's
own image (its ``full`` profile sets ``model``); without a model it writes an empty
manifest. Per sample it writes the FeatureRows of every input mode and pairing, as
:class:`~madbench_common.benchmarks.madbench.stages.features.FeatureStage` does, plus the
exact input the adapter's ``embed`` reports and, for detectors, the native score that
``scores_<slug>`` turns into ScoreRows. Features are cached outside the run, keyed by the
model's identity (image, adapter code, weights pins, dtype), the frame parameters, the
mode and the input's sha256, so any change to what computes them misses the cache.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from functools import cached_property
from typing import Any

import numpy as np

from madbench_common.benchmarks.madbench.rows import FeatureRow, SampleRow
from madbench_common.benchmarks.madbench.stages.features import FeatureStage
from madbench_common.models.batching import embed_batch, embed_each
from madbench_common.models.registry import load_model
from madbench_common.models.roles import Embedding, InputSpec
from madbench_common.pipeline.paramspec import param

__all__ = ["ModelFeatureStage"]

log = logging.getLogger("madbench")
_FRAME_PARAMS = ("fps", "frame_size", "max_frames")


def _spec_columns(spec: InputSpec) -> dict[str, Any]:
    return {f.name: getattr(spec, f.name) for f in fields(InputSpec)}


class ModelFeatureStage(FeatureStage):
    """``samples`` → ``features`` for one paper model (params: model, modes, pairings, frames)."""

    @dataclass(frozen=True)
    class Params(FeatureStage.Params):
        models: list[str] | None = param(None, optional=True, doc="models run in turn (a stage "
                                         "of several, features_references); unset: the one "
                                         "model")
        fps: float = param(4.0, optional=True, unit="fps", paper="§4.2", doc="frame rate fed "
                           "to the model (per model: its card's frames; each adapter then "
                           "follows its upstream recipe)")
        frame_size: int = param(224, optional=True, unit="px (shorter side)",
                                doc="size of the decoded frames")

    p: Params

    @cached_property
    def model_slug(self) -> str:
        return self.p.model or self.ctx.stage.model

    @cached_property
    def model_slugs(self) -> list[str]:
        """The stage's models: its ``models`` list where it has one (a stage that runs several
        models in turn, e.g. ``features_references``), else its one model, if any."""
        if self.p.models is not None:
            return list(self.p.models)
        return [self.model_slug] if self.model_slug else []

    def plan(self) -> list[str]:
        if not self.model_slugs:
            log.info("%s: no model in this profile (workflows/full.yaml sets one); nothing to do",
                     self.ctx.stage.name)
            return []
        return super().plan()

    def run_items(self, items: Sequence[str]) -> list[FeatureRow]:
        if not items:
            return []
        if self.p.models is None:
            return super().run_items(items)
        rows = []
        for slug in self.model_slugs:
            self.__dict__["encoder"] = load_model(slug)  # the cached encoder, model by model
            rows += super().run_items(items)
        return rows

    @cached_property
    def prep_hash(self) -> str:
        params = {k: self.ctx.params.get(k) for k in _FRAME_PARAMS}
        return hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()[:12]

    def cache_key(self, mode: str, sha: str) -> str:
        return (f"_cache/features/{self.encoder.slug}-{self.encoder.version}/"
                f"{self.identity}/{self.prep_hash}/{mode}/{sha}.npz")

    def _encoded(self, sha: str, mode: str, s: SampleRow, video: SampleRow) -> dict[str, Any]:
        emb = self._embedding(sha, mode, s, video)
        return {"features": tuple(float(v) for v in emb.vector), "score": emb.score,
                "score_kind": emb.score_kind, **_spec_columns(emb.spec)}

    def _embedding(self, sha: str, mode: str, s: SampleRow, video: SampleRow) -> Embedding:
        store, key = self.ctx.run.store, self.cache_key(mode, sha)
        if store.exists(key):
            return _load(store.get_bytes(key))
        emb = self._pending.pop((mode, sha), None)
        emb = self._encode(mode, s, video) if emb is None else emb
        store.put_bytes(key, _dump(emb))
        return emb

    def _call(self, kwargs: Mapping[str, Any]) -> Embedding:
        """The adapter's ``embed`` (a reference encoder's ``encode``: features only)."""
        return embed_each(self.encoder, [kwargs])[0]

    def _call_batch(self, inputs: Sequence[Mapping[str, Any]]) -> list[Any]:
        return embed_batch(self.encoder, inputs)

    def _checked(self, out: Any) -> Embedding:
        emb: Embedding = out
        vec = np.asarray(emb.vector, dtype=np.float32).reshape(-1)
        if vec.size == 0 or not np.isfinite(vec).all():
            raise ValueError("model returned an empty, NaN or inf feature vector")
        if emb.score is not None and not np.isfinite(emb.score):
            raise ValueError("model returned a NaN or inf score")
        return Embedding(vec, emb.spec, emb.score, emb.score_kind)


def _dump(emb: Embedding) -> bytes:
    meta = {"spec": asdict(emb.spec), "score": emb.score, "score_kind": emb.score_kind}
    buf = io.BytesIO()
    np.savez(buf, vector=emb.vector, meta=np.array(json.dumps(meta)))
    return buf.getvalue()


def _load(data: bytes) -> Embedding:
    with np.load(io.BytesIO(data)) as z:
        meta = json.loads(str(z["meta"]))
        return Embedding(z["vector"].astype(np.float32), InputSpec(**meta["spec"]),
                         meta["score"], meta["score_kind"])
