"""Find links in a note body: a line scanner for block context, markdown-it-py for inline syntax.

A full markdown-it-py parse of every note costs ~150x the time of reading the files (measured on
thellade, see docs/adr-001-fast-scan.md), so the block structure that decides whether a line can hold a
link at all (fenced code, indented code, ``%%`` comment blocks) is tracked by a small line scanner, and
only lines that may hold a link go through markdown-it-py's inline parser with the Obsidian rules. The
scanner is tested against a full markdown-it-py parse on the shared vaults
(`tests/test_scan.py::test_fast_scanner_agrees_with_full_parse`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt
    from markdown_it.token import Token

_FENCE = re.compile(r"^[ \t]*(?:>[ \t]?)*[ \t]*(`{3,}|~{3,})(.*)$")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_INDENTED = re.compile(r"^(?: {4}|\t| {1,3}\t)")
_ITEM_PARTS = re.compile(r"^( *)([-*+]|\d{1,9}[.)])( *)")
_BLOCK_END = re.compile(r"^ {0,3}(?:#{1,6}(?:[ \t]|$)|(?:[-*_][ \t]*){3,}$|`{3,}[ \t]*$|~{3,}[ \t]*$)")


@dataclass(frozen=True)
class Span:
    """A link found by the inline parser: where it is, and what markdown-it made of it."""

    line: int  # 0-based line within the scanned text
    start: int  # column where the raw link starts
    end: int
    kind: str  # "wikilink" | "link" | "image"
    embed: bool
    inner: str  # wikilink inner text, or the link destination (href / src) as markdown-it normalised it
    label: str  # link text or image alt ("" for wikilinks)


@lru_cache(maxsize=1)
def _inline_parser() -> MarkdownIt:
    """The inline parser, built (and markdown-it-py imported) on the first note with a possible link: a convert
    that finds nothing changed never needs it."""
    from vault2okf.mdit_obsidian import make_inline_parser, track_link_spans

    md = make_inline_parser()
    track_link_spans(md)
    return md


def prepare_parser() -> None:
    """Build the inline parser now: called by a convert about to fork its workers, so that each inherits it."""
    _inline_parser()


class CodeLines:
    """Which lines of a body are code or comment: one block scan, indented-code checks only where asked.

    ``text(i)`` is line ``i`` as the inline parser should see it: the tail of a ``%%`` comment that began on
    an earlier line is blanked out (same length, so columns stay true).
    """

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.blocked, self.visible = _block_scan(lines)
        self._above: dict[int, tuple[int, bool]] = {}  # indented line -> (its anchor line, blank line between)
        self._in_list: dict[int, bool] = {}

    def __contains__(self, i: int) -> bool:
        return i in self.blocked or self._indented_code(i)

    def text(self, i: int) -> str:
        return self.visible.get(i, self.lines[i])

    def _indented_code(self, i: int) -> bool:
        """CommonMark indented code: 4+ columns in, not continuing a paragraph or (at its content column) a list
        item. What decides is the nearest line above that is a list item or not indented (the anchor), and
        whether a blank line lies between; anchors are remembered, so a block of n indented lines costs O(n)."""
        line = self.lines[i]
        if not line.strip() or not _INDENTED.match(line):
            return False
        anchor, saw_blank = self._anchor_above(i)
        if anchor < 0:
            return True
        prev = self.lines[anchor]
        if _LIST_ITEM.match(prev):
            return saw_blank and _indent(line) >= _content_column(prev) + 4
        if saw_blank:
            if anchor not in self._in_list:
                self._in_list[anchor] = _paragraph_in_list(self.lines, anchor)
            return not self._in_list[anchor]
        return bool(_BLOCK_END.match(prev))

    def _anchor_above(self, i: int) -> tuple[int, bool]:
        """(nearest line above ``i`` that is a list item or a non-blank unindented line, or -1; whether a blank
        line lies between). Every indented line passed on the way is remembered with its own answer."""
        if i in self._above:
            return self._above[i]
        passed: list[tuple[int, bool]] = []  # (line, is blank), nearest to i first
        anchor, blank = -1, False
        j = i - 1
        while j >= 0:
            if j in self._above:
                anchor, blank = self._above[j]
                break
            prev = self.lines[j]
            if prev.strip() and (_LIST_ITEM.match(prev) or not _INDENTED.match(prev)):
                anchor = j
                break
            passed.append((j, not prev.strip()))
            j -= 1
        for k, is_blank in reversed(passed):
            if not is_blank:
                self._above[k] = (anchor, blank)
            blank = blank or is_blank
        if not _LIST_ITEM.match(self.lines[i]):  # a list item is an anchor itself, never remembered as passed
            self._above[i] = (anchor, blank)
        return anchor, blank


def code_mask(lines: list[str]) -> list[bool]:
    """True for lines that cannot hold links: fenced or indented code, and ``%%`` comment blocks."""
    code = CodeLines(lines)
    return [i in code for i in range(len(lines))]


def _block_scan(lines: list[str]) -> tuple[set[int], dict[int, str]]:
    """Lines inside fences or ``%%`` comments, and lines whose start closes a comment opened earlier.

    A fence opened inside a blockquote ends with the blockquote, as in CommonMark. A ``%%`` comment runs
    from an unpaired ``%%`` to the next ``%%``, across lines, as in Obsidian.
    """
    blocked: set[int] = set()
    visible: dict[int, str] = {}
    fence: tuple[str, int, bool] | None = None
    in_comment = False
    for i, line in enumerate(lines):
        if fence is not None and fence[2] and not line.lstrip().startswith(">"):
            fence = None
        if fence is not None:
            blocked.add(i)
            fence = _fence_after(line, fence)
        elif in_comment:
            if "%%" not in line:
                blocked.add(i)
                continue
            close = line.index("%%") + 2
            visible[i] = " " * close + line[close:]
            in_comment = line.count("%%", close) % 2 == 1
        elif ("`" in line or "~" in line) and (opened := _fence_open(line)) is not None:
            fence = opened
            blocked.add(i)
        elif "%%" in line and line.count("%%") % 2 == 1:
            in_comment = True  # the inline rule hides the rest of this line
    return blocked, visible


def _indent(line: str) -> int:
    expanded = line.expandtabs(4)
    return len(expanded) - len(expanded.lstrip())


def _content_column(item: str) -> int:
    """Column where a list item's content starts (marker width plus 1-4 spaces)."""
    m = _ITEM_PARTS.match(item.expandtabs(4))
    if m is None:
        return 0
    gap = len(m.group(3))
    return len(m.group(1)) + len(m.group(2)) + (gap if 1 <= gap <= 4 else 1)


