"""Split an OKF concept doc body into heading sections sized for embedding. Pure: no I/O.

A note becomes sections at its headings (found with markdown-it, so `#` in code is not a heading). Sections
longer than `max_tokens` are cut at paragraph, then line, then token boundaries; tiny sections are merged
with their neighbours up to `min_tokens` (vaults have many one-line headings). Plugin code blocks, comments,
templater tags and block anchors are dropped; markdown links and images are reduced to their label text.
"""

import hashlib
import re
from dataclasses import dataclass, replace

from markdown_it import MarkdownIt
from markdown_it.token import Token

from retriever.tokens import count_tokens, token_spans

PLUGIN_FENCES = frozenset(
    {
        "dataview",
        "dataviewjs",
        "meta-bind",
        "meta-bind-button",
        "meta-bind-js-view",
        "tasks",
        "templater",
    }
)

_MD = MarkdownIt("commonmark")
# Block structure only (fences, headings): the inline rules run on heading text alone, so a long run of
# `[a](` or `![` in a paragraph, on which markdown-it's link rules are quadratic, is never inline-parsed.
_BLOCKS = MarkdownIt("commonmark").disable("inline")
_HEADING_INLINE_LIMIT = 2000  # longer heading text is taken as written, not inline-parsed
# Each opener's scan stops at the next opener, so unclosed openers cost linear time, not quadratic.
_COMMENT = re.compile(r"<!--(?:(?!<!--).)*?-->|%%.*?%%", re.DOTALL)
_TEMPLATER = re.compile(r"<%(?:(?!<%).)*?%>", re.DOTALL)
_INLINE_QUERY = re.compile(r"`\$?=[^`\n]*`")  # dataview inline queries: `= this.file.name`
_BLOCK_ID = re.compile(r"[ \t]\^[A-Za-z0-9-]+[ \t]*$", re.MULTILINE)
# the anchor vault2okf writes for a block id (``rewrite.block_anchor``): markup, not text
BLOCK_ANCHOR = re.compile(r'[ \t]*<a id="[a-z0-9-]+"></a>')
_LINK = re.compile(r"!?\[([^[\]\n]*)\]\((?:[^()\n]|\([^()\n]*\))*\)")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Chunk:
    """One piece of a note's text that is embedded and retrieved: under its heading path, with its token count.

    ``content_hash`` lets `index` skip re-embedding a chunk whose text did not change."""

    chunk_id: str
    note_id: str
    title: str
    heading_path: tuple[str, ...]
    text: str
    content_hash: str
    tokens: int


@dataclass(frozen=True)
class _Section:
    path: tuple[str, ...]
    heading: str  # the heading line as plain text ("## Loot"), written into the text when merged
    text: str


def chunk_note(note_id: str, title: str, body: str, *, max_tokens: int = 400, min_tokens: int = 40) -> list[Chunk]:
    """Chunks of one note, in document order; a note with no text still gets one chunk holding its title."""
    sections = _sections(clean_body(body))
    pieces = [piece for section in sections for piece in _split(section, max_tokens)]
    merged = _merge(pieces, min_tokens, max_tokens) or [_Section((), "", "")]
    return [_make_chunk(note_id, title, i, section) for i, section in enumerate(merged)]


def clean_body(body: str) -> str:
    """The body without plugin code blocks, comments and templater tags, links reduced to labels."""
    lines = body.splitlines()
    parts, start = [], 0
    for token in _BLOCKS.parse(body):
        if token.type != "fence" or token.map is None:
            continue
        first, end = token.map
        parts.append(_clean_prose("\n".join(lines[start:first])))
        if not _is_plugin_fence(token):
            parts.append("\n".join(lines[first:end]))
        start = end
    parts.append(_clean_prose("\n".join(lines[start:])))
    return "\n".join(parts)


def _is_plugin_fence(token: Token) -> bool:
    words = token.info.split()
    return (bool(words) and words[0].lower() in PLUGIN_FENCES) or "<%" in token.content


def _clean_prose(text: str) -> str:
    for pattern in (_COMMENT, _TEMPLATER, _INLINE_QUERY, _BLOCK_ID, BLOCK_ANCHOR):
        text = pattern.sub("", text)
    return _LINK.sub(r"\1", text)


def _headings(text: str) -> dict[int, tuple[int, int, str]]:
    """Top-level headings by first line: (line after the heading, level, plain heading text)."""
    env: dict = {}  # link reference definitions found by the block pass, for the headings' inline pass
    tokens = _BLOCKS.parse(text, env)
    found = {}
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map:
            found[token.map[0]] = (token.map[1], int(token.tag[1:]), _heading_text(tokens[i + 1].content, env))
    return found


