"""DEAF: the acoustic-faithfulness benchmark for audio language models, a second pipeline.

DEAF (Xiong et al., arXiv 2603.18048; ``../shared/papers/deaf.txt``) asks whether audio
language models hear the audio or only read its words: three conflict types (§2.1: ESC,
BSC, SIC), three levels of textual interference (§2.3), an LLM judge labelling answers
Correct / Trap / Other (§2.4), and the metrics Acc, ASS, ARS, EDI and Δ ARS (§2.5).
Modules in pipeline order: ``design``, ``sentences``, ``clip_plan`` (which clips),
``prosody``/``voices``/``envlib`` (CPU references that make them), ``prompts``, ``trials``,
``judge``, ``metrics``, ``report``; ``graph`` declares the pipeline (``madbench deaf run``).
"""
