"""Batched calls of the encoders and detectors: one model call for several inputs.

A feature stage groups its inputs into batches of the stage's ``batch`` (the card's
``gpu.batch``, default 1) and calls :func:`embed_batch`: the adapter's own
``embed_batch(inputs)`` where it has one, else its ``embed`` (or a reference encoder's
``encode``) once per input, so every adapter works at any batch size. An omni stage does
the same with :func:`answer_batch` (``answer_batch(requests)``, else ``answer``). An adapter that
batches for real must return, for each input, what ``embed`` returns for it alone, within
the tolerance its tests state (``EQUIVALENCE_ATOL``): it pads with per-item lengths and
attention masks where padded frames cannot reach the real ones, and groups inputs of one
length (:func:`equal_length_groups`) where padding would change a result (a group norm
over time, a whole-clip normalisation).

Numpy only: the stage code imports it without torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from madbench_common.models.roles import Embedding, InputSpec, OmniAnswer

__all__ = ["EQUIVALENCE_ATOL", "answer_batch", "embed_batch", "embed_each",
           "equal_length_groups", "map_groups"]

EQUIVALENCE_ATOL = 1e-5
"""The largest absolute difference, in float32, allowed between a batched adapter's output
for an input (features, a score, an option log-probability) and the same adapter's output
for that input alone (batch 1); an omni reply's text must be the same. Padding and
attention masks change the order of floating-point sums, not what is summed."""

EmbedInput = Mapping[str, Any]
"""The keyword arguments of one ``embed`` call: ``mode`` and, as the mode needs them,
``audio``/``sample_rate`` and ``frames``/``fps``."""


def embed_each(model: Any, inputs: Sequence[EmbedInput]) -> list[Embedding]:
    """``model.embed`` on each input in turn (batch 1); a model with ``encode`` only (a CPU
    reference encoder) gives its vector without a score or a recorded input."""
    embed = getattr(model, "embed", None)
    if embed is not None:
        return [embed(**dict(kwargs)) for kwargs in inputs]
    return [Embedding(np.asarray(model.encode(**dict(kwargs))), InputSpec())
            for kwargs in inputs]


def embed_batch(model: Any, inputs: Sequence[EmbedInput]) -> list[Embedding]:
    """One :class:`Embedding` per input, in order: the model's ``embed_batch`` where it has
    one and there is more than one input, else :func:`embed_each`."""
    batched = getattr(model, "embed_batch", None)
    if batched is None or len(inputs) < 2:
        return embed_each(model, inputs)
    out = list(batched(list(inputs)))
    if len(out) != len(inputs):
        raise RuntimeError(f"{getattr(model, 'slug', model)}: embed_batch returned "
                           f"{len(out)} embeddings for {len(inputs)} inputs")
    return out


def answer_batch(model: Any, requests: Sequence[Mapping[str, Any]]) -> list[OmniAnswer]:
    """One omni reply per request (the keyword arguments of ``OmniModel.answer``), in
    order: the model's ``answer_batch`` where it has one and there is more than one
    request, else ``answer`` on each in turn."""
    batched = getattr(model, "answer_batch", None)
    if batched is None or len(requests) < 2:
        return [model.answer(**dict(r)) for r in requests]
    out = list(batched(list(requests)))
    if len(out) != len(requests):
        raise RuntimeError(f"{getattr(model, 'slug', model)}: answer_batch returned "
                           f"{len(out)} replies for {len(requests)} requests")
    return out


def equal_length_groups(lengths: Sequence[int]) -> list[list[int]]:
    """Indices of ``lengths`` grouped by equal length, each group in input order, the
    groups in order of their first index: the batches a model that cannot pad runs."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(int(n), []).append(i)
    return list(groups.values())


def map_groups(groups: Sequence[Sequence[int]], run: Callable[[list[int]], Sequence[Any]],
               total: int) -> list[Any]:
    """``run(group)`` for each group of indices (one result per index, in the group's
    order), reassembled in index order ``0 .. total-1``."""
    out: list[Any] = [None] * total
    for group in groups:
        results = list(run(list(group)))
        if len(results) != len(group):
            raise RuntimeError(f"{len(results)} results for a group of {len(group)}")
        for i, result in zip(group, results):
            out[i] = result
    return out
