"""Evaluation of MADBench: tasks, heads, metrics, bootstrap, reports and bring-your-own-model."""

from __future__ import annotations

__all__: list[str] = []
