"""Input text made safe for where it is shown: a terminal, rich markup, Markdown, a spreadsheet.

Clip ids, paths, speakers, transcripts and captions come from the user's sources and may
hold anything: terminal escape sequences (``ESC [ 2 J``), C1 controls, right-to-left
overrides that reorder what a reader sees, rich markup (``[link=…]``), Markdown or HTML
(``<script>``), a spreadsheet formula (``=cmd|…``). Every place that inserts such text
into an output passes it through the function for that output; the text keeps its
meaning, and what would act on the reader is shown as a visible escape instead.
"""

from __future__ import annotations

import re

__all__ = ["FORMULA_START", "console_text", "formula_safe", "md_text", "visible"]

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Bidirectional marks, embeddings, overrides and isolates (Unicode TR9)."""
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff\u2028\u2029]")
_CONTROL_LINES = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff\u2028\u2029]")
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
"""First characters that make a spreadsheet read a cell as a formula (OWASP CSV injection;
the full-width forms are read as formulas by some spreadsheets too)."""
_MD_SPECIAL = re.compile(r"([\\`|]|(?<=\])[(\[])")


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    if "\udc80" <= ch <= "\udcff":  # a byte that was not UTF-8 (surrogate escape)
        return f"\\x{ord(ch) - 0xdc00:02x}"
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def visible(text: object, newlines: bool = False) -> str:
    """``text`` with every control character (C0 but tab and, with ``newlines``, line feed;
    DEL; C1; bidirectional controls; line and paragraph separators; lone surrogates)
    replaced by a visible ``\\xNN`` or ``\\uNNNN``: nothing in it acts on a terminal."""
    pattern = _CONTROL if newlines else _CONTROL_LINES
    return pattern.sub(_escape, str(text))


def console_text(text: object) -> str:
    """``text`` for a rich console that renders markup: :func:`visible`, on one line, and
    rich markup escaped (``[red]`` prints as written)."""
    from rich.markup import escape

    return escape(visible(text))


def md_text(text: object) -> str:
    """``text`` for a Markdown table cell or list item: on one line, controls visible,
    HTML's ``& < >`` as entities (no tag, script or autolink survives a renderer), and
    backslash escapes for table cells and code spans (``| ` \\``) and for the ``(`` or
    ``[`` after a ``]`` that would make a link; a bracketed interval such as
    ``[0.85, 0.95]`` and emphasis characters stay as they are (they inject nothing)."""
    one = visible(str(text).replace("\r\n", " ").replace("\n", " ").replace("\r", " "))
    one = one.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", one)


def formula_safe(text: str) -> str:
    """``text`` that a spreadsheet shows as text: a leading ``'`` when it would start a
    formula (:data:`FORMULA_START`)."""
    return "'" + text if text.startswith(FORMULA_START) else text
