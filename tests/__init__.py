"""MADBench tests: each folder mirrors a folder of madbench_common."""
