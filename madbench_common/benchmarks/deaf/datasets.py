"""Where DEAF reads the paper's data sets (EMIS, DEMAND): a local folder or an ``s3://`` prefix.

On a laptop ``--emis`` and ``--demand`` name local copies. On a cluster the pods see no
user folder, so the workflow parameters ``deaf_sentences_emis``, ``esc_tts_<s>_emis`` and
``deaf_envlib_demand`` take ``s3://bucket/prefix`` URIs of copies uploaded to the object
store, with the same layout (EMIS: its WAVs and sentence table anywhere under the
prefix; DEMAND: ``<CODE>/ch01.wav``). Files are read into memory as needed (an EMIS clip
is ~5 s; a DEMAND channel ~5 min), credentials from the pod's ``AWS_*`` variables.
"""

from __future__ import annotations

from pathlib import Path

from madbench_common.core.errors import ConfigError

__all__ = ["has_file", "is_remote", "list_files", "read_file"]


def is_remote(root: str) -> bool:
    return root.startswith("s3://")


def _s3(root: str):  # type: ignore[no-untyped-def]
    from madbench_common.core.store import S3Store

    return S3Store(root)


def list_files(root: str, suffixes: tuple[str, ...], what: str) -> list[str]:
    """Paths relative to ``root`` of every file ending in one of ``suffixes`` (any case)."""
    if is_remote(root):
        names = _s3(root).list()
    else:
        base = Path(root)
        if not base.is_dir():
            raise ConfigError(f"{what} {root}: no such folder")
        names = [p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()]
    return sorted(n for n in names if n.lower().endswith(suffixes))


def read_file(root: str, rel: str) -> bytes:
    """The bytes of ``rel`` under ``root``."""
    if is_remote(root):
        return bytes(_s3(root).get_bytes(rel))
    return (Path(root) / rel).read_bytes()


def has_file(root: str, rel: str) -> bool:
    if is_remote(root):
        return bool(_s3(root).exists(rel))
    return (Path(root) / rel).is_file()
