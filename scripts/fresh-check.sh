#!/usr/bin/env bash
# make fresh-check: the README's set-up commands on a clean clone of HEAD, in a clean
# container of the project's own debootstrap bookworm base, so that an install step the
# Makefile lacks (a Debian package, a Python dependency) fails here and not on a new machine.
#
#   FRESH_CHECK_CMD   what to run in the clone (default: the README's "make demo && make test");
#                     each part between "&&" is a step, run and logged in turn
#   FRESH_CHECK_DIR   where the clone, its venv and runs, and the logs go
#                     (default: /var/tmp/madbench-fresh-check/<UTC time>)
#   FRESH_CHECK_KEEP  1: keep the container afterwards (its name is printed)
#   PY                the host venv's python (make setup), which makes the base when missing
#
# The container is made with `buildah from` and run with `buildah run --isolation chroot`
# (the OCI runtime crun cannot start containers on this kind of machine). It reaches the
# package registries through the host's network and CA bundle, mounted read-only at run time
# as /run/secrets/hostca, as image builds get their `hostca` secret: never written into a
# layer (the container is never committed). Needs root and buildah (make image-tools).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
CMD=${FRESH_CHECK_CMD:-make demo && make test}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
WORK=${FRESH_CHECK_DIR:-/var/tmp/madbench-fresh-check/$STAMP}
BASE=localhost/madbench/debian-python:bookworm
# What a new machine of this kind has before the README's commands run, and the debootstrap
# base (minbase + python3, venv, CA certificates) lacks: git, make, a C compiler and the
# Python headers for packages that compile.
MACHINE_TOOLS="git make gcc g++ python3-dev"

say() { printf 'fresh-check: %s\n' "$*"; }
die() { printf 'fresh-check: error: %s\n' "$*" >&2; exit "${2:-1}"; }

[ "$(id -u)" = 0 ] || die "needs root (buildah's chroot isolation)"
command -v buildah >/dev/null || die "needs buildah (make image-tools installs it)"
CA=""
for f in "${MADBENCH_HOST_CA:-}" /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt
do
  if [ -n "$f" ] && [ -s "$f" ]; then CA=$f; break; fi
done
[ -n "$CA" ] || die "no host CA bundle found (set MADBENCH_HOST_CA=/path/to/ca-bundle.crt)"

mkdir -p "$WORK"
LOG=$WORK/fresh-check.log
: >"$LOG"
say "log: $LOG"

# 1. the base image (make base-images makes it too; here only it is needed)
if ! buildah inspect --type image "$BASE" >/dev/null 2>&1; then
  say "making $BASE with debootstrap (once, a few minutes)"
  PYTHONPATH=$ROOT "$PY" -c \
    "from madbench_common.imagefactory.imagebuild import debian_python; debian_python('3.11')" \
    >>"$LOG" 2>&1 || die "could not make $BASE (see $LOG)"
fi

# 2. a clean clone of HEAD: what is committed, not the work tree
HEAD=$(git -C "$ROOT" rev-parse HEAD)
SHORT=$(git -C "$ROOT" rev-parse --short HEAD)
if [ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]; then
  say "note: uncommitted changes in $ROOT are not part of the check (it clones HEAD)"
fi
git clone --quiet --no-checkout --no-hardlinks "$ROOT" "$WORK/src"
git -C "$WORK/src" checkout --quiet --detach "$HEAD"
say "clone of $SHORT in $WORK/src"

# 3. a clean container of the base
NAME=madbench-fresh-check-$STAMP-$$
CTR=$(buildah from --pull=never --quiet --name "$NAME" "$BASE")
cleanup() {
  if [ "${FRESH_CHECK_KEEP:-}" = 1 ]; then
    say "container kept: $CTR (buildah rm $CTR)"
  else
    buildah rm "$CTR" >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

MOUNTS=(--mount "type=bind,src=$WORK/src,dst=/madbench,rw"
        --mount "type=bind,src=$CA,dst=/run/secrets/hostca,ro")
ENVS=()
for v in PIP_CERT SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO; do
  ENVS+=(--env "$v=/run/secrets/hostca")
done
# A machine of this kind keeps a CPU build of torch on disk where pip finds it (without it,
# pip takes a CUDA build of several GB); the container sees that folder, read-only.
if [ -d /opt/wheels ]; then
  MOUNTS+=(--mount "type=bind,src=/opt/wheels,dst=/opt/wheels,ro")
  ENVS+=(--env "PIP_FIND_LINKS=/opt/wheels")
fi

step=0
run_step() {  # run_step WHAT COMMAND: one step in the container, logged; exits on failure
  local what=$1 cmd=$2 started rc
  step=$((step + 1))
  started=$(date +%s)
  say "step $step: $what" | tee -a "$LOG"
  set +e
  buildah run --isolation chroot --workingdir /madbench "${MOUNTS[@]}" "${ENVS[@]}" \
    --env HOME=/root "$CTR" -- sh -c "$cmd" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" != 0 ]; then
    say "FAILED: step $step \`$cmd\` exited with $rc after $(( $(date +%s) - started )) s" \
      | tee -a "$LOG" >&2
    say "log: $LOG; the clone (its .venv, runs/): $WORK/src" >&2
    exit "$rc"
  fi
  say "step $step passed in $(( $(date +%s) - started )) s" | tee -a "$LOG"
}

T0=$(date +%s)
run_step "machine tools: $MACHINE_TOOLS" "apt-get update -qq && \
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $MACHINE_TOOLS >/dev/null"
# the README's commands, each part between "&&" a step of its own
mapfile -t STEPS < <(printf '%s\n' "$CMD" | sed 's/[[:space:]]*&&[[:space:]]*/\n/g')
for s in "${STEPS[@]}"; do
  if [ -n "${s// /}" ]; then run_step "$s" "$s"; fi
done
say "passed: \`$CMD\` on a clean clone of $SHORT in \
$(( $(date +%s) - T0 )) s; log: $LOG" | tee -a "$LOG"
