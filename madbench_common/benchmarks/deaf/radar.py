"""The radar figure (DEAF Figure 5): one polygon per model over conflict type × level axes.

Drawn twice from the same geometry, with no plotting dependency (the images carry none):
as SVG for the HTML report, and as a PNG rasterised here with numpy (even-odd polygon
fill, stamped strokes, a 5×7 bitmap font for labels) and written with zlib.
"""

from __future__ import annotations

import html
import struct
import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["PALETTE", "radar_png", "radar_svg"]

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22")
_SIZE, _RADIUS = 640, 220
_FONT = {
    "A": (14, 17, 17, 31, 17, 17, 17), "B": (30, 17, 17, 30, 17, 17, 30),
    "C": (14, 17, 16, 16, 16, 17, 14), "D": (30, 17, 17, 17, 17, 17, 30),
    "E": (31, 16, 16, 30, 16, 16, 31), "F": (31, 16, 16, 30, 16, 16, 16),
    "G": (14, 17, 16, 23, 17, 17, 15), "H": (17, 17, 17, 31, 17, 17, 17),
    "I": (14, 4, 4, 4, 4, 4, 14), "J": (7, 2, 2, 2, 2, 18, 12),
    "K": (17, 18, 20, 24, 20, 18, 17), "L": (16, 16, 16, 16, 16, 16, 31),
    "M": (17, 27, 21, 21, 17, 17, 17), "N": (17, 17, 25, 21, 19, 17, 17),
    "O": (14, 17, 17, 17, 17, 17, 14), "P": (30, 17, 17, 30, 16, 16, 16),
    "Q": (14, 17, 17, 17, 21, 18, 13), "R": (30, 17, 17, 30, 20, 18, 17),
    "S": (15, 16, 16, 14, 1, 1, 30), "T": (31, 4, 4, 4, 4, 4, 4),
    "U": (17, 17, 17, 17, 17, 17, 14), "V": (17, 17, 17, 17, 17, 10, 4),
    "W": (17, 17, 17, 21, 21, 21, 10), "X": (17, 17, 10, 4, 10, 17, 17),
    "Y": (17, 17, 17, 10, 4, 4, 4), "Z": (31, 1, 2, 4, 8, 16, 31),
    "0": (14, 17, 19, 21, 25, 17, 14), "1": (4, 12, 4, 4, 4, 4, 14),
    "2": (14, 17, 1, 2, 4, 8, 31), "3": (31, 2, 4, 2, 1, 17, 14),
    "4": (2, 6, 10, 18, 31, 2, 2), "5": (31, 16, 30, 1, 1, 17, 14),
    "6": (6, 8, 16, 30, 17, 17, 14), "7": (31, 1, 2, 4, 8, 8, 8),
    "8": (14, 17, 17, 14, 17, 17, 14), "9": (14, 17, 17, 15, 1, 2, 12),
    "-": (0, 0, 0, 31, 0, 0, 0), ".": (0, 0, 0, 0, 0, 12, 12), "+": (0, 4, 4, 31, 4, 4, 0),
    "%": (24, 25, 2, 4, 8, 19, 3), "(": (2, 4, 8, 8, 8, 4, 2), ")": (8, 4, 2, 2, 2, 4, 8),
    "_": (0, 0, 0, 0, 0, 0, 31), "/": (0, 1, 2, 4, 8, 16, 0), ":": (0, 12, 12, 0, 12, 12, 0),
    "@": (14, 17, 23, 21, 23, 16, 14), " ": (0,) * 7,
}
Canvas = npt.NDArray[np.float64]


def _points(values: Sequence[float], cx: float, cy: float) -> list[tuple[float, float]]:
    n = len(values)
    return [(cx + _RADIUS * v * np.sin(2 * np.pi * i / n),
             cy - _RADIUS * v * np.cos(2 * np.pi * i / n)) for i, v in enumerate(values)]


def _clean(values: Sequence[float]) -> list[float]:
    return [0.0 if v is None or not np.isfinite(v) else float(min(max(v, 0.0), 1.0))
            for v in values]


