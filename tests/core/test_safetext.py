"""Input text made safe for a terminal, rich markup, Markdown and spreadsheets."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from madbench_common.core.safetext import console_text, formula_safe, md_text, visible

HOSTILE = ("\x1b[31mred\x1b[0m \x1b]0;title\x07 \x9b2J \u202eevil\u2066 \x00\x7f"
           " [bold]b[/bold] [link=http://x]l[/link] <script>alert(1)</script> a|b"
           " [t](javascript:alert(1)) `c` \udc80 line\nnext")


def test_visible_leaves_no_control_character() -> None:
    out = visible(HOSTILE)
    assert all(ch == " " or ch.isprintable() for ch in out), ascii(out)
    assert "\\x1b[31mred" in out and "\\u202eevil\\u2066" in out and "\\x9b2J" in out
    assert "\\x80" in out  # a byte that was not UTF-8
    assert "\\x0a" in out and "\n" in visible("a\nb", newlines=True)
    assert visible("plain café 日本 — ok") == "plain café 日本 — ok"


def test_console_text_is_printed_as_written() -> None:
    buf = io.StringIO()
    table = Table()
    table.add_column("x")
    table.add_row(console_text(HOSTILE))
    Console(file=buf, width=400, force_terminal=True, color_system=None).print(table)
    out = buf.getvalue()
    assert "\x1b" not in out and "\u202e" not in out and "\x9b" not in out
    assert "[bold]b[/bold]" in out and "[link=http://x]l[/link]" in out


def test_md_text_neutralises_html_links_and_cells() -> None:
    out = md_text(HOSTILE)
    assert "<" not in out and ">" not in out and "&lt;script&gt;" in out
    assert "a\\|b" in out and "]\\(javascript:" in out and "\\`c\\`" in out
    assert "\n" not in out and "\x1b" not in out
    assert md_text("AUC 0.91 [0.85, 0.95]") == "AUC 0.91 [0.85, 0.95]"  # intervals stay
    assert md_text("reference_cpu") == "reference_cpu"


def test_formula_safe() -> None:
    for text in ("=cmd|' /C calc'!A0", "+1", "-2+3", "@SUM(A1)", "\t=1", "\uff1d1"):
        assert formula_safe(text).startswith("'")
    assert formula_safe("a forest path") == "a forest path"
