# Image factory targets (images/README.md); included from the Makefile.
#   make base-images              Python bases (offline: debootstrap stand-ins for python:3.X-slim)
#   make image IMAGE=<slug>       build images/<slug> and its parent chain (python → torch base);
#                                 record each in images.lock.yaml
#   make images                   every image, bases first
#   make dockerfiles              generate every images/<slug>/Dockerfile from its image.yaml
#                                 (CHECK=1: write nothing, fail on a stale one)
#   make image-test IMAGE=<slug>  run the slug's image_test stages inside the built image
#   make lock IMAGE=<slug>        re-resolve images/<slug>/requirements.lock (uv, hashes)
#   make check-locks              every requirements.lock matches its inputs (offline)
#   make adapter-test IMAGE=<slug>  tiny-model adapter tests in .venvs/<slug> (3.9: in base-py39);
#                                   DEVICE=cuda runs them on the GPU (MADBENCH_TEST_DEVICE)
#   make test-images              opt-in pytest `-m image`: builds, image test, --engine equality
PY ?= .venv/bin/python
BIN ?= $(dir $(PY))
IMAGE ?=
# debootstrap: make the Python base offline (buildah); registry: pull python:3.X-slim.
PYTHON_SOURCE ?= debootstrap
IMAGE_TOOLS ?= buildah debootstrap
IMAGE_PY = PYTHONPATH=$(CURDIR) $(PY)

.PHONY: lock lock-all check-locks adapter-test image-tools base-images image images image-test test-images \
	dockerfiles

## dockerfiles: images/<slug>/Dockerfile from images/Dockerfile.j2 and image.yaml (CHECK=1: verify)
dockerfiles: setup
	$(IMAGE_PY) -m madbench_common.imagefactory.images render $(if $(CHECK),--check)

## lock IMAGE=<slug>: re-resolve images/<slug>/requirements.lock (uv, hashes, the image's python)
## on top of its parents' locks (lock a torch base before its images: make lock-all does all)
lock: setup
	@test -n "$(IMAGE)" || { echo "usage: make lock IMAGE=<slug>" >&2; exit 2; }
	$(IMAGE_PY) -m madbench_common.imagefactory.images lock $(IMAGE) --uv $(abspath $(BIN))/uv

## lock-all: every lock, parents first
lock-all: setup
	@set -e; for s in $$($(IMAGE_PY) -m madbench_common.imagefactory.images list --all); do \
	  $(IMAGE_PY) -m madbench_common.imagefactory.images lock $$s --uv $(abspath $(BIN))/uv; done

## check-locks: fail when a requirements.lock is older than its inputs or its parents' locks (offline)
check-locks: setup
	@set -e; for s in $$($(IMAGE_PY) -m madbench_common.imagefactory.images list --all); do \
	  $(IMAGE_PY) -m madbench_common.imagefactory.images check-lock $$s; done

## adapter-test IMAGE=<slug>: .venvs/<slug> from the image's lock; run its tiny-model adapter tests
##   (DEVICE=cuda: on the GPU, each adapter in its own GPU dtype)
adapter-test: setup
	@test -n "$(IMAGE)" || { echo "usage: make adapter-test IMAGE=<slug>" >&2; exit 2; }
	PYTHONPATH=$(CURDIR) PY=$(PY) MADBENCH_TEST_DEVICE=$(DEVICE) bash images/adapter-test.sh $(IMAGE)

## image-tools: buildah and debootstrap (installed with apt when root, as sysdeps does)
image-tools:
	@missing=""; for t in $(IMAGE_TOOLS); do command -v $$t >/dev/null || PATH=$$PATH:/usr/sbin command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing system packages:$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	      || { echo "error: could not install$$missing; install them with your package manager" >&2; exit 1; }; \
	  else \
	    echo "error: missing:$$missing (Debian/Ubuntu: sudo apt-get install$$missing; or a docker daemon and PYTHON_SOURCE=registry)" >&2; exit 1; \
	  fi; \
	fi

## base-images: the Python bases images/base-py311 and images/base-py39
base-images: setup image-tools
	$(IMAGE_PY) -m madbench_common.imagefactory.imagebuild bases --python-source $(PYTHON_SOURCE)

## image IMAGE=<slug>: build one image (serialised machine-wide; see images/README.md)
image: setup image-tools
	@test -n "$(IMAGE)" || { echo "usage: make image IMAGE=<slug>" >&2; exit 2; }
	$(IMAGE_PY) -m madbench_common.imagefactory.imagebuild image $(IMAGE) --python-source $(PYTHON_SOURCE)

## images: every image, each after its parent (python → torch base → model)
images: base-images
	$(IMAGE_PY) -m madbench_common.imagefactory.imagebuild image $$($(IMAGE_PY) -m madbench_common.imagefactory.images list --all)

## image-test IMAGE=<slug>: run the slug's image_test stage shards inside its built image
image-test: setup
	@test -n "$(IMAGE)" || { echo "usage: make image-test IMAGE=<slug>" >&2; exit 2; }
	$(IMAGE_PY) -m madbench_common.testing.imagetest test $(IMAGE)

## test-images: the `image`-marked tests: bases + reference-cpu built, its image test, and
## `madbench run --engine` giving the in-process manifests (tens of minutes cold; not in make test)
test-images: setup image-tools
	MADBENCH_IMAGE_TEST=1 PYTHONPATH=$(CURDIR) $(BIN)pytest -m image -ra \
	  tests/imagefactory/test_images.py tests/pipeline/test_container_engine.py
