# Rehearsal; included from the top-level Makefile.
#   make rehearsal            workflows/full.yaml, then workflows/deaf.yaml, executed from the
#                             rendered YAML on this machine: every image built (bases first),
#                             tiny random weights, every pod in its image under the pod policy,
#                             in a private network namespace with the object store; prints the
#                             reports (random weights, labelled) and writes images/rehearsal.{json,md}
#   make rehearsal-dry-run    every pod of every workflow resolved and checked, nothing run
# KEEP_IMAGES=1 keeps every image (default: each is removed after its last pod);
# IMAGE_TESTS=1 runs each image's `make image-test` when it is built, before its pods
# (recorded in images/images.lock.yaml, as the make target records it);
# REHEARSAL_FRESH=1 forgets the work folder (default: a killed rehearsal resumes).
# Needs root, buildah and debootstrap (make image-tools), and MADBENCH_UPSTREAM_GIT mirrors
# for the images that unpack GitHub sources (README: Rehearsal).
REHEARSAL_DIR ?= .rehearsal
REHEARSAL_WORKFLOWS ?= full,deaf
KEEP_IMAGES ?= 0
IMAGE_TESTS ?= 0
REHEARSAL_FRESH ?= 0

.PHONY: rehearsal rehearsal-dry-run

## rehearsal: the paper's graphs end to end on tiny random weights (README: Rehearsal)
rehearsal: setup image-tools
	KEEP_IMAGES=$(KEEP_IMAGES) IMAGE_TESTS=$(IMAGE_TESTS) PYTHONPATH=$(CURDIR) $(PY) -m madbench_common.cli rehearse run \
	  --work $(REHEARSAL_DIR) --workflows $(REHEARSAL_WORKFLOWS) \
	  $(if $(filter 1,$(REHEARSAL_FRESH)),--fresh,)

## rehearsal-dry-run: resolve and check every pod of full, smoke and deaf (no containers)
rehearsal-dry-run: setup
	@set -e; for w in full smoke deaf; do \
	  PYTHONPATH=$(CURDIR) $(PY) -m madbench_common.cli rehearse dry-run workflows/$$w.yaml >/dev/null; done
