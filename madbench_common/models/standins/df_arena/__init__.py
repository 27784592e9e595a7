"""STAND-IN remote code for ``Speech-Arena-2025/DF_Arena_1B_V_1`` (see the package docstring).

The release's files (``configuration_antispoofing.py``, ``feature_extraction_antispoofing.py``,
``backbone.py``, ``conformer.py``, ``modeling_antispoofing.py``,
``pipeline_antispoofing.py``): ``DF_Arena_1B_Antispoofing.forward(input_values)`` returns
the plain dict ``{"logits": backbone(input_values)}``; the backbone builds its XLS-R from
``Wav2Vec2Config.from_pretrained("facebook/wav2vec2-xls-r-1b")`` and unsqueezes a 1-D
waveform; the feature extractor tiles to 64,600 samples and returns
``{"input_values": torch.Tensor(audio)}`` (1-D). The stand-ins keep those interfaces and
replace the 4-block Conformer head with a small class-token head.
"""
