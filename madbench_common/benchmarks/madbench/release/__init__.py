"""Releasing a built benchmark: ``madbench export`` (Parquet + media + dataset card)."""
