"""DEAF: the acoustic-faithfulness benchmark for audio language models, a second pipeline.

DEAF (Xiong et al., arXiv 2603.18048; ``../shared/papers/deaf.txt``) asks whether audio
language models hear the audio or only read its words: three conflict types (§2.1: ESC,
BSC, SIC), three levels of textual interference (§2.3), an LLM judge labelling answers
Correct / Trap / Other (§2.4), and the metrics Acc, ASS, ARS, EDI and Δ ARS (§2.5).
Modules in pipeline order: ``design``, ``sentences``, ``clip_plan`` (which clips),
``envlib`` (the background library; the CPU voices and prosody that speak the clips are
model code, ``models.reference.deaf_voices``/``deaf_prosody``), ``prompts``, ``trials``,
``judge``, ``metrics``, ``report``; ``graph`` declares the pipeline (``madbench deaf run``).
"""

DESCRIPTION = "DEAF: do audio language models hear the audio or read its words"
"""What the benchmark is, in one line (its row of
:data:`madbench_common.cli.pipelines.PIPELINES`)."""