def radar_svg(axes: Sequence[str], series: Mapping[str, Sequence[float]], title: str) -> str:
    """An SVG radar: ``series`` maps a model to one value in [0, 1] per axis."""
    c = _SIZE / 2
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_SIZE}" height="{_SIZE + 40}" '
           f'font-family="sans-serif" font-size="12">',
           f'<text x="{c}" y="20" text-anchor="middle" font-size="15">{html.escape(title)}</text>']
    for ring in (0.25, 0.5, 0.75, 1.0):
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in _points([ring] * len(axes), c, c + 10))
        out.append(f'<polygon points="{pts}" fill="none" stroke="#ccc"/>')
    for (x, y), name in zip(_points([1.12] * len(axes), c, c + 10), axes):
        out.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="middle">{html.escape(name)}</text>')
    for i, (model, values) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        pts = " ".join(f"{x:.1f},{y:.1f}" for x, y in _points(_clean(values), c, c + 10))
        out.append(f'<polygon points="{pts}" fill="{color}" fill-opacity="0.12" '
                   f'stroke="{color}" stroke-width="2"><title>{html.escape(model)}</title>'
                   "</polygon>")
        out.append(f'<text x="12" y="{_SIZE - 8 - 16 * (len(series) - 1 - i) + 30}" '
                   f'fill="{color}">■ {html.escape(model)}</text>')
    return "\n".join([*out, "</svg>"])


def _rgb(color: str) -> npt.NDArray[np.float64]:
    return np.array([int(color[i: i + 2], 16) / 255 for i in (1, 3, 5)])


def _fill(img: Canvas, pts: list[tuple[float, float]], color: str, alpha: float) -> None:
    ys, xs = np.mgrid[0: img.shape[0], 0: img.shape[1]] + 0.5
    inside = np.zeros(img.shape[:2], bool)
    for (x1, y1), (x2, y2) in zip(pts, pts[1:] + pts[:1]):
        if y1 == y2:
            continue
        crosses = (y1 > ys) != (y2 > ys)
        inside ^= crosses & (xs < (x2 - x1) * (ys - y1) / (y2 - y1) + x1)
    img[inside] = img[inside] * (1 - alpha) + _rgb(color) * alpha


def _stroke(img: Canvas, pts: list[tuple[float, float]], color: str, width: int,
            closed: bool = True) -> None:
    rgb, r = _rgb(color), max(width // 2, 0)
    segs = list(zip(pts, pts[1:] + pts[:1])) if closed else list(zip(pts, pts[1:]))
    for (x1, y1), (x2, y2) in segs:
        steps = int(max(abs(x2 - x1), abs(y2 - y1)) * 2) + 1
        for t in np.linspace(0.0, 1.0, steps):
            x, y = round(x1 + t * (x2 - x1)), round(y1 + t * (y2 - y1))
            img[max(y - r, 0): y + r + 1, max(x - r, 0): x + r + 1] = rgb


def _text(img: Canvas, text: str, x: float, y: float, color: str, scale: int = 2,
          center: bool = False) -> None:
    text = text.upper()
    width = len(text) * 6 * scale
    x0, y0, rgb = int(x - width / 2 if center else x), int(y - 3.5 * scale), _rgb(color)
    for k, ch in enumerate(text):
        for row, bits in enumerate(_FONT.get(ch, _FONT["_"])):
            for col in range(5):
                if bits >> (4 - col) & 1:
                    px, py = x0 + (6 * k + col) * scale, y0 + row * scale
                    img[max(py, 0): py + scale, max(px, 0): px + scale] = rgb


def _png(img: Canvas) -> bytes:
    data = (np.clip(img, 0, 1) * 255).astype(np.uint8)
    raw = b"".join(b"\x00" + data[y].tobytes() for y in range(data.shape[0]))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", data.shape[1], data.shape[0], 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def radar_png(axes: Sequence[str], series: Mapping[str, Sequence[float]], title: str) -> bytes:
    """The same radar as :func:`radar_svg`, rasterised to PNG bytes."""
    height = _SIZE + 40 + 20 * max(len(series) - 1, 0)
    img = np.ones((height, _SIZE, 3))
    c = _SIZE / 2
    _text(img, title, c, 18, "#000000", center=True)
    for ring in (0.25, 0.5, 0.75, 1.0):
        _stroke(img, _points([ring] * len(axes), c, c + 10), "#cccccc", 1)
    for (x, y), name in zip(_points([1.14] * len(axes), c, c + 10), axes):
        _text(img, name, x, y, "#333333", center=True)
    for i, (model, values) in enumerate(series.items()):
        color = PALETTE[i % len(PALETTE)]
        pts = _points(_clean(values), c, c + 10)
        _fill(img, pts, color, 0.12)
        _stroke(img, pts, color, 2)
        _text(img, model, 12, _SIZE + 10 + 20 * i, color)
    return _png(img)
