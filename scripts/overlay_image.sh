#!/usr/bin/env bash
# Build an image that is a built MADBench image with this tree's madbench_common on top:
# one small layer, so a test of this tree's code inside the image (tests/test_smoke_image.py)
# costs megabytes, not a rebuild of the image. Serialised with the other builds.
#   scripts/overlay_image.sh [FROM_REF] [TAG]
set -euo pipefail
from=${1:-localhost/madbench/reference-cpu:0.1.0}
tag=${2:-localhost/madbench/reference-cpu:overlay-$(git rev-parse --short HEAD)}
root=$(git rev-parse --show-toplevel)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat > "$dir/Containerfile" <<CONTAINERFILE
FROM $from
USER 0
COPY pyproject.toml README.md /tmp/src/
COPY madbench_common /tmp/src/madbench_common
RUN pip install --no-cache-dir --no-deps --no-build-isolation --force-reinstall /tmp/src \\
    && rm -rf /tmp/src
USER 10001:10001
CONTAINERFILE
flock "${MADBENCH_BUILD_LOCK:-/tmp/madbench-image-build.lock}" \
  buildah bud --isolation chroot --format docker --pull=never -f "$dir/Containerfile" \
  -t "$tag" "$root" >&2
echo "$tag"
