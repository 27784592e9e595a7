"""Pushing built images to a registry and recording their manifest digests.

``make push IMAGE=<slug> REGISTRY=registry.example.org/team`` (``python -m
madbench_common.imagefactory.imagepush push <slug>... --registry …``) pushes the local build and
records its digest in ``images/images.lock.yaml`` (:func:`push_image`). ``madbench render``
then writes ``<ref>@sha256:…`` for the slug, and ``madbench render --registry <registry>``
renders every workflow against that registry (:func:`registry_ref`).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from madbench_common.core.errors import ConfigError, MadbenchError

__all__ = ["Pushed", "image_digest", "local_image_digest", "local_image_ref", "push_image",
           "registry_ref"]

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class Pushed:
    """One pushed image: where it went and the registry's manifest digest."""

    slug: str
    ref: str
    digest: str

    @property
    def pinned(self) -> str:
        return f"{self.ref}@{self.digest}"


def registry_ref(ref: str, registry: str | None) -> str:
    """``ref`` (``host/namespace/<name>:<tag>``) moved to ``registry`` (``host[:port][/ns]``):
    ``ghcr.io/madbench/qc:0.1.0`` → ``registry.example.org/team/qc:0.1.0``; unchanged
    without a registry."""
    if not registry:
        return ref
    name = ref.split("@", 1)[0].rsplit("/", 1)[-1]
    return f"{registry.rstrip('/')}/{name}"


def _insecure(dest: str, insecure: bool) -> bool:
    return insecure or dest.split("/", 1)[0].split(":")[0] in _LOOPBACK or dest.startswith(
        "[::1]")


