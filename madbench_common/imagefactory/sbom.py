"""CycloneDX SBOM of an image's locked Python packages, with their licences.

``python -m madbench_common.imagefactory.sbom [SLUG ...]`` (``make sbom``) writes
``images/<slug>/sbom.cdx.json`` for every image and records it in
``images/images.lock.yaml`` (:func:`write_sbom`). Components come from the locks alone:
the image's whole installed set (:func:`madbench_common.imagefactory.images.effective_lock`: a
model image's SBOM lists its torch base's torch and CUDA wheels too); licences from the
locked wheels' metadata (:func:`wheel_metadata`).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from madbench_common.core.errors import ConfigError
from madbench_common.imagefactory.imagelock import (
    LOCK,
    image_identity,
    lock_entry,
    read_lock,
    update_entry,
)

__all__ = ["Pin", "make_sbom", "parse_lock", "record_sbom", "sbom_problems", "write_sbom"]

IMAGES = LOCK.parent
_VAGUE = frozenset({"UNKNOWN", "DUAL LICENSE", "OTHER/PROPRIETARY LICENSE", "LICENSE"})
"""``License`` values that say nothing; the classifiers then name the licence."""
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_PLATFORMS = (*(f"manylinux_2_{v}_x86_64" for v in (28, 27, 26, 25, 24, 17, 12, 5)),
              "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")
"""What the locks target (``x86_64-manylinux_2_28``) and every older manylinux it admits."""


@dataclass(frozen=True)
class Pin:
    """One locked package: name, version and the sha256 of every file the lock allows."""

    name: str
    version: str
    hashes: tuple[str, ...]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str) -> list[Pin]:
    """The pins of a ``uv pip compile --generate-hashes`` lock, sorted by name."""
    pins = []
    for block in re.split(r"\n(?=\S)", text):
        found = _PIN.match(block.strip())
        if found:
            pins.append(Pin(_norm(found[1]), found[2], tuple(sorted(_HASH.findall(block)))))
    return sorted(pins, key=lambda p: p.name)


_NO_DIST = re.compile(r"No matching distribution found for ([A-Za-z0-9_.\-]+)==")


def _interpreter(python: str) -> str | None:
    """A runnable ``python<X.Y>`` that has pip, else ``None``."""
    found = shutil.which(f"python{python}")
    if found is None:
        return None
    probe = subprocess.run([found, "-m", "pip", "--version"], capture_output=True, text=True,
                           check=False)
    return found if probe.returncode == 0 else None


def _dry_run(python: str, cross: str | None, reqs: list[str],
             tmp: Path) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """pip's dry-run report for ``reqs`` (``cross``: another Python version, wheels only)."""
    report, listing = tmp / "report.json", tmp / "requirements.txt"
    listing.write_text("\n".join(reqs) + "\n")
    report.unlink(missing_ok=True)
    cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-deps",
           "--ignore-requires-python", "--quiet", "--report", str(report), "-r", str(listing)]
    if cross is not None:
        cmd += ["--python-version", cross, "--only-binary=:all:", "--target", str(tmp / "t")]
        for tag in _PLATFORMS:
            cmd += ["--platform", tag]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    items = json.loads(report.read_text())["install"] if done.returncode == 0 else []
    return done, items


