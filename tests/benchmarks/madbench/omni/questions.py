"""The packaged MADBench questions the omni tests ask: binary, four-way and scene."""

from __future__ import annotations

from madbench_common.benchmarks.madbench.prompts import load_prompt

__all__ = ["BIN", "FOUR", "SC"]

BIN = load_prompt("P_bin").question("binary")
FOUR = load_prompt("P_4way").question("fourway")
SC = load_prompt("P_SC").question("scene")