def _run(cmd: list[str], what: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise MadbenchError(f"{what} failed ({' '.join(cmd[:2])} exited {proc.returncode}): "
                            f"{(proc.stderr or proc.stdout).strip()[-2000:]}")
    return proc.stdout


def _push(src: str, dest: str, tls: bool) -> str:
    """Push ``src`` (containers-storage) to ``docker://dest``; the digest the tool reports."""
    with tempfile.TemporaryDirectory(prefix="mb-push-") as tmp:
        digestfile = Path(tmp) / "digest"
        if shutil.which("buildah"):
            _run(["buildah", "push", f"--tls-verify={str(tls).lower()}", "--digestfile",
                  str(digestfile), src, f"docker://{dest}"], f"pushing {src} to {dest}")
        elif shutil.which("skopeo"):
            _run(["skopeo", "copy", "-q", f"--dest-tls-verify={str(tls).lower()}",
                  "--digestfile", str(digestfile), f"containers-storage:{src}",
                  f"docker://{dest}"], f"pushing {src} to {dest}")
        else:
            raise ConfigError("pushing needs buildah or skopeo (Debian: apt-get install buildah)")
        return digestfile.read_text().strip()


def image_digest(ref: str, tls: bool = True) -> str:
    """The sha256 of the manifest the registry serves for ``ref`` (``skopeo inspect --raw``)."""
    raw = subprocess.run(["skopeo", "inspect", "--raw", f"--tls-verify={str(tls).lower()}",
                          f"docker://{ref}"], capture_output=True)
    if raw.returncode != 0:
        raise MadbenchError(f"{ref}: cannot read its manifest back: "
                            f"{raw.stderr.decode(errors='replace').strip()[-1000:]}")
    return "sha256:" + hashlib.sha256(raw.stdout).hexdigest()


def local_image_digest(ref: str, engine: str) -> str:
    """An immutable name of a local image: ``ref@<its manifest digest>`` (buildah, podman;
    both run it by that name), or its image id (docker). A rebuild changes it."""
    if "@sha256:" in ref or _DIGEST.match(ref):  # pinned already, or an image id
        return ref
    fmt = {"buildah": ["buildah", "inspect", "--type", "image", "--format",
                       "{{.FromImageDigest}}", ref],
           "podman": ["podman", "image", "inspect", "--format", "{{.Digest}}", ref],
           "docker": ["docker", "image", "inspect", "--format", "{{.Id}}", ref]}
    if engine not in fmt:
        raise ConfigError(f"unknown container engine {engine!r}")
    found = _run(fmt[engine], f"inspecting {ref}").strip()
    if not _DIGEST.match(found):
        raise MadbenchError(f"{ref}: {engine} reports no sha256 digest ({found!r})")
    return found if engine == "docker" else f"{ref}@{found}"


def local_image_ref(slug: str, lock_path: Path | None = None) -> str:
    """The local build of ``slug``: its lock entry's ``build.local_ref``, else
    ``localhost/madbench/<slug>:<tag>``."""
    from madbench_common.imagefactory.imagelock import lock_entry

    entry = lock_entry(slug, lock_path)
    local = (entry.get("build") or {}).get("local_ref")
    if local:
        return str(local)
    tag = str(entry["ref"]).split("@", 1)[0].rsplit(":", 1)[1]
    return f"localhost/madbench/{slug}:{tag}"


def push_image(slug: str, registry: str | None = None, *, source: str | None = None,
               lock_path: Path | None = None, insecure: bool = False,
               record: bool = True) -> Pushed:
    """Push ``slug``'s local build to ``registry`` (default: the host of its lock ``ref``),
    check the digest against the manifest read back, and record it in the lock.

    ``localhost/madbench/<slug>:<tag>`` goes to ``<registry>/<slug>:<tag>`` with ``buildah
    push`` (``skopeo copy`` where buildah is absent); the registry's manifest is read back
    (``skopeo inspect --raw``) and its sha256 must be the digest the push reported; the
    ``sha256:`` digest is recorded with ``status: pinned``
    (:func:`madbench_common.imagefactory.imagelock.record_push`). A manifest digest is the
    registry's: the same local image pushed to two registries by the same tool gives the
    same digest, but not across tools or compression settings, so push the whole set to
    the registry you render against. Registries on loopback (``127.0.0.1``,
    ``localhost``) are spoken to over plain HTTP; any other over TLS unless ``insecure``.
    """
    from madbench_common.imagefactory.imagelock import lock_entry, record_push

    entry = lock_entry(slug, lock_path)
    dest = registry_ref(str(entry["ref"]), registry)
    tls = not _insecure(dest, insecure)
    digest = _push(source or local_image_ref(slug, lock_path), dest, tls)
    if not _DIGEST.match(digest):
        raise MadbenchError(f"pushing {slug} to {dest}: the tool reported no digest ({digest!r})")
    served = image_digest(dest, tls)
    if served != digest:
        raise MadbenchError(f"{dest}: the registry serves manifest {served}, the push reported "
                            f"{digest}; not recorded")
    if record:
        record_push(slug, digest, dest.rsplit("/", 1)[0], lock_path)
    return Pushed(slug, dest, digest)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m madbench_common.imagefactory.imagepush")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("push", help="push built images and record their digests in the lock")
    p.add_argument("slugs", nargs="*", help="image slugs (default with --built: every built one)")
    p.add_argument("--registry", default=None,
                   help="host[:port][/namespace] (default: the registry of each lock ref)")
    p.add_argument("--built", action="store_true",
                   help="every slug whose lock status is built or pinned")
    p.add_argument("--insecure", action="store_true", help="plain HTTP / no TLS verification")
    p.add_argument("--lock", type=Path, default=None, help="images lock (default: the repo's)")
    args = parser.parse_args(argv)
    from madbench_common.imagefactory.imagelock import read_lock

    slugs = list(args.slugs)
    if args.built:
        slugs += [s for s, e in read_lock(args.lock).items()
                  if e.get("status") in ("built", "pinned") and s not in slugs]
    if not slugs:
        parser.error("name slugs or pass --built")
    try:
        for slug in slugs:
            pushed = push_image(slug, args.registry, lock_path=args.lock,
                                insecure=args.insecure)
            print(f"{slug}: {pushed.pinned}")
    except MadbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print("recorded in the images lock; now run: madbench render"
          + (f" --registry {args.registry}" if args.registry else ""))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
