#!/usr/bin/env bash
# make demo-deaf: build .venvs/deaf-tf5 from the image's whole locked set
# (images/family-venv.sh, shared with make adapter-test; reused while it is unchanged),
# install a tiny random Qwen2-Audio checkpoint into $STORE/_tiny-weights, and run
# `madbench deaf run` with that model's answer stage in the family venv (--venv), Gemini 2.5 Flash against the local API stub (--stub-apis), and the
# stub's OpenAI-compatible judge for every answer. Extra arguments go to `deaf run`.
# The tiny model's answers are noise and the stub's are echoes: the demo shows the
# machinery, not a model's faithfulness; the report labels both rows.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
UV=${UV:-$(command -v uv || echo "$(dirname "$PY")/uv")}
STORE=${STORE:-runs}
RUN_ID=${RUN_ID:-deaf-demo}
WORKERS=${WORKERS:-2}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
venv=$(PY=$PY UV=$UV bash images/family-venv.sh deaf-tf5 "$(command -v python3.11 || command -v python3)")
weights=$STORE/_tiny-weights
mkdir -p "$weights"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$venv/bin/python" -c \
  "import sys; from madbench_common.models.tiny.audio_lm import install_tiny_qwen2_audio as f; f(sys.argv[1])" \
  "$weights"
export MADBENCH_WEIGHTS=$(realpath "$weights") HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
"$(dirname "$PY")/madbench" deaf run --store "$STORE" --run-id "$RUN_ID" --workers "$WORKERS" \
  --models qwen2_audio_tiny=deaf-qwen2-audio-tiny,gemini_25_flash --stub-apis \
  --venv answer_qwen2_audio_tiny=$venv "$@"
echo "results: $(realpath "$STORE")/$RUN_ID/  (madbench deaf status --store $STORE --run-id $RUN_ID --models qwen2_audio_tiny=deaf-qwen2-audio-tiny,gemini_25_flash)"
