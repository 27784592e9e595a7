"""Adapter tests for images whose Python this machine lacks (3.9): run them in the base image.

``make adapter-test IMAGE=<slug>`` runs ``images/adapter-test.sh``, which builds
``.venvs/<slug>`` from the image's lock with uv and runs the family's tests. That needs the
image's Python on the host; Debian bookworm has no ``python3.9``. Then this module runs the
same script inside ``localhost/madbench/base-py39`` (``make base-images``;
:func:`run_adapter_tests_in_base`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from madbench_common.core.errors import ConfigError, MadbenchError
from madbench_common.imagefactory.containers import ContainerFailed, Mount, run_in_image
from madbench_common.imagefactory.imagebuild import BASES, host_ca, image_exists, local_ref
from madbench_common.imagefactory.images import IMAGES, fetch_upstream, load_image

__all__ = ["run_adapter_tests_in_base"]

_ROOT = IMAGES.parent


def _uv() -> Path:
    found = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    path = Path(found).resolve()
    if not path.is_file():
        raise ConfigError("uv is not installed (pip install uv, or make setup)")
    return path


def run_adapter_tests_in_base(slug: str) -> None:
    """Run ``images/adapter-test.sh <slug>`` inside the slug's base image.

    The worktree is mounted at its own path (read-write: ``.venvs/<slug>`` lands there, as
    it would on the host, and is reused while the lock is unchanged); uv comes from the
    host venv (mounted read-only), its cache is mounted so wheels are downloaded once, and
    the host CA bundle is mounted for PyPI. The container has the network (uv installs the
    lock) and runs as root; the tests themselves stay offline (``HF_HUB_OFFLINE=1``, an
    empty weights root). Upstream sources are fetched on the host first (the container
    needs no GitHub access).
    """
    info = load_image(slug)
    base = local_ref(BASES[info.python][0])
    if not image_exists(base):
        raise ConfigError(f"python{info.python} is not on this machine and {base} is not "
                          f"built; run: make base-images")
    fetch_upstream(info)
    uv, ca = _uv(), Path(host_ca()).resolve()
    cache = Path(subprocess.run([str(uv), "cache", "dir"], capture_output=True, text=True,
                                check=True).stdout.strip())
    cache.mkdir(parents=True, exist_ok=True)
    mounts = [Mount(_ROOT, str(_ROOT), read_only=False), Mount(uv.parent, "/opt/uvbin"),
              Mount(cache, "/opt/uvcache", read_only=False), Mount(ca.parent, "/opt/hostca")]
    env = {"PY": "python", "UV": "/opt/uvbin/" + uv.name, "UV_CACHE_DIR": "/opt/uvcache",
           "UV_LINK_MODE": "copy", "SSL_CERT_FILE": f"/opt/hostca/{ca.name}",
           "PIP_CERT": f"/opt/hostca/{ca.name}", "PYTHONPATH": str(_ROOT),
           "MADBENCH_IN_BASE": "1",
           # the tests' device switch (no GPU pass-through here: cpu in practice)
           "MADBENCH_TEST_DEVICE": os.environ.get("MADBENCH_TEST_DEVICE") or "cpu"}
    print(f"python{info.python} is not on this machine: running the adapter tests in {base}",
          flush=True)
    run_in_image(base, ["bash", str(_ROOT / "images" / "adapter-test.sh"), slug],
                 mounts=mounts, env=env, network=True, user="0:0", non_root=False)


def _main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m madbench_common.imagefactory.adaptertest <slug>", file=sys.stderr)
        return 2
    try:
        run_adapter_tests_in_base(argv[0])
    except ContainerFailed as exc:
        return exc.code
    except MadbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
