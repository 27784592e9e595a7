# Zero-shot omni models; included from the top-level Makefile.
#   make demo-omni   make demo, plus the omni_qwen25omni stage on a tiny random Qwen2.5-Omni
#                    thinker (run with .venvs/omni-qwen25omni's interpreter), then the report
#                    with the "Omni models (zero-shot)" group and its parse rates
# The main venv's CPU torch cannot load torchvision, which the Qwen2.5-Omni processor needs,
# so the stage runs under the family venv (`madbench run --python STAGE=PATH`). The venv is
# built (and the adapter tests, modality sanity check included, run) by make adapter-test.
OMNI_SLUG ?= omni-qwen25omni
OMNI_MODEL ?= omni-qwen25omni-tiny
OMNI_STAGE ?= omni_qwen25omni
OMNI_PY ?= .venvs/$(OMNI_SLUG)/bin/python
OMNI_WEIGHTS ?= $(STORE)/_tiny-weights

.PHONY: demo-omni

## demo-omni: make demo with a tiny-model omni stage turned on (see the comment above)
demo-omni: setup
	PYTHONPATH=$(CURDIR) PY=$(PY) MADBENCH_TEST_DEVICE=$(DEVICE) bash images/adapter-test.sh $(OMNI_SLUG)
	PYTHONPATH=$(CURDIR) HF_HUB_OFFLINE=1 $(OMNI_PY) -m madbench_common.models.tiny.omni \
	  qwen25omni $(OMNI_WEIGHTS)
	MADBENCH_WEIGHTS=$(abspath $(OMNI_WEIGHTS)) $(VENV)/bin/madbench run \
	  --sources data/demo/sources.csv --store $(STORE) --run-id $(RUN_ID) --workers $(WORKERS) \
	  --set $(OMNI_STAGE).model=$(OMNI_MODEL) --python $(OMNI_STAGE)=$(OMNI_PY)
	$(VENV)/bin/madbench report --store $(STORE) --run-id $(RUN_ID)
	@echo "omni rows: madbench status --store $(STORE) --run-id $(RUN_ID); the parse rates and prompts above are also in report.md after Table 5"
