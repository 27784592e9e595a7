# Image factory targets (model images under images/<slug>/); included from the Makefile.
PY ?= .venv/bin/python
BIN ?= $(dir $(PY))
IMAGE ?=

.PHONY: lock adapter-test

## lock IMAGE=<slug>: re-resolve images/<slug>/requirements.lock (uv, hashes, the image's python)
lock: setup
	@test -n "$(IMAGE)" || { echo "usage: make lock IMAGE=<slug>" >&2; exit 2; }
	cd images/$(IMAGE) && PATH=$(abspath $(BIN)):$$PATH $$($(abspath $(PY)) -m madbench_common.images lock-cmd $(IMAGE))

## adapter-test IMAGE=<slug>: .venvs/<slug> from the image's lock; run its tiny-model adapter tests
adapter-test: setup
	@test -n "$(IMAGE)" || { echo "usage: make adapter-test IMAGE=<slug>" >&2; exit 2; }
	PY=$(PY) bash images/adapter-test.sh $(IMAGE)
