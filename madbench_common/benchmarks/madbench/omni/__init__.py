"""Zero-shot omni models: parsing answers, option scores, the response cache, asking, sanity.

The generic machinery behind every omni-model stage (MADBench §4.2, §5; DEAF reuses it):

- :mod:`.parse` — generated text → a question's label, ``refusal`` or ``unparsed``;
- :mod:`.scoring` — an answer's first-token option log-probs → label probabilities;
- :mod:`.cache` — responses keyed by (model, image, prompt hash, inputs, mode, pairing);
- :mod:`.ask` — one question on one input through the cache, parsed and scored;
- :mod:`.sanity` — the modality check (silence / noise / shuffled video move the answers).

Prompts live in :mod:`madbench_common.benchmarks.madbench.prompts`; models implement
:class:`madbench_common.models.roles.OmniModel`.
"""
