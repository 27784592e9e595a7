"""What a pass checks before it builds or runs anything: the upstream sources each image
unpacks are fetched or mirrored, each image's tiny-weights callable exists, every required
secret key is in the local secret set; and which committed evidence ran on other code."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from madbench_common.cluster.argo_local import Pod, SecretRef
from madbench_common.cluster.lint import check_target
from madbench_common.cluster.rehearsal.profile import RECORDS, ROOT
from madbench_common.imagefactory.codedigest import code_digest


def stale_evidence(digest: str | None = None, records: Path | None = None,
                   lock: Path | None = None) -> list[str]:
    """What of the committed evidence ran on other code than ``digest`` (default: this
    checkout's :func:`code_digest`): the rehearsal record, and the image test of every
    image that installs ``madbench_common`` (a leaf) in ``images/images.lock.yaml``.
    One line for the record, one naming every stale image test; a record without a digest
    (older than this check) counts as stale."""
    from madbench_common.imagefactory.imagelock import read_lock
    from madbench_common.imagefactory.images import load_image

    digest = digest or code_digest()
    records = records or RECORDS
    out = []
    rec = json.loads(records.read_text()) if records.is_file() else {}
    if rec.get("code_digest") != digest:
        out.append(f"{records.name}: the committed pass ran on code "
                   f"{str(rec.get('code_digest') or 'not recorded')[:12]}, this checkout's is "
                   f"{digest[:12]}: run make rehearsal")
    tests = [slug for slug, entry in sorted(read_lock(lock).items())
             if (test := entry.get("image_test")) and test.get("code_digest") != digest
             and (ROOT / "images" / slug / "image.yaml").is_file() and load_image(slug).leaf]
    if tests:
        out.append(f"images.lock.yaml: the image tests of {', '.join(tests)} ran on other code "
                   f"than this checkout's {digest[:12]} (or did not record it): rebuild each "
                   "(make image IMAGE=…) and run make image-test IMAGE=…")
    return out


def upstream_problems(slugs: Iterable[str]) -> list[str]:
    """Upstream sources (``upstream_src``) that neither are fetched already nor reachable
    through ``$MADBENCH_UPSTREAM_GIT`` mirrors; empty when every build can get its code."""
    from madbench_common.imagefactory.images import load_image

    template = os.environ.get("MADBENCH_UPSTREAM_GIT", "")
    missing = []
    for slug in sorted(set(slugs)):
        if not (ROOT / "images" / slug / "image.yaml").is_file():
            continue
        info = load_image(slug)
        for src in info.upstream_src:
            stamp = info.dir / ".upstream" / src.dest / ".madbench-commit"
            # the stamp is "<commit> <tree sha256>" (build.upstream.fetch_source); a tree
            # already unpacked at the pinned commit needs no mirror
            if stamp.is_file() and stamp.read_text().split()[:1] == [src.commit]:
                continue
            owner, name = src.repo.split("/", 1)
            if template:
                mirror = template.format(owner=owner, name=name)
                ok = subprocess.run(["git", "--git-dir", mirror, "cat-file", "-e",
                                     f"{src.commit}^{{commit}}"], capture_output=True)
                if ok.returncode == 0:
                    continue
                missing.append(f"{slug}: {src.repo}@{src.commit[:12]} (mirror {mirror} is "
                               "missing or lacks the commit)")
            else:
                missing.append(f"{slug}: {src.repo}@{src.commit[:12]}")
    return missing


def weights_problems(slugs: Iterable[str]) -> list[str]:
    """Images whose ``image_test.weights`` callable does not exist in this checkout, or
    that fetch weights (``weights.yaml``) but have no callable to write tiny ones."""
    from madbench_common.imagefactory.images import load_image

    out = []
    for slug in sorted(set(slugs)):
        folder = ROOT / "images" / slug
        if not (folder / "image.yaml").is_file():
            continue
        test = load_image(slug).image_test
        callable_ = test.weights if test is not None else ""
        if callable_ and (why := check_target(callable_)):
            out.append(f"images/{slug}/image.yaml image_test.weights {callable_}: {why}")
        elif not callable_ and (folder / "weights.yaml").is_file():
            doc = yaml.safe_load((folder / "weights.yaml").read_text()) or {}
            wanted = sum(len(v) for v in doc.values() if isinstance(v, list))
            if wanted:
                out.append(f"images/{slug}: weights.yaml fetches {wanted} entries but "
                           "image.yaml has no image_test.weights callable: its pods get an "
                           "empty /weights")
    return out


def _upstream_message(missing: list[str]) -> str:
    return ("these images unpack upstream sources that this machine has not fetched:\n  "
            + "\n  ".join(missing) + "\nMake a bare mirror of each repository on a machine "
            "that reaches GitHub, e.g. `git clone --mirror https://github.com/<owner>/<name> "
            "/srv/git/<owner>+<name>/repo`, copy them here and set "
            "MADBENCH_UPSTREAM_GIT=/srv/git/{owner}+{name}/repo (the image builder reads "
            "them there; images/README.md)")


def secret_problems(pods: Iterable[Pod], available: Mapping[str, Iterable[str]]) -> list[str]:
    """Each required ``secretKeyRef`` no local secret holds, as ``pod: secret/key`` (on a
    cluster such a pod never starts: CreateContainerConfigError). The deaf rehearsal found
    ``bsc_speech``'s ``AZURE_SPEECH_KEY`` so, two minutes into the run; now the preflight
    names it before anything is built."""
    keys = {name: set(values) for name, values in available.items()}
    out: list[str] = []
    for pod in pods:
        for _, value in pod.env:
            if isinstance(value, SecretRef) and not value.optional \
                    and value.key not in keys.get(value.secret, set()):
                out.append(f"{pod.node}: secret {value.secret!r} has no key {value.key!r}")
    return sorted(set(out))
