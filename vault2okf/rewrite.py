"""Rewrite a note body into an OKF concept doc body: wikilinks and note links become relative markdown links.

Pure: the parsed note, where each link resolved to, and where each vault file lands in the bundle go in;
the new body comes out. Rules:
- a note link -> ``[label](relative/path%20encoded.md#heading-slug)``; a block reference ``[[Note#^id]]`` ->
  ``[Note > ^id](Note.md#id)``, and a link to a block of the same note stays a link (``[^id](#id)``);
- a block id ``^id`` ending a line becomes the anchor ``<a id="id"></a>`` (``block_anchor``), where every
  renderer that keeps inline HTML lands a ``#id`` link; the chunker drops it again;
- an embed of a note -> a plain link to it (no transclusion, so embed cycles cannot loop);
- an existing image -> ``![alt](relative/path.png)``; another attachment -> ``[name](relative/path.pdf#page=3)``;
- a broken link, or one into an excluded folder -> its readable text (never a link to a file that does not exist);
- a missing attachment -> a wiki embed is left exactly as written; a markdown image or link to it becomes its
  text, so no output link points at a file that does not exist (both reported).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections import defaultdict
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import quote

from vault2okf.parse import Block, Link, Note, block_ref
from vault2okf.resolve import NOTE_STATUSES, Resolution, Status

IMAGE_EXTENSIONS = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "avif"})
_SIZE = re.compile(r"^\d+(?:x\d+)?$")
_SLUG_DROP = re.compile(r"[^\w\- ]")


def rewrite_body(note: Note, resolved: Mapping[Link, Resolution], doc_of: Mapping[str, str]) -> str:
    """``doc_of`` maps vault paths (notes and copied attachments) to bundle paths under ``concepts/``."""
    source_doc = doc_of[note.path]
    by_line: dict[int, list[Link | Block]] = defaultdict(list)
    for link in note.links:
        if link.syntax != "frontmatter":
            by_line[link.line - note.body_line].append(link)
    for block in note.blocks:
        by_line[block.line].append(block)
    lines = note.body.split("\n")
    for index, links in by_line.items():
        lines[index] = _rewrite_line(lines[index], links, resolved, source_doc, doc_of)
    return "\n".join(lines)


def _rewrite_line(
    line: str,
    items: list[Link | Block],
    resolved: Mapping[Link, Resolution],
    source_doc: str,
    doc_of: Mapping[str, str],
) -> str:
    """The line with each link replaced by its rendering and a block id by its anchor, built in one pass (a
    line of n links costs O(n))."""
    pieces, pos = [], 0
    for item in sorted(items, key=lambda it: it.col):
        if item.col < pos:  # a block id inside a link's text: the link's rendering holds it
            continue
        pieces.append(line[pos : item.col])
        if isinstance(item, Block):
            pieces.append(block_anchor(item.id))
            pos = item.col + 1 + len(item.id)
        else:
            pieces.append(render(item, resolved[item], source_doc, doc_of))
            pos = item.col + len(item.raw)
    pieces.append(line[pos:])
    return "".join(pieces)


def block_anchor(block_id: str) -> str:
    """The anchor a block id ``^id`` becomes in the doc: an empty HTML ``a`` element whose ``id`` is the one a
    block reference's ``#id`` names. The ``^id`` text goes (Obsidian hides it too)."""
    return f'<a id="{block_slug(block_id)}"></a>'


def block_slug(block_id: str) -> str:
    """``^Abc-1`` and ``Abc-1`` -> ``abc-1``: block ids are matched without case, as the ids of the doc."""
    return block_id.removeprefix("^").lower()


def render(link: Link, res: Resolution, source_doc: str, doc_of: Mapping[str, str]) -> str:
    if res.status in NOTE_STATUSES:
        return f"[{_escape(label(link))}]({href(source_doc, doc_of[res.path or ''])}{anchor(link.anchor)})"
    if res.status is Status.SELF:
        return f"[{_escape(label(link))}]({anchor(link.anchor)})" if anchor(link.anchor) else label(link)
    if res.status is Status.ATTACHMENT:
        return _attachment(link, res.path or "", source_doc, doc_of)
    if res.status is Status.MISSING_ATTACHMENT and link.syntax == "wiki":
        return link.raw  # not a markdown link, so it points nowhere; kept as written and reported
    return label(link) or posixpath.basename(link.target)


def label(link: Link) -> str:
    """What a reader sees: the alias or link text, else ``Note > Heading`` as Obsidian shows it."""
    if link.label and not (link.embed and _SIZE.match(link.label)):
        return link.label
    if link.syntax == "markdown" and link.label is not None and not link.embed:
        return link.label
    name = posixpath.basename(link.target)
    name = name[:-3] if name.lower().endswith(".md") else name
    heading = (link.anchor or "").split("#")[-1].strip()  # a block keeps its caret: ``Note > ^id``
    if name and heading:
        return f"{name} > {heading}"
    return name or heading


@lru_cache(maxsize=1 << 16)  # a vault links the same few notes from the same folders over and over
def href(source_doc: str, target_doc: str) -> str:
    return quote(relative(source_doc, target_doc), safe="/")


@lru_cache(maxsize=1 << 16)
def relative(source_doc: str, target_doc: str) -> str:
    """``target_doc`` relative to the folder of ``source_doc`` (both bundle paths): ``posixpath.relpath``
    without its ``abspath`` calls, which cost more than the rest of a link's rewrite."""
    start = source_doc.split("/")[:-1]
    parts = target_doc.split("/")
    if any(p in ("", ".", "..") for p in (*start, *parts)):  # not a plain path: let posixpath work it out
        return posixpath.relpath(target_doc, posixpath.dirname(source_doc) or ".")
    common = 0
    for a, b in zip(start, parts, strict=False):
        if a != b:
            break
        common += 1
    return "/".join([".."] * (len(start) - common) + parts[common:]) or "."


def anchor(raw: str | None) -> str:
    """``Heading`` -> ``#heading``; nested ``H1#H2`` uses the last heading; a block ref ``^id`` -> ``#id`` (none
    for a malformed id, which the report lists)."""
    if not raw:
        return ""
    block = block_ref(raw)
    if block is not None:
        return f"#{block_slug(block)}" if block else ""
    last = raw.split("#")[-1].strip()
    if not last:
        return ""
    slug = slugify(last)
    return f"#{slug}" if slug else ""


def slugify(heading: str) -> str:
    """GitHub-style slug, folded to ASCII so it fits OKF's ``[A-Za-z0-9_-]`` anchors."""
    ascii_text = unicodedata.normalize("NFKD", heading).encode("ascii", "ignore").decode()
    return _SLUG_DROP.sub("", ascii_text.strip().lower()).strip().replace(" ", "-")


def _attachment(link: Link, path: str, source_doc: str, doc_of: Mapping[str, str]) -> str:
    url = href(source_doc, doc_of[path])
    name = posixpath.basename(path)
    ext = name.rsplit(".", 1)[-1].lower() if "." in name else ""
    text = label(link) if link.label and not _SIZE.match(link.label) else name
    if link.embed and ext in IMAGE_EXTENSIONS:
        return f"![{_escape(text)}]({url})"
    fragment = f"#{quote(link.anchor, safe='=&')}" if link.anchor and ext == "pdf" else ""
    return f"[{_escape(text)}]({url}{fragment})"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
