"""Adapters for the paper's models: one module per model family, heavy imports inside.

Each model has a catalog card (``models/catalog/<slug>.yaml``) from which the registry and
the graphs' role rows are derived; ``models/catalog/README.md`` says how to add one. Frozen
encoders and detectors (paper §4.2) implement ``embed(mode=…, audio=…, sample_rate=…,
frames=…, fps=…)`` returning a :class:`~madbench_common.models.roles.Embedding`. Shared
input recipes are in :mod:`.prep`; tiny-checkpoint builders in :mod:`.tiny`. The scene
taxonomy's data file is ``data/taxonomy.json`` here (:mod:`.taxonomy`).
"""
