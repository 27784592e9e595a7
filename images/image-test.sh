#!/usr/bin/env bash
# Build images/reference-cpu with buildah (or docker with a daemon) and run one stage in it.
# Exit 77 = cannot run here (no engine, no base image); used by `make image-test`.
#   PYTHON_IMAGE   base image (default python:3.11-slim-bookworm); with MADBENCH_DEBOOTSTRAP=1
#                  a Debian bookworm base with python3 is made locally with debootstrap instead
#   SOURCES        source clips for the ingest stage (default tests/fixtures/sources)
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${TAG:-localhost/madbench/reference-cpu:test}
PYTHON_IMAGE=${PYTHON_IMAGE:-python:3.11-slim-bookworm}
SOURCES=${SOURCES:-tests/fixtures/sources}
skip() { echo "skip: $*"; exit 77; }

if command -v buildah >/dev/null; then ENGINE=buildah
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then ENGINE=docker
else skip "no buildah, and no docker daemon"; fi

if [[ ${MADBENCH_DEBOOTSTRAP:-0} == 1 ]]; then
  [[ $ENGINE == buildah ]] || skip "debootstrap base needs buildah"
  command -v debootstrap >/dev/null || skip "debootstrap is not installed"
  PYTHON_IMAGE=localhost/madbench/debian-python:bookworm
  if ! buildah inspect "$PYTHON_IMAGE" >/dev/null 2>&1; then
    ctr=$(buildah from scratch); mnt=$(buildah mount "$ctr")
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$mnt"
    buildah umount "$ctr"; buildah commit "$ctr" "$PYTHON_IMAGE"; buildah rm "$ctr"
  fi
fi

args=(--build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" -f images/reference-cpu/Dockerfile -t "$TAG" .)
if [[ $ENGINE == buildah ]]; then
  buildah bud --isolation chroot --layers "${args[@]}" || skip "build failed (base image not pullable?)"
else
  docker build "${args[@]}" || skip "build failed (base image not pullable?)"
fi

[[ -e $SOURCES ]] || skip "no source fixture at $SOURCES"
store=$(mktemp -d); chmod 777 "$store"
stage=(stage run --stage ingest --shard 0 --num-shards 1 --store /store --run-id image-test
       --image "$TAG" --params-json "{\"sources\": \"/sources\"}")
if [[ $ENGINE == buildah ]]; then
  ctr=$(buildah from "$TAG")
  trap 'buildah rm "$ctr" >/dev/null' EXIT
  buildah run --isolation chroot -v "$PWD/$SOURCES:/sources:ro" -v "$store:/store" "$ctr" -- madbench "${stage[@]}"
else
  docker run --rm --read-only --tmpfs /tmp --network none -v "$PWD/$SOURCES:/sources:ro" \
    -v "$store:/store" "$TAG" "${stage[@]}"
fi
ls -R "$store/image-test" | head -20
test -n "$(find "$store/image-test" -name '*._SUCCESS' -print -quit)"
echo "image-test: ingest shard ran in $TAG"