def wheel_metadata(lock_text: str, python: str, where: str = "lock") -> dict[str, dict[str, Any]]:
    """Core metadata of every locked distribution (pip's dry-run installation report).

    Licences are not in a lock. They come from the locked wheels' own core metadata
    (``License-Expression`` (PEP 639), else ``License``, else the ``License ::``
    classifiers), as ``pip install --dry-run --no-deps --report`` gives it for exactly the
    locked versions and platform (``--ignore-requires-python``: the lock, not pip, decides
    what is installed; e.g. a stray ``typing==3.10.0.0`` pin declares Python < 3.5). PyPI
    serves wheel metadata separately (PEP 658), so no wheel is downloaded.

    For an image whose Python is not this one, pip reads wheels only; a pin with no wheel
    for that Python (an sdist-only release, e.g. ``antlr4-python3-runtime 4.8``) is read
    by that Python's own pip where this machine has it (``python3.9 -m pip``), since pip
    builds an sdist's metadata only for its own interpreter.
    """
    cross = None if python == f"{sys.version_info.major}.{sys.version_info.minor}" else python
    todo = [f"{p.name}=={p.version}" for p in parse_lock(lock_text)]
    later: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mb-sbom-") as tmp:
        while True:
            done, items = _dry_run(sys.executable, cross, todo, Path(tmp))
            missing = _NO_DIST.search(done.stderr) if cross else None
            if done.returncode == 0 or missing is None:
                break
            later += [r for r in todo if _norm(r.split("==")[0]) == _norm(missing[1])]
            todo = [r for r in todo if r not in later]
        if done.returncode != 0:
            raise ConfigError(f"{where}: pip could not read the locked wheels' metadata: "
                              f"{done.stderr.strip()[-1000:]}")
        native = _interpreter(python) if later else None
        if later and native is None:
            raise ConfigError(f"{where}: pip could not read the metadata of {', '.join(later)} "
                              f"for Python {python} (an sdist, or no wheel for this Python): "
                              f"put python{python} with pip on PATH (pyenv: "
                              f"PATH=$(pyenv root)/versions/{python}.*/bin:$PATH) and rerun")
        if native is not None:
            extra, more = _dry_run(native, None, later, Path(tmp))
            if extra.returncode != 0:
                raise ConfigError(f"{where}: python{python}'s pip could not read {later}: "
                                  f"{extra.stderr.strip()[-1000:]}")
            items += more
    return {_norm(i["metadata"]["name"]): i["metadata"] for i in items}


def _overrides() -> dict[str, dict[str, str]]:
    import yaml

    path = IMAGES / "licenses.yaml"
    data: dict[str, dict[str, str]] = yaml.safe_load(path.read_text()) if path.exists() else {}
    return {_norm(k): v for k, v in (data or {}).items()}


def _licenses(meta: dict[str, Any]) -> list[Any]:
    from cyclonedx.contrib.license.factories import LicenseFactory

    factory = LicenseFactory()
    expression = (meta.get("license_expression") or "").strip()
    if expression:
        return [factory.make_from_string(expression)]
    text = (meta.get("license") or "").strip()
    if text and "\n" not in text and len(text) <= 80 and text.upper() not in _VAGUE:
        return [factory.make_from_string(text)]
    classifiers = [c.rsplit(" :: ", 1)[1] for c in meta.get("classifier", [])
                   if c.startswith("License ::") and c.count(" :: ") >= 2]
    if classifiers:
        return [factory.make_from_string(c) for c in sorted(set(classifiers))]
    return [factory.make_from_string(text)] if text and text.upper() != "UNKNOWN" else []


def make_sbom(slug: str, text: str, metadata: dict[str, dict[str, Any]]) -> str:
    """CycloneDX 1.6 JSON for the locked set ``text`` of image ``slug``.

    One ``pkg:pypi/<name>@<version>`` library per pin, with every sha256 the lock allows.
    Where the wheel metadata is silent on the licence, ``images/licenses.yaml`` names it and
    where it was read; a package with neither is listed with no licence and
    :func:`sbom_problems` reports it. Each component says its licence's source (property
    ``madbench:license-source``). The output is deterministic (no timestamp; the serial
    number is derived from the lock), so an unchanged lock gives byte-identical SBOMs.
    """
    from cyclonedx.contrib.license.factories import LicenseFactory
    from cyclonedx.model import HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from packageurl import PackageURL

    lock_sha = hashlib.sha256(text.encode()).hexdigest()
    bom = Bom(serial_number=uuid.uuid5(uuid.NAMESPACE_URL, f"madbench:{slug}:{lock_sha}"))
    tag = str(lock_entry(slug)["ref"]).rsplit(":", 1)[1]
    bom.metadata.component = Component(
        name=f"madbench/{slug}", version=tag, type=ComponentType.CONTAINER,
        bom_ref=f"madbench/{slug}",
        properties=[Property(name="madbench:requirements-lock-sha256", value=lock_sha)])
    overrides = _overrides()
    for pin in parse_lock(text):
        purl = PackageURL("pypi", None, pin.name, pin.version)
        licenses, source = _licenses(metadata.get(pin.name, {})), "wheel core metadata"
        if not licenses and pin.name in overrides:
            licenses = [LicenseFactory().make_from_string(overrides[pin.name]["license"])]
            source = f"images/licenses.yaml: {overrides[pin.name]['source']}"
        component = Component(
            name=pin.name, version=pin.version, type=ComponentType.LIBRARY, purl=purl,
            bom_ref=str(purl), licenses=licenses,
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=h) for h in pin.hashes],
            properties=[Property(name="madbench:license-source",
                                 value=source if licenses else "none")])
        bom.components.add(component)
        bom.register_dependency(bom.metadata.component, [component])
    data = json.loads(JsonV1Dot6(bom).output_as_string())
    data["metadata"].pop("timestamp", None)  # deterministic: the lock, not the clock
    return json.dumps(data, indent=1, sort_keys=True) + "\n"


