"""Tiny randomly initialised checkpoints of the real architectures, laid out like the real ones.

Adapter tests and ``make image-test`` call a family's ``install_tiny(weights_root)`` to
put a tiny model (built from the upstream package's own classes and configs, random
weights, no downloads) where the real weights go, so the adapter's real offline
loading code and sampling loop run against it. Never used for results: the outputs
are noise from random weights. Tokenizers are built offline (:mod:`.vocab`).

Every tiny builder lives here, one module per family or group (``det``: the A-V and
audio detectors; ``eval``: the encoders; ``omni``, ``baichuan``, ``remote``: the omni
models; ``audio_lm``: DEAF's answer models); ``image.yaml``'s ``image_test.weights``
names one as ``madbench_common.models.tiny.<module>:<function>``.
"""
