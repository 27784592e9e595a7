#!/usr/bin/env bash
# make adapter-test IMAGE=<slug>: build .venvs/<slug> from the image's whole locked set
# (images/family-venv.sh; PyPI's torch wheels are CUDA builds that also run on the CPU) and
# run that family's adapter tests there, offline, on tiny random models of the real
# architectures. The venv is rebuilt only when that set changes. Exit status is pytest's.
# MADBENCH_TEST_DEVICE (make's DEVICE=, default cpu) is the device the tests load on.
# Where the image's Python is not on this machine (3.9 here), the same script runs inside
# the image's base (localhost/madbench/base-py39, `make base-images`): madbench_common.imagefactory.adaptertest.
set -euo pipefail
cd "$(dirname "$0")/.."
slug=${1:?usage: adapter-test.sh <image slug>}
PY=${PY:-.venv/bin/python}
UV=${UV:-$(command -v uv || echo "$(dirname "$PY")/uv")}
lock=images/$slug/requirements.lock
python=$("$PY" -m madbench_common.imagefactory.images show "$slug" | sed -n 's/^python=\([^ ]*\).*/\1/p')
tests=$("$PY" -m madbench_common.imagefactory.images tests "$slug")
[[ -n $tests ]] || { echo "error: images/$slug/image.yaml lists no adapter_tests" >&2; exit 2; }
[[ -f $lock ]] || { echo "error: $lock missing; run: make lock IMAGE=$slug" >&2; exit 2; }
interp=$(command -v "python$python" || true)
# A pyenv shim exists for versions that are installed but not selected: it must run.
[[ -z $interp ]] || "$interp" -c 'import sys' 2>/dev/null || interp=
if [[ -z $interp ]]; then
  [[ -z ${MADBENCH_IN_BASE:-} ]] || { echo "error: python$python is missing in the base image" >&2; exit 2; }
  exec "$PY" -m madbench_common.imagefactory.adaptertest "$slug"
fi

venv=$(PY=$PY UV=$UV bash images/family-venv.sh "$slug" "$interp")

pypath=$PWD
srcs=$("$PY" -m madbench_common.imagefactory.images upstream "$slug")
while IFS= read -r src; do
  [[ -n $src ]] || continue
  mode=$("$PY" - "$slug" "$src" <<'PYEOF'
import sys
from pathlib import Path
from madbench_common.imagefactory.images import load_image
info = load_image(sys.argv[1])
print(next(s.install for s in info.upstream_src if Path(sys.argv[2]).name == s.dest))
PYEOF
)
  if [[ $mode == pip ]]; then
    "$UV" pip install -q --python "$venv/bin/python" --no-deps "$src"
  else
    pypath=$pypath:$src  # fetch_upstream prints absolute paths
  fi
done <<< "$srcs"

weights=$(mktemp -d); trap 'rm -rf "$weights"' EXIT
# shellcheck disable=SC2086
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MADBENCH_WEIGHTS=$weights HF_HOME=$weights/huggingface \
  PYTHONPATH=$pypath MADBENCH_ADAPTER_IMAGE=$slug MADBENCH_TEST_DEVICE=${MADBENCH_TEST_DEVICE:-cpu} \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -o addopts="-ra" $tests
