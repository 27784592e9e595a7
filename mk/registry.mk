# Registry targets; included from the Makefile.
#   make push IMAGE=<slug> REGISTRY=registry.example.org/team
#                           push a built image, record its manifest digest in images.lock.yaml
#   make push-all REGISTRY=registry.example.org/team
#                           every built image; then: madbench render --registry $(REGISTRY)
# REGISTRY empty: each lock ref's own registry (ghcr.io/madbench). INSECURE=1: plain HTTP
# (loopback registries always are). Log in first (buildah login / skopeo login).
REGISTRY ?=
INSECURE ?=
PUSH_ARGS = $(if $(REGISTRY),--registry $(REGISTRY)) $(if $(INSECURE),--insecure)

.PHONY: push push-all

## push IMAGE=<slug> [REGISTRY=host/ns]: push one built image and record its digest
push: setup
	@test -n "$(IMAGE)" || { echo "usage: make push IMAGE=<slug> [REGISTRY=host[:port]/namespace]" >&2; exit 2; }
	PYTHONPATH=$(CURDIR) $(PY) -m madbench_common.imagefactory.imagepush push $(IMAGE) $(PUSH_ARGS)

## push-all [REGISTRY=host/ns]: push every built image and record the digests
push-all: setup
	PYTHONPATH=$(CURDIR) $(PY) -m madbench_common.imagefactory.imagepush push --built $(PUSH_ARGS)