def _paragraph_in_list(lines: list[str], j: int) -> bool:
    """Whether the unindented non-blank line ``j`` continues a list item (lazy continuation)."""
    while j >= 0 and lines[j].strip():
        if _LIST_ITEM.match(lines[j]):
            return True
        j -= 1
    return False


def _fence_open(line: str) -> tuple[str, int, bool] | None:
    """(fence character, length, opened inside a blockquote) when ``line`` opens a fenced code block."""
    m = _FENCE.match(line)
    if m is None or (m.group(1)[0] == "`" and "`" in m.group(2)):
        return None
    return m.group(1)[0], len(m.group(1)), line.lstrip().startswith(">")


def _fence_after(line: str, fence: tuple[str, int, bool]) -> tuple[str, int, bool] | None:
    """The fence still open after ``line`` (None when the line closes it)."""
    m = _FENCE.match(line)
    closes = m is not None and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2).strip()
    return None if closes else fence


def find_spans(lines: list[str], code: CodeLines | None = None) -> Iterator[Span]:
    """Every wikilink, embed, markdown link and image outside code and comments."""
    candidates = [i for i, line in enumerate(lines) if "[[" in line or "](" in line]
    if not candidates:
        return
    code = CodeLines(lines) if code is None else code
    md = _inline_parser()
    for i in candidates:
        if i in code:
            continue
        for token in md.parseInline(code.text(i))[0].children or ():
            span = _span(i, token)
            if span is not None:
                yield span


def _span(i: int, token: Token) -> Span | None:
    meta = token.meta or {}
    if token.type == "wikilink":
        start = meta["offset"]
        return Span(i, start, start + len(token.content), "wikilink", meta["embed"], meta["inner"], "")
    if token.type == "link_open" and "span" in meta:
        start, end = meta["span"]
        return Span(i, start, end, "link", False, str(token.attrs.get("href", "")), "")
    if token.type == "image" and "span" in meta:
        start, end = meta["span"]
        return Span(i, start, end, "image", True, str(token.attrs.get("src", "")), token.content)
    return None


def link_label(line: str, span: Span) -> str:
    """The text between the brackets of a markdown link, as written."""
    raw = line[span.start : span.end]
    close = raw.rfind("](")
    open_ = 2 if raw.startswith("![") else 1
    return raw[open_:close] if close > 0 else ""
