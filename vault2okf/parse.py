"""Parse one note: decode the bytes, split frontmatter (python-frontmatter's YAML handler), find its links.

Pure: bytes in, a ``Note`` out. Problems (bad bytes, malformed YAML, values YAML cannot build such as
``date: 2024-02-30``, a frontmatter whose aliases expand past a cap) become ``Problem`` records, never
exceptions, and the note is still parsed as well as it can be. Every step is linear in the note's size.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

from vault2okf.scan import CodeLines, Span, find_spans, link_label

_FM_CLOSE = re.compile(r"^(?:---|\.\.\.)[ \t]*$", re.MULTILINE)
_FM_WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+)\]\]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\[*_\"'])")
LIST_LEAD = re.compile(r"^[\s>]*(?:[-*+]|\d{1,9}[.)])?\s*(?:\[[ xX]\]\s*)?")  # quote, list and task markers
# An Obsidian block id: ``^id`` (Latin letters, digits, dashes) ending a line, after a space or alone on it
BLOCK_ID = re.compile(r"(?:^|(?<=[ \t]))\^([A-Za-z0-9-]+)[ \t]*$")
_BLOCK_REF = re.compile(r"[A-Za-z0-9-]+")


class Syntax(StrEnum):
    """How a link was written (a ``StrEnum``: ``link.syntax == "wiki"`` keeps working)."""

    WIKI = "wiki"
    MARKDOWN = "markdown"
    FRONTMATTER = "frontmatter"


@dataclass(frozen=True)
class Link:
    line: int  # 1-based line in the source file
    col: int  # offset of ``raw`` in that line (-1 for frontmatter links)
    raw: str  # the link exactly as written
    target: str  # path part, percent-decoded, without anchor ("" for a link into the same note)
    anchor: str | None  # "Heading", "H1#H2" or "^block"
    label: str | None  # alias text, markdown link text, or an embed's size/caption
    embed: bool
    syntax: Syntax
    context: str = ""  # the sentence or list item holding the link, as plain-ish text


@dataclass(frozen=True)
class Block:
    """A block id defined in the body: ``text ^id`` ends the block's line, or ``^id`` stands alone after it."""

    line: int  # 0-based line within the body
    col: int  # where ``^id`` starts in that line
    id: str  # as written, without the caret


@dataclass(frozen=True)
class Problem:
    kind: str  # "encoding" | "frontmatter" | "value" | "name" | "collision" | "mtime" | "size" | "block" | "error"
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
    blocks: tuple[Block, ...] = field(default=())  # block ids outside code, the first of each id only
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


_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_EXPANSION = 100_000  # values and characters a frontmatter may expand to beyond 4x its own length


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader (the C one when built), where a value that cannot be built stays as text."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.bad_values: list[Problem] = []


def _tolerant(tag: str) -> None:
    build = _Loader.yaml_constructors[tag]

    def construct(loader: _Loader, node: yaml.ScalarNode) -> Any:
        try:
            return build(loader, node)
        except (ValueError, OverflowError) as exc:
            value = str(loader.construct_scalar(node))
            shown = value if len(value) <= 60 else value[:57] + "..."
            line = node.start_mark.line + 2  # the frontmatter starts on line 2 of the file
            loader.bad_values.append(Problem("value", f"{shown!r} is not a valid {tag.rsplit(':', 1)[-1]} "
                                             f"({exc}); kept as text", line))  # fmt: skip
            return value

    _Loader.add_constructor(tag, construct)


for _tag in ("timestamp", "int", "float"):
    _tolerant(f"tag:yaml.org,2002:{_tag}")


def load_frontmatter(fm: str | None) -> tuple[dict[str, Any], str | None]:
    data, error, _ = read_frontmatter(fm)
    return data, error


def read_frontmatter(fm: str | None) -> tuple[dict[str, Any], str | None, list[Problem]]:
    """(mapping, error for malformed YAML or None, values kept as text). Never raises on any text."""
    if fm is None or not fm.strip():
        return {}, None, []
    loader = _Loader(fm)
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        return {}, " ".join(str(exc).split()), []
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:  # nesting too deep, odd keys
        return {}, f"YAML could not be read ({type(exc).__name__}: {exc})", []
    finally:
        loader.dispose()
    if data is None:
        return {}, None, loader.bad_values
    if not isinstance(data, dict):
        return {}, f"frontmatter is a {type(data).__name__}, not a mapping of keys to values", []
    budget = 4 * len(fm) + MAX_EXPANSION
    if _expands_beyond(data, budget):
        message = (
            f"YAML aliases expand this {len(fm)}-character frontmatter past {budget} values and characters "
            "(a YAML bomb?); kept as text. Write the values out instead of aliasing them"
        )
        return {}, message, []
    return {str(k): v for k, v in data.items()}, None, loader.bad_values


def _expands_beyond(data: Any, budget: int) -> bool:
    """Whether ``data`` written out in full (every alias expanded) counts more than ``budget`` values and
    characters. Stops as soon as it does, so a billion-laughs bomb or a recursive alias costs ``budget`` steps."""
    stack = [data]
    while stack:
        value = stack.pop()
        budget -= 1 + (len(value) if isinstance(value, str | bytes) else 0)
        if budget < 0:
            return True
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple | set):
            stack.extend(value)
    return False


