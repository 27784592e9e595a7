"""``python -m madbench_common.cli``: the ``madbench`` command."""

from madbench_common.cli import run

run()
