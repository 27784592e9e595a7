#!/bin/sh
# Install the Debian packages of the programs named that are not on PATH: as root with
# apt-get; otherwise say what to install. Each program's package has its name.
#   system-tools.sh PROGRAM...                 a missing one is an error (exit 1)
#   system-tools.sh --optional WHY PROGRAM...  a missing one is a note saying WHY (exit 0)
# Used by `make sysdeps` (the TTS voices demo and tests run) and `make test-tools` (the
# container engine, registry and browser some tests run; they skip without them).
set -u
optional=""
if [ "${1:-}" = "--optional" ]; then
  optional=$2
  shift 2
fi
missing=""
for t in "$@"; do
  command -v "$t" >/dev/null || PATH=$PATH:/usr/sbin command -v "$t" >/dev/null \
    || missing="$missing $t"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing system packages:$missing"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing \
           >/dev/null; }; then
    echo "error: could not install$missing; install them with your package manager" >&2
    exit 1
  fi
  # Debian's docker-registry package enables a machine-wide registry on port 5000; the tests
  # start their own on a free loopback port, so none is left running by this install.
  case " $missing " in
    *" docker-registry "*)
      if command -v systemctl >/dev/null && systemctl is-enabled docker-registry >/dev/null 2>&1
      then
        systemctl disable --now docker-registry >/dev/null 2>&1 || true
      fi ;;
  esac
  exit 0
fi
if [ -n "$optional" ]; then
  echo "note: not installed:$missing ($optional; Debian/Ubuntu: sudo apt-get install$missing)"
  exit 0
fi
echo "error: missing system packages:$missing (Debian/Ubuntu: sudo apt-get install$missing)" >&2
exit 1
