"""One note's concept doc and its database rows: the OKF frontmatter (with the note's own keys, their wikilinks
rewritten to doc paths), the ``concepts`` row and the ``links`` rows. Pure: nothing here reads or writes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

from vault2okf import bundle as b
from vault2okf.db import ConceptRow, LinkRow
from vault2okf.guard import Problems
from vault2okf.meta import Meta
from vault2okf.parse import _FM_WIKILINK, Note, Problem, Syntax, split_wikilink
from vault2okf.report import LinkRecord
from vault2okf.resolve import NOTE_STATUSES, Resolution, Status
from vault2okf.rewrite import anchor, label, relative

_NOTE = (*NOTE_STATUSES, Status.SELF)
_OKF_KEYS = ("type", "title", "description", "resource", "timestamp", "tags")


def doc_safe(
    note: Note,
    meta: Meta,
    body: str,
    doc_of: dict[str, str],
    resolved: dict[tuple[str, Any], Resolution],
    vault_name: str,
    problems: Problems,
    graph: Mapping[str, Any] | None = None,
) -> b.Doc:
    """The concept doc; if the note's own frontmatter keys cannot be written, the doc keeps the OKF fields only.
    ``graph`` (``analytics.frontmatter``) is written under the key ``graph``, unless the note has its own."""
    doc_path = doc_of[note.path]
    try:
        links = _FrontLinks(note, doc_of, resolved)
        return _doc(note, meta, body, doc_path, vault_name, links, graph)
    except Exception as exc:  # noqa: BLE001 - one bad note never stops a run
        message = f"frontmatter could not be written ({type(exc).__name__}: {exc}"[:300] + "); OKF fields only"
        problems.append((note.path, Problem("error", message)))
        bare = replace(note, frontmatter={}, frontmatter_error=None)
        return _doc(bare, meta, body, doc_path, vault_name, None, graph)


class _FrontLinks:
    """Wikilinks in the note's own frontmatter values, rewritten to doc paths relative to the doc (strings,
    not markdown links: ``locations: ['[[Esa Themar]]']`` -> ``locations: [../Places/Esa Themar.md]``); a
    link that resolves to no converted note becomes its label. ``changed`` keeps each original value, written
    under the doc's ``wikilinks`` key, so nothing is lost."""

    def __init__(self, note: Note, doc_of: dict[str, str], resolved: dict[tuple[str, Any], Resolution]) -> None:
        self.source_doc = doc_of[note.path]
        self.doc_of = doc_of
        self.by_raw = {lk.raw: (lk, resolved[(note.path, lk)]) for lk in note.links if lk.syntax == Syntax.FRONTMATTER}
        self.changed: dict[str, Any] = {}

    def value(self, key: str, value: Any) -> Any:
        new = self._walk(value)
        if new != value:
            self.changed[key] = value
        return new

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str) and "[[" in value:
            return _FM_WIKILINK.sub(self._one, value)
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, dict):
            return {k: self._walk(v) for k, v in value.items()}
        return value

    def _one(self, m: Any) -> str:
        found = self.by_raw.get(m.group(0))
        if found is None:  # not a link the parser saw (cannot happen for a parsed note): keep it
            target, _, _ = split_wikilink(m.group(2))
            return target
        link, res = found
        if res.status in NOTE_STATUSES and res.path in self.doc_of:
            rel = relative(self.source_doc, self.doc_of[res.path])
            return rel + anchor(link.anchor)
        return label(link) or link.target


def _doc(
    note: Note,
    meta: Meta,
    body: str,
    doc_path: str,
    vault_name: str,
    links: _FrontLinks | None,
    graph: Mapping[str, Any] | None,
) -> b.Doc:
    front: dict[str, Any] = {
        "type": meta.type,
        "title": meta.title,
        "description": meta.description,
        "resource": b.obsidian_uri(vault_name, note.path),
        "timestamp": meta.timestamp,
        "tags": list(meta.tags),
    }
    if graph is not None:
        front["graph"] = dict(graph)  # the note's own `graph` key, if any, takes its place below
    own = {k: v for k, v in note.frontmatter.items() if k not in _OKF_KEYS}
    if links is not None:
        own = {k: links.value(str(k), v) for k, v in own.items()}
        if links.changed and "wikilinks" not in own:
            own["wikilinks"] = links.changed
    front.update(own)
    if note.frontmatter_error:
        front["frontmatter_error"] = note.frontmatter_error
        front["original_frontmatter"] = note.frontmatter_text
    return b.Doc(doc_path, meta.title, meta.description, meta.type, b.render_doc(front, body))


def concept_row(note: Note, meta: Meta, doc: b.Doc, body: str) -> ConceptRow:
    return ConceptRow(
        id=concept_id(doc.doc_path),
        vault_path=note.path,
        doc_path=f"{b.CONCEPTS}/{doc.doc_path}",
        type=meta.type,
        title=meta.title,
        description=meta.description,
        tags=tuple(meta.tags),
        aliases=tuple(meta.aliases),
        timestamp=meta.timestamp,
        session_date=meta.session_date,
        session_number=meta.session_number,
        body=body,
        content_hash=hashlib.sha256(doc.text.encode("utf-8")).hexdigest(),
        frontmatter=json.dumps(note.frontmatter, ensure_ascii=False, sort_keys=True, default=str),
        frontmatter_error=note.frontmatter_error,
    )


def link_row(r: LinkRecord, doc_of: dict[str, str]) -> LinkRow:
    target = r.resolution.path if r.resolution.status in _NOTE else None
    return LinkRow(
        source_id=concept_id(doc_of[r.source]),
        target_id=concept_id(doc_of[target]) if target else None,
        raw=r.link.raw,
        target=r.link.target,
        kind="embed" if r.link.embed else "link",
        anchor=r.link.anchor,
        line=r.link.line,
        status=r.resolution.status.value,
        context=r.link.context,
        in_frontmatter=r.link.syntax == Syntax.FRONTMATTER,
    )


@lru_cache(maxsize=1 << 16)
def concept_id(doc_path: str) -> str:
    return doc_path[:-3] if doc_path.lower().endswith(".md") else doc_path
