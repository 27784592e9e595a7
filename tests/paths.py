"""Where the tests find the checkout's own files: the repository root and its fixed places."""

from __future__ import annotations

from pathlib import Path

__all__ = ["CATALOG", "IMAGES", "LOCK", "ROOT"]

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "images"
LOCK = IMAGES / "images.lock.yaml"
"""The images lock: every image's reference, pinned by digest once pushed."""
CATALOG = ROOT / "madbench_common" / "models" / "catalog"