def _heading_text(content: str, env: dict) -> str:
    if len(content) > _HEADING_INLINE_LIMIT:
        return content.strip()
    children = _MD.parseInline(content, env)[0].children or []
    return "".join(c.content for c in children if c.type in ("text", "code_inline")).strip()


def _sections(text: str) -> list[_Section]:
    """One section per heading (plus the text before the first), skipping an empty intro."""
    lines, heads = text.splitlines(), _headings(text)
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []
    buf: list[str] = []
    heading, skip_to = "", 0
    for i, line in enumerate(lines):
        if i in heads:
            sections.append(_Section(_path(stack), heading, "\n".join(buf).strip()))
            skip_to, level, name = heads[i]
            stack = [h for h in stack if h[0] < level] + [(level, name)]
            heading, buf = f"{'#' * level} {name}".rstrip(), []
        elif i >= skip_to:
            buf.append(line)
    sections.append(_Section(_path(stack), heading, "\n".join(buf).strip()))
    return [s for s in sections if s.text or s.heading]


def _path(stack: list[tuple[int, str]]) -> tuple[str, ...]:
    return tuple(name for _, name in stack if name)


def _split(section: _Section, max_tokens: int) -> list[_Section]:
    """Cut a section longer than `max_tokens` into parts; only the first keeps the heading line."""
    if count_tokens(section.text) <= max_tokens:
        return [section]
    parts = _pack(_units(section.text, max_tokens), max_tokens)
    return [replace(section, text=part, heading=section.heading if i == 0 else "") for i, part in enumerate(parts)]


def _units(text: str, max_tokens: int) -> list[tuple[str, str, int]]:
    """(separator before it, text, tokens) pieces of at most `max_tokens`: paragraphs, lines, token runs."""
    units = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        lines = [paragraph] if count_tokens(paragraph) <= max_tokens else paragraph.split("\n")
        pieces = [piece for line in lines for piece in _hard_split(line, max_tokens)]
        units += [("\n\n" if i == 0 else "\n", piece, count_tokens(piece)) for i, piece in enumerate(pieces)]
    return units


def _hard_split(line: str, max_tokens: int) -> list[str]:
    spans = token_spans(line)
    if len(spans) <= max_tokens:
        return [line]
    cuts = [0] + [spans[i - 1][1] for i in range(max_tokens, len(spans), max_tokens)] + [len(line)]
    return [line[a:b].strip() for a, b in zip(cuts, cuts[1:], strict=False) if line[a:b].strip()]


def _pack(units: list[tuple[str, str, int]], max_tokens: int) -> list[str]:
    """Greedily join units into parts of at most `max_tokens`."""
    parts, current, size = [], "", 0
    for sep, text, tokens in units:
        if current and size + tokens > max_tokens:
            parts.append(current)
            current, size = "", 0
        current, size = (current + sep + text if current else text), size + tokens
    return parts + [current] if current else parts


def _merge(sections: list[_Section], min_tokens: int, max_tokens: int) -> list[_Section]:
    """Grow a section below `min_tokens` with the ones after it; a tiny last section joins the one before."""
    merged: list[_Section] = []
    for i, section in enumerate(sections):
        is_tiny_tail = i == len(sections) - 1 and _size(section) < min_tokens
        if merged and (_size(merged[-1]) < min_tokens or is_tiny_tail):
            joined = _join(merged[-1], section)
            if count_tokens(joined) <= max_tokens:
                merged[-1] = replace(merged[-1], text=joined)
                continue
        merged.append(section)
    return merged


def _join(previous: _Section, section: _Section) -> str:
    """The previous text, then the section's heading line and text."""
    tail = "\n".join(p for p in (section.heading, section.text) if p)
    return "\n\n".join(p for p in (previous.text, tail) if p)


def _size(section: _Section) -> int:
    return count_tokens(section.heading) + count_tokens(section.text)


def split_header(text: str, title: str) -> tuple[tuple[str, ...], str]:
    """The heading path and the rest of a chunk text of a note titled ``title`` (``_make_chunk`` writes the
    header line ``Title > Heading > Subheading``); a text that does not start with that header is all rest."""
    first, _, rest = text.partition("\n")
    parts = first.split(" > ")
    return (tuple(parts[1:]), rest) if parts[0] == title else ((), text)


def _make_chunk(note_id: str, title: str, index: int, section: _Section) -> Chunk:
    path = section.path[1:] if section.path[:1] and section.path[0].casefold() == title.casefold() else section.path
    header = " > ".join((title, *path))
    text = f"{header}\n{section.text}" if section.text else header
    digest = hashlib.sha256(f"{note_id}\n{text}".encode()).hexdigest()
    return Chunk(f"{note_id}#{index}", note_id, title, section.path, text, digest, count_tokens(text))
