"""Find links in a note body: a line scanner for block context, markdown-it-py for inline syntax.

A full markdown-it-py parse of every note costs ~150x the time of reading the files (measured on
thellade, see docs/adr-001-fast-scan.md), so the block structure that decides whether a line can hold a
link at all (fenced code, indented code, ``%%`` comment blocks) is tracked by a small line scanner, and
only lines that may hold a link go through markdown-it-py's inline parser with the Obsidian rules. The
scanner is tested against a full markdown-it-py parse on the shared vaults (tests/test_scan_oracle.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token

from vault2okf.mdit_obsidian import make_inline_parser, track_link_spans

_FENCE = re.compile(r"^[ \t]*(?:>[ \t]?)*[ \t]*(`{3,}|~{3,})(.*)$")
_LIST_ITEM = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
_INDENTED = re.compile(r"^(?: {4}|\t)")


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
    md = make_inline_parser()
    track_link_spans(md)
    return md


def code_mask(lines: list[str]) -> list[bool]:
    """True for lines that cannot hold links: fenced or indented code, and ``%%`` comment blocks."""
    blocked = _blocked_lines(lines)
    return [i in blocked or _indented_code(lines, i) for i in range(len(lines))]


def _blocked_lines(lines: list[str]) -> set[int]:
    """Lines inside fences or multi-line ``%%`` comments (fence and comment lines included).

    A fence opened inside a blockquote ends with the blockquote, as in CommonMark.
    """
    blocked: set[int] = set()
    fence: tuple[str, int, bool] | None = None
    in_comment = False
    for i, line in enumerate(lines):
        if fence is not None and fence[2] and not line.lstrip().startswith(">"):
            fence = None
        if fence is not None:
            blocked.add(i)
            fence = _fence_after(line, fence)
        elif in_comment:
            in_comment = "%%" not in line
            if in_comment:
                blocked.add(i)
        elif ("`" in line or "~" in line) and (opened := _fence_open(line)) is not None:
            fence = opened
            blocked.add(i)
        elif "%%" in line and line.lstrip().startswith("%%") and line.count("%%") % 2 == 1:
            in_comment = True
            blocked.add(i)
    return blocked


def _indented_code(lines: list[str], i: int) -> bool:
    """An indented line after a blank line, with no list item above it in the same block: CommonMark code."""
    if not _INDENTED.match(lines[i]) or not lines[i].strip():
        return False
    j = i - 1
    saw_blank = False
    while j >= 0 and (not lines[j].strip() or _INDENTED.match(lines[j])):
        if _LIST_ITEM.match(lines[j]):
            return False
        saw_blank = saw_blank or not lines[j].strip()
        j -= 1
    if j < 0:
        return saw_blank or i == 0
    return saw_blank and not _LIST_ITEM.match(lines[j]) and not _paragraph_in_list(lines, j)


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


def find_spans(lines: list[str]) -> Iterator[Span]:
    """Every wikilink, embed, markdown link and image outside code and comments."""
    candidates = [i for i, line in enumerate(lines) if "[[" in line or "](" in line]
    if not candidates:
        return
    blocked = _blocked_lines(lines)
    md = _inline_parser()
    for i in candidates:
        if i in blocked or _indented_code(lines, i):
            continue
        for token in md.parseInline(lines[i])[0].children or ():
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