def too_big_note(path: str, size: int, limit: int) -> Note:
    """A note over the size limit: listed with an empty body, not parsed, reported."""
    message = (
        f"note is {size:,} bytes, over the limit of {limit:,}; listed but not parsed. Split it, or raise "
        "`max_note_bytes` under `[convert]` in vault2okf.toml"
    )
    return Note(unicodedata.normalize("NFC", path), {}, None, None, "", 1, (), (Problem("size", message, None),))


def parse_note(path: str, data: bytes) -> Note:
    text, problem = decode(data)
    problems = [problem] if problem else []
    fm_text, body, body_line = split_frontmatter(text)
    meta, error, bad_values = read_frontmatter(fm_text)
    problems += bad_values
    if error:
        problems.append(Problem("frontmatter", f"malformed frontmatter: {error}", 2))
    elif fm_text is None and text.startswith("---\n"):
        problems.append(Problem("frontmatter", "frontmatter opened with --- is never closed; read as body", 1))
    code = CodeLines(body.split("\n"))
    links = [*_frontmatter_links(meta, fm_text or ""), *_body_links(code, body_line)]
    blocks = _blocks(code, body_line, problems) if "^" in body else ()
    return Note(
        path=unicodedata.normalize("NFC", path),
        frontmatter=meta,
        frontmatter_text=fm_text,
        frontmatter_error=error,
        body=body,
        body_line=body_line,
        links=tuple(links),
        problems=tuple(problems),
        blocks=blocks,
        code=code,
    )


def _blocks(code: CodeLines, first_line: int, problems: list[Problem]) -> tuple[Block, ...]:
    """Block ids outside code and comments; an id defined again is reported and the first one kept (Obsidian
    links to the first)."""
    found: dict[str, Block] = {}
    for i, line in enumerate(code.lines):
        if "^" not in line or i in code:
            continue
        m = BLOCK_ID.search(code.text(i))
        if m is None:
            continue
        key = m.group(1).casefold()
        if key in found:
            first = found[key].line + first_line
            message = f"block id ^{m.group(1)} is defined again (first on line {first}); links go to the first"
            problems.append(Problem("block", message, i + first_line))
            continue
        found[key] = Block(i, m.start(), m.group(1))
    return tuple(found.values())


def split_wikilink(inner: str) -> tuple[str, str | None, str | None]:
    """``Note#Heading|label`` -> (target, anchor, label); ``\\|`` (a pipe escaped inside a table) splits too."""
    target_part, sep, label = inner.replace("\\|", "|").partition("|")
    target, _, anchor = target_part.partition("#")
    return target.strip(), anchor.strip() or None, label.strip() if sep else None


def block_ref(anchor: str | None) -> str | None:
    """The block id a link's anchor names (``Note#^id``: ``id``), or None when it names a heading or nothing;
    "" for a ``^`` followed by no valid id (``^``, ``^two words``)."""
    last = (anchor or "").split("#")[-1].strip()
    if not last.startswith("^"):
        return None
    return last[1:] if _BLOCK_REF.fullmatch(last[1:]) else ""


def _body_links(code: CodeLines, first_line: int) -> Iterator[Link]:
    lines = code.lines
    sentences: _Sentences | None = None
    for span in find_spans(lines, code):
        if sentences is None or sentences.index != span.line:
            sentences = _Sentences(span.line, lines[span.line])
        link = _link_from_span(lines[span.line], span, first_line + span.line, sentences.context(span.start))
        if link is not None:
            yield link


def _link_from_span(line: str, span: Span, lineno: int, context: str) -> Link | None:
    raw = line[span.start : span.end]
    if span.kind == "wikilink":
        target, anchor, label = split_wikilink(span.inner)
        return Link(lineno, span.start, raw, _nfc(target), anchor, label, span.embed, Syntax.WIKI, context)
    parts = urlsplit(span.inner)
    if _SCHEME.match(span.inner) or (not parts.path and not parts.fragment) or span.inner.startswith("#"):
        return None  # external URL or same-page anchor: already a valid markdown link
    label = span.label if span.kind == "image" else link_label(line, span)
    anchor = unquote(parts.fragment) or None
    path = _nfc(unquote(parts.path))
    return Link(lineno, span.start, raw, path, anchor, label, span.embed, Syntax.MARKDOWN, context)


def _frontmatter_links(meta: dict[str, Any], fm_text: str) -> Iterator[Link]:
    """Wikilinks written in frontmatter values (``previous: "[[Session 4]]"``), found in the YAML text."""
    if not meta or "[[" not in fm_text:
        return
    line, last = 2, 0
    for m in _FM_WIKILINK.finditer(fm_text):
        line += fm_text.count("\n", last, m.start())
        last = m.start()
        target, anchor, label = split_wikilink(m.group(2))
        yield Link(line, -1, m.group(0), _nfc(target), anchor, label, bool(m.group(1)), Syntax.FRONTMATTER, "")


class _Sentences:
    """The sentences of one line, split once, so a line holding many links costs one pass, not one per link."""

    def __init__(self, index: int, line: str) -> None:
        self.index, self.line = index, line
        self.starts, self.ends = [0], []
        for m in _SENTENCE_END.finditer(line):
            self.ends.append(m.start())
            self.starts.append(m.end())
        self.ends.append(len(line))
        self.texts: dict[int, str] = {}

    def context(self, col: int) -> str:
        """The sentence that holds column ``col``, without list or quote markers."""
        k = bisect_left(self.ends, col)
        if k not in self.texts:
            piece = self.line[self.starts[k] : self.ends[k]]
            self.texts[k] = LIST_LEAD.sub("", piece).strip()[:400]
        return self.texts[k]


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)
