"""Zero-shot omni models: parsing answers, option scores, the response cache, asking, sanity.

The generic machinery behind every omni-model stage (MADBench §4.2, §5; DEAF reuses it):
:mod:`.parse` (text → label), :mod:`.scoring` (first-token log-probs → label
probabilities), :mod:`.cache`, :mod:`.ask` (one question through the cache, parsed and
scored) and :mod:`.sanity` (the modality check). Prompts live in
:mod:`madbench_common.benchmarks.madbench.prompts`; models implement
:class:`madbench_common.models.roles.OmniModel`.
"""
