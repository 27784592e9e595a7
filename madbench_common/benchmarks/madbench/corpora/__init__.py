"""Other datasets in their own release layouts, for cross-dataset evaluation.

``load_corpus("<name>:<path>")`` reads one of :data:`LOADERS`: ``madbench`` (a run's
``assemble`` samples: ``madbench:<store>/<run_id>``), ``fakeavceleb``, ``asvspoof2019_la``,
``asvspoof5`` and ``in_the_wild``. ``madbench eval --train A --test B`` fits heads on one
corpus's training split and scores another's test split (:mod:`.cross`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from madbench_common.benchmarks.madbench.corpora.asvspoof import (
    load_asvspoof5,
    load_asvspoof2019_la,
)
from madbench_common.benchmarks.madbench.corpora.base import Corpus, log_rejections
from madbench_common.benchmarks.madbench.corpora.madbench import load_madbench
from madbench_common.benchmarks.madbench.corpora.wild import load_fakeavceleb, load_in_the_wild
from madbench_common.core.errors import ConfigError

__all__ = ["LOADERS", "Corpus", "load_corpus"]

LOADERS: dict[str, Callable[..., Corpus]] = {
    "madbench": load_madbench,
    "fakeavceleb": load_fakeavceleb,
    "asvspoof2019_la": load_asvspoof2019_la,
    "asvspoof5": load_asvspoof5,
    "in_the_wild": load_in_the_wild,
}


def load_corpus(spec: str, **options: Any) -> Corpus:
    """``<name>:<path>`` → the loaded corpus (``options`` go to loaders that take them)."""
    name, sep, path = spec.partition(":")
    if not sep or name not in LOADERS or not path:
        raise ConfigError(f"corpus {spec!r}: expected <name>:<path> with name one of "
                          f"{sorted(LOADERS)}")
    loader = LOADERS[name]
    takes = inspect.signature(loader).parameters
    accepted = {k: v for k, v in options.items() if v is not None and k in takes}
    corpus = loader(path, **accepted)
    log_rejections(corpus)
    return corpus
