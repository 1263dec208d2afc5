"""Parse one note: decode the bytes, split frontmatter (python-frontmatter's YAML handler), find its links.

Pure: bytes in, a ``Note`` out. Problems (bad bytes, malformed YAML) become ``Problem`` records, never
exceptions, and the note is still parsed as well as it can be.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml
from frontmatter.default_handlers import YAMLHandler

from vault2okf.scan import CodeLines, Span, find_spans, link_label

_FM_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)
_FM_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+)\]\]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\[*_\"'])")
LIST_LEAD = re.compile(r"^[\s>]*(?:[-*+]|\d{1,9}[.)])?\s*(?:\[[ xX]\]\s*)?")  # quote, list and task markers


@dataclass(frozen=True)
class Link:
    line: int  # 1-based line in the source file
    col: int  # offset of ``raw`` in that line (-1 for frontmatter links)
    raw: str  # the link exactly as written
    target: str  # path part, percent-decoded, without anchor ("" for a link into the same note)
    anchor: str | None  # "Heading", "H1#H2" or "^block"
    label: str | None  # alias text, markdown link text, or an embed's size/caption
    embed: bool
    syntax: str  # "wiki" | "markdown" | "frontmatter"
    context: str = ""  # the sentence or list item holding the link, as plain-ish text


@dataclass(frozen=True)
class Problem:
    kind: str  # "encoding" | "frontmatter"
    message: str
    line: int | None = None


@dataclass(frozen=True)
class Note:
    path: str  # vault-relative, "/" separators, NFC
    frontmatter: dict[str, Any]
    frontmatter_text: str | None
    frontmatter_error: str | None
    body: str
    body_line: int  # 1-based source line of the first body line
    links: tuple[Link, ...]
    problems: tuple[Problem, ...] = field(default=())
    code: CodeLines | None = field(default=None, compare=False, repr=False)  # the body's code/comment lines


def decode(data: bytes) -> tuple[str, Problem | None]:
    """UTF-8 (BOM dropped, newlines normalised); undecodable bytes fall back to Latin-1, reported."""
    problem = None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        text = data.decode("latin-1")
        problem = Problem("encoding", f"not valid UTF-8 (byte 0x{data[exc.start]:02x}); read as Latin-1", line)
    return text.replace("\r\n", "\n").replace("\r", "\n"), problem


def split_frontmatter(text: str) -> tuple[str | None, str, int]:
    """(frontmatter text or None, body, 1-based line where the body starts)."""
    if not text.startswith("---\n"):
        return None, text, 1
    close = _FM_CLOSE.search(text, 4)
    if close is None:
        return None, text, 1
    fm = text[4 : close.start()]
    body = text[close.end() + 1 :] if close.end() < len(text) else ""
    return fm, body, fm.count("\n") + 3 if fm else 3


def load_frontmatter(fm: str | None) -> tuple[dict[str, Any], str | None]:
    if fm is None or not fm.strip():
        return {}, None
    try:
        data = YAMLHandler().load(fm)
    except yaml.YAMLError as exc:
        return {}, " ".join(str(exc).split())
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, f"frontmatter is a {type(data).__name__}, not a mapping of keys to values"
    return {str(k): v for k, v in data.items()}, None


def parse_note(path: str, data: bytes) -> Note:
    text, problem = decode(data)
    problems = [problem] if problem else []
    fm_text, body, body_line = split_frontmatter(text)
    meta, error = load_frontmatter(fm_text)
    if error:
        problems.append(Problem("frontmatter", f"malformed frontmatter: {error}", 2))
    elif fm_text is None and text.startswith("---\n"):
        problems.append(Problem("frontmatter", "frontmatter opened with --- is never closed; read as body", 1))
    code = CodeLines(body.split("\n"))
    links = [*_frontmatter_links(meta, fm_text or ""), *_body_links(code, body_line)]
    return Note(
        path=unicodedata.normalize("NFC", path),
        frontmatter=meta,
        frontmatter_text=fm_text,
        frontmatter_error=error,
        body=body,
        body_line=body_line,
        links=tuple(links),
        problems=tuple(problems),
        code=code,
    )


def split_wikilink(inner: str) -> tuple[str, str | None, str | None]:
    """``Note#Heading|label`` -> (target, anchor, label); ``\\|`` (a pipe escaped inside a table) splits too."""
    target_part, sep, label = inner.replace("\\|", "|").partition("|")
    target, _, anchor = target_part.partition("#")
    return target.strip(), anchor.strip() or None, label.strip() if sep else None


def _body_links(code: CodeLines, first_line: int) -> Iterator[Link]:
    lines = code.lines
    for span in find_spans(lines, code):
        link = _link_from_span(lines[span.line], span, first_line + span.line)
        if link is not None:
            yield link


def _link_from_span(line: str, span: Span, lineno: int) -> Link | None:
    raw, context = line[span.start : span.end], _context(line, span.start)
    if span.kind == "wikilink":
        target, anchor, label = split_wikilink(span.inner)
        return Link(lineno, span.start, raw, _nfc(target), anchor, label, span.embed, "wiki", context)
    parts = urlsplit(span.inner)
    if _SCHEME.match(span.inner) or (not parts.path and not parts.fragment) or span.inner.startswith("#"):
        return None  # external URL or same-page anchor: already a valid markdown link
    label = span.label if span.kind == "image" else link_label(line, span)
    anchor = unquote(parts.fragment) or None
    return Link(lineno, span.start, raw, _nfc(unquote(parts.path)), anchor, label, span.embed, "markdown", context)


def _frontmatter_links(meta: dict[str, Any], fm_text: str) -> Iterator[Link]:
    """Wikilinks written in frontmatter values (``previous: "[[Session 4]]"``), found in the YAML text."""
    if not meta or "[[" not in fm_text:
        return
    line, last = 2, 0
    for m in _FM_WIKILINK.finditer(fm_text):
        line += fm_text.count("\n", last, m.start())
        last = m.start()
        target, anchor, label = split_wikilink(m.group(2))
        yield Link(line, -1, m.group(0), _nfc(target), anchor, label, bool(m.group(1)), "frontmatter", "")


def _context(line: str, col: int) -> str:
    """The sentence of ``line`` that holds column ``col``, without list or quote markers."""
    start = 0
    for m in _SENTENCE_END.finditer(line):
        if m.start() >= col:
            return LIST_LEAD.sub("", line[start : m.start()]).strip()[:400]
        start = m.end()
    return LIST_LEAD.sub("", line[start:]).strip()[:400]


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)
