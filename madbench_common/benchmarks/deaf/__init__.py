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
* :mod:`~madbench_common.benchmarks.deaf.plan` — which clips to synthesise (Table 1 counts);
* :mod:`~madbench_common.benchmarks.deaf.envlib` — the background library; the CPU references
  that speak the clips are model code (cards ``ref-deaf-*``):
  :mod:`~madbench_common.models.reference.deaf_voices` and
  :mod:`~madbench_common.models.reference.deaf_prosody`;
* :mod:`~madbench_common.benchmarks.deaf.prompts`, :mod:`~madbench_common.benchmarks.deaf.trials` —
questions,
  misleading prompts and the trials (test and matched-control queries) per level;
* :mod:`~madbench_common.benchmarks.deaf.judge`, :mod:`~madbench_common.benchmarks.deaf.metrics`,
  :mod:`~madbench_common.benchmarks.deaf.report` — verdicts, metrics and the paper's tables;
* :mod:`~madbench_common.benchmarks.deaf.graph` — the graph, declared once, run by
  ``madbench deaf run`` and compiled to ``workflows/deaf.yaml``.
"""

DESCRIPTION = "DEAF: do audio language models hear the audio or read its words"
"""What the benchmark is, in one line (its row of
:data:`madbench_common.cli.pipelines.PIPELINES`)."""
