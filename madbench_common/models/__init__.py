"""Adapters for the paper's models: one module per model family, heavy imports inside.

Each model has a catalog card (``models/catalog/<slug>.yaml``) from which the registry and
the graphs' role rows are derived. Adding a model: ``models/catalog/README.md`` lists the
files to write and the commands that generate the rest.

Frozen encoders and detectors (paper §4.2) implement ``embed(mode=…, audio=…,
sample_rate=…, frames=…, fps=…)`` returning a :class:`~madbench_common.models.roles.Embedding`
(features, the exact :class:`~madbench_common.models.roles.InputSpec`, a detector's P(fake));
a card whose slot is ``features_<slug>`` gives them one feature stage. Shared input recipes
(resampling, repeat-padding, A-V fusion) are in :mod:`.prep`; tiny-checkpoint builders for
the image and adapter tests in :mod:`.tiny`.
"""
