#!/usr/bin/env bash
# images/family-venv.sh <slug> <python>: build .venvs/<slug> with uv from the image's whole
# locked set (its own lock on its torch base's and Python base's: `python -m
# madbench_common.imagefactory.images effective-lock <slug>`; an image's requirements.lock
# alone leaves out what its bases pin, and --require-hashes refuses that), installed
# --no-deps as the images install it. Rebuilt only when that set changes (.lock-sha256).
# Used by make adapter-test (images/adapter-test.sh) and make demo-deaf (scripts/demo_deaf.sh),
# so both share one venv per image. Prints the venv's path. MADBENCH_VENVS: the folder of
# venvs (default .venvs).
set -euo pipefail
cd "$(dirname "$0")/.."
slug=${1:?usage: family-venv.sh <image slug> <python interpreter>}
interp=${2:?usage: family-venv.sh <image slug> <python interpreter>}
PY=${PY:-.venv/bin/python}
UV=${UV:-$(command -v uv || echo "$(dirname "$PY")/uv")}
venv=${MADBENCH_VENVS:-.venvs}/$slug
locked=$(mktemp --suffix=.txt); trap 'rm -f "$locked"' EXIT
"$PY" -m madbench_common.imagefactory.images effective-lock "$slug" > "$locked"
want=$(sha256sum "$locked" | cut -d' ' -f1)
if [[ ! -x $venv/bin/python || "$(cat "$venv/.lock-sha256" 2>/dev/null)" != "$want" ]]; then
  rm -rf "$venv"
  "$UV" venv -q --python "$interp" "$venv" >&2
  # --no-deps: the locks are the whole set (uv_args may leave a pin out)
  "$UV" pip install -q --python "$venv/bin/python" --require-hashes --no-deps -r "$locked" >&2
  "$UV" pip install -q --python "$venv/bin/python" pytest pytest-timeout >&2
  echo "$want" > "$venv/.lock-sha256"
fi
echo "$venv"
