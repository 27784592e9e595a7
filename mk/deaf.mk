# DEAF: the acoustic-faithfulness benchmark on the same platform.
#   make demo-deaf   offline stimuli (reduced subset), a tiny-random Qwen2-Audio in
#                    .venvs/deaf-tf5, the Gemini adapter against the local API stub, the
#                    stub's OpenAI-compatible judge labelling every answer (the paper's
#                    protocol; the stub is no judge: it says Other), metrics, report.
# DEAF_DEMO= (empty) drops the subset options: the full 2,756 clips (hours on 2 cores).
DEAF_RUN_ID ?= deaf-demo
# The tiny model answers each query once (greedy decoding repeats itself; its 3 × 499 answers
# took 30 of 33 minutes on a loaded 2-core machine); the stub keeps the paper's 3 repeats.
DEAF_DEMO ?= --per-stratum 1 --snrs=-5,5 --set answer_qwen2_audio_tiny.max_new_tokens=24 \
  --set answer_qwen2_audio_tiny.repeats=1

.PHONY: demo-deaf

## demo-deaf: the DEAF graph end to end offline, under 10 minutes on two cores
demo-deaf: setup
	STORE=$(STORE) RUN_ID=$(DEAF_RUN_ID) WORKERS=$(WORKERS) PY=$(PY) \
	  bash scripts/demo_deaf.sh $(DEAF_DEMO)