def locked_set(slug: str) -> str:
    """The image's whole locked set (its lock on its parents'), as one lock text."""
    from madbench_common.imagefactory.images import effective_lock, load_image

    return effective_lock(load_image(slug))


def write_sbom(slug: str) -> Path:
    """Write ``images/<slug>/sbom.cdx.json`` and record it in the images lock (``sbom:``
    path, sha256, the sha256 of the locked set it describes, and the image it belongs to:
    the registry digest once pinned, else the local image id, else ``null`` for a lock not
    yet built)."""
    from madbench_common.imagefactory.images import load_image

    text = locked_set(slug)
    if not parse_lock(text):
        raise ConfigError(f"images/{slug}: nothing locked, so no SBOM (make lock IMAGE={slug})")
    out = IMAGES / slug / "sbom.cdx.json"
    out.write_text(make_sbom(slug, text, wheel_metadata(text, load_image(slug).python,
                                                        f"images/{slug}")))
    record_sbom(slug, out, text)
    return out


def record_sbom(slug: str, sbom: Path, locked: str, path: Path | None = None) -> None:
    """Set the slug's ``sbom:`` block: which SBOM describes which locked set and image."""
    path = path or LOCK
    record = {"path": sbom.relative_to(path.parent.parent).as_posix(),
              "sha256": hashlib.sha256(sbom.read_bytes()).hexdigest(),
              "lock_sha256": hashlib.sha256(locked.encode()).hexdigest()}
    update_entry(slug, lambda e: {**e, "sbom": {**record, "image": image_identity(e)}}, path)


def sbom_problems(slug: str, lock_path: Path | None = None) -> list[str]:
    """Why ``images/<slug>``'s SBOM is missing, stale, invalid or lacks licences."""
    entry = read_lock(lock_path).get(slug, {})
    locked = locked_set(slug)
    record = entry.get("sbom")
    if record is None:
        return [f"{slug}: no sbom recorded (python -m madbench_common.imagefactory.sbom {slug})"]
    sbom = IMAGES.parent / record["path"]
    problems = []
    if hashlib.sha256(locked.encode()).hexdigest() != record["lock_sha256"]:
        problems.append(f"{slug}: the SBOM describes an older lock; regenerate it")
    if hashlib.sha256(sbom.read_bytes()).hexdigest() != record["sha256"]:
        problems.append(f"{slug}: {record['path']} differs from its recorded sha256")
    doc = json.loads(sbom.read_text())
    names = {(c["name"], c["version"]) for c in doc["components"]}
    pins = {(p.name, p.version) for p in parse_lock(locked)}
    if names != pins:
        problems.append(f"{slug}: SBOM components differ from the lock: {names ^ pins}")
    unlicensed = sorted(c["name"] for c in doc["components"] if not c.get("licenses"))
    if unlicensed:
        problems.append(f"{slug}: no licence found for {', '.join(unlicensed)}")
    return problems


def _main(argv: Sequence[str] | None = None) -> int:
    from madbench_common.imagefactory.images import all_images

    slugs = list(argv if argv is not None else sys.argv[1:]) or [i.slug for i in all_images()]
    for slug in slugs:
        try:
            out = write_sbom(slug)
        except ConfigError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"{slug}: {out.relative_to(IMAGES.parent)}")
        for problem in sbom_problems(slug):
            print(f"  warning: {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
