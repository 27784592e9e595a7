"""A headless-Chromium screenshot of an HTML report (the report's rendering test).

:func:`screenshot` writes a PNG of the page in Debian's ``chromium``; :func:`dump_dom`
returns the DOM after a probe script ran; :func:`find_browser` names the binary, or
``None`` where no Chromium is installed (``apt-get install chromium``; ``make test``
installs it).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from madbench_common.core.errors import EnvironmentMissing

__all__ = ["BROWSERS", "dump_dom", "find_browser", "screenshot"]

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """The first Chromium-family binary on ``PATH``."""
    return next((p for p in (shutil.which(b) for b in BROWSERS) if p), None)


def _flags(profile: str, width: int, height: int) -> list[str]:
    return ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-quic", f"--user-data-dir={profile}", f"--window-size={width},{height}",
            "--virtual-time-budget=5000"]


def dump_dom(html: Path, probe: str = "", *, width: int = 1400, height: int = 900,
             timeout: float = 180.0) -> str:
    """The DOM of ``html`` after its scripts and then ``probe`` (JavaScript) ran, loaded
    headless in a ``width`` × ``height`` window (``probe`` runs on a copy of the page).

    The probe clicks, measures and writes what it found into the DOM; the DOM comes back
    as Chromium serialises it, so a test reads the page as a person does, with no DevTools
    port."""
    browser = find_browser()
    if browser is None:
        raise EnvironmentMissing("no Chromium to load the page with (apt-get install "
                                 "chromium)")
    with tempfile.TemporaryDirectory(prefix="madbench-chromium-") as profile:
        page = Path(profile) / "page.html"
        text = html.read_text(encoding="utf-8")
        end = text.rfind("</body>")
        end = end if end >= 0 else len(text)
        page.write_text(text[:end] + f"<script>{probe}</script>" + text[end:],
                        encoding="utf-8")
        cmd = [browser, *_flags(profile, width, height), "--dump-dom", page.resolve().as_uri()]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              check=False)
    if done.returncode != 0 or "<html" not in done.stdout:
        raise RuntimeError(f"{browser} failed ({done.returncode}): {done.stderr[-800:]}")
    return done.stdout


def screenshot(html: Path, png: Path, *, width: int = 1400, height: int = 2400,
               fragment: str = "", timeout: float = 180.0) -> Path:
    """Render ``html`` headless and write ``png``; raises if Chromium is missing or fails.

    The page is loaded from the file system (``--headless``, no network, no GPU) in a
    ``width`` × ``height`` window. ``fragment`` (an element id, e.g. ``figures``) renders the
    page from that element on: the same document and style with the body cut to start
    there (headless Chromium does not repaint after scrolling to an anchor, so the cut
    replaces the scroll)."""
    browser = find_browser()
    if browser is None:
        raise EnvironmentMissing("no Chromium to take a screenshot with (apt-get install "
                                 "chromium)")
    with tempfile.TemporaryDirectory(prefix="madbench-chromium-") as profile:
        page = _from(html, fragment, Path(profile)) if fragment else html
        url = page.resolve().as_uri()
        cmd = [browser, *_flags(profile, width, height), f"--screenshot={png.resolve()}", url]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              check=False)
    if done.returncode != 0 or not png.is_file():
        raise RuntimeError(f"{browser} failed ({done.returncode}): {done.stderr[-800:]}")
    return png


def _from(html: Path, fragment: str, tmp: Path) -> Path:
    """A copy of ``html`` whose body starts at the element with id ``fragment``."""
    text = html.read_text(encoding="utf-8")
    at = text.find(f"id={fragment}")
    at = at if at >= 0 else text.find(f'id="{fragment}"')
    body = text.find("<body>")
    if at < 0 or body < 0:
        raise ValueError(f"{html}: no element with id {fragment!r}")
    start = text.rfind("<", 0, at)
    page = tmp / "page.html"
    page.write_text(text[:body + len("<body>")] + text[start:], encoding="utf-8")
    return page
