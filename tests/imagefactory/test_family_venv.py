"""``images/family-venv.sh``, the one builder of ``.venvs/<slug>`` (``make adapter-test``,
``make demo-deaf``): it installs the image's effective lock, the image's own pins on its
bases', not ``requirements.lock`` alone (which leaves the bases' pins out, so uv's
--require-hashes refused it: ``make demo-deaf`` failed on a fresh machine). A stand-in
``uv`` records what it is asked; nothing is downloaded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_UV = """#!/usr/bin/env bash
set -euo pipefail
echo "$*" >> "$UV_LOG"
if [[ $1 == venv ]]; then
  dest=${@: -1}; mkdir -p "$dest/bin"; ln -sf "$(command -v python3)" "$dest/bin/python"
elif [[ $* == *" -r "* ]]; then
  args=("$@"); for i in "${!args[@]}"; do
    if [[ ${args[$i]} == -r ]]; then cp "${args[$((i + 1))]}" "$UV_LOG.req"; fi; done
fi
"""


def _build(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    uv = tmp_path / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    env = {**os.environ, "UV": str(uv), "UV_LOG": str(tmp_path / "uv.log"),
           "PY": sys.executable, "MADBENCH_VENVS": str(tmp_path / "venvs"),
           "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", str(ROOT / "images" / "family-venv.sh"), "deaf-tf5",
                           sys.executable], env=env, text=True, capture_output=True,
                          timeout=120)


def test_the_venv_is_built_from_the_effective_lock_once(tmp_path: Path) -> None:
    done = _build(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "venvs" / "deaf-tf5")
    installed = (tmp_path / "uv.log.req").read_text()
    own = (ROOT / "images" / "deaf-tf5" / "requirements.lock").read_text()
    assert "\ntorch==" in installed and "\ntorch==" not in own  # the torch base's pin
    assert "\ntransformers==" in installed and "--hash=sha256:" in installed
    log = (tmp_path / "uv.log").read_text().splitlines()
    assert any("--require-hashes --no-deps -r" in line for line in log)
    again = _build(tmp_path)  # the same locked set: the venv is kept
    assert again.returncode == 0 and (tmp_path / "uv.log").read_text().splitlines() == log
