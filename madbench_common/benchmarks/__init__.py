"""The benchmarks this platform runs, one package each: :mod:`.madbench` (MADBench, 2026)
and :mod:`.deaf` (DEAF). Each holds its graph, row types, stages and evaluation, and is
named in :data:`madbench_common.cli.pipelines.PIPELINES`. They build on the engine
(``pipeline/``), the models (``models/``) and the storage and media layers, and do not
import each other (``tests/test_layers.py``)."""
