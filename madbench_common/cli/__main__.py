"""``python -m madbench_common.cli``: the ``madbench`` command."""

from madbench_common.cli import run

if __name__ == "__main__":  # importing this module (check_imports walks every one) runs nothing
    run()
