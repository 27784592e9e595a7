"""One module per upstream model family: each calls the real upstream API with its real
loading code and implements a role of :mod:`madbench_common.models.roles`. A model's card
(``models/catalog/<slug>.yaml``) names its class here; the shared pre- and
post-processing they use lives one level up (``models/prep``, ``av_prep``,
``detector_base``, ``speech_prep``, ``_hf``, …)."""
