"""Tiny randomly initialised checkpoints of the real architectures, laid out like the real ones.

Adapter tests and ``make image-test`` call a family's ``install_tiny(weights_root)`` to put
a tiny model (upstream's own classes and configs, random weights, no downloads) where the
real weights go, so the adapter's real offline loading and sampling run against it. Never
used for results: the outputs are noise. One module per family or group (``det``,
``eval``, ``omni``, ``baichuan``, ``remote``, ``audio_lm``…); ``image.yaml``'s
``image_test.weights`` names one as ``madbench_common.models.tiny.<module>:<function>``.
Tokenizers are built offline (:mod:`.vocab`).
"""
