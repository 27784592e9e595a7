"""DEAF: the acoustic-faithfulness benchmark for audio language models, a second pipeline.

DEAF (Xiong et al., arXiv 2603.18048; ``../shared/papers/deaf.txt``) asks whether audio
language models hear the audio or only read its words. Three conflict types (§2.1):
emotion–semantic (ESC), background-sound–semantic (BSC) and speaker-identity–semantic
(SIC); three levels of textual interference (§2.3); an LLM judge labelling answers
Correct / Trap / Other (§2.4); and the metrics Acc, ASS, ARS, EDI and Δ ARS (§2.5).

Modules, in pipeline order:

* :mod:`~madbench_common.benchmarks.deaf.design` — conditions, environments, pairings, voice
profiles;
* :mod:`~madbench_common.benchmarks.deaf.sentences` — the sentence sets (committed, or EMIS);
* :mod:`~madbench_common.benchmarks.deaf.clip_plan` — which clips to synthesise (Table 1 counts);
* :mod:`~madbench_common.benchmarks.deaf.prosody`, :mod:`~madbench_common.benchmarks.deaf.voices`,
  :mod:`~madbench_common.benchmarks.deaf.envlib` — the CPU references that synthesise them;
* :mod:`~madbench_common.benchmarks.deaf.prompts`, :mod:`~madbench_common.benchmarks.deaf.trials` —
questions,
  misleading prompts and the trials (test and matched-control queries) per level;
* :mod:`~madbench_common.benchmarks.deaf.judge`, :mod:`~madbench_common.benchmarks.deaf.metrics`,
  :mod:`~madbench_common.benchmarks.deaf.report` — verdicts, metrics and the paper's tables;
* :mod:`~madbench_common.benchmarks.deaf.graph` — the graph, declared once, run by
  ``madbench deaf run`` and compiled to ``workflows/deaf.yaml``.
"""
