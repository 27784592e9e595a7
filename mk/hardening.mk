# Hardening targets; included from the top-level Makefile.
PY ?= .venv/bin/python

.PHONY: faults scale sbom measure-memory

## faults: SIGKILL sweep over the whole demo graph (MADBENCH_FAULT_SEEDS per store, default 10;
## odd seeds resume with one worker), S3 outage and throttling; results in .bench/faults.json
## (also part of make bench). CI's `make test` runs tests/pipeline/test_faults.py: a few seeds, a kill
## before the first marker, a resume with another worker count, a damaged merged manifest, an
## edited sources file, a full disk (RLIMIT_FSIZE), a runner killed alone.
faults: setup
	$(PY) -m perf.bench_faults

## scale: the runner and stores at the paper's scale with synthetic stages; .bench/scale.json
scale: setup
	$(PY) -m perf.bench_scale

## sbom [IMAGE=<slug>]: CycloneDX SBOMs of the image locks, recorded in images/images.lock.yaml
sbom: setup
	$(PY) -m madbench_common.imagefactory.sbom $(IMAGE)

## measure-memory: a maintainer's step, never part of make bench. The demo with every shard
## in a fresh process (as pods run), .bench/memory.json, then its per-stage peak RSS written
## into madbench_common/data/throughput.csv (other columns kept) and the workflows
## re-rendered (the smoke workflow's memory requests derive from it): commit them together.
## make bench runs the same measurement and writes .bench/memory.json and .bench/throughput.csv only.
measure-memory: setup
	$(PY) -m perf.bench_memory --write
