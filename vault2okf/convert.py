"""``convert``: vault -> parsed notes -> resolved links -> OKF docs + link-health report + okf.duckdb."""

from __future__ import annotations

import hashlib
import json
import posixpath
import shutil
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vault2okf import bundle as b
from vault2okf.config import Config, load_config
from vault2okf.db import ConceptRow, LinkRow, Tables, write_database
from vault2okf.guard import Problems, note_meta_safe, read_note, resolve_note, rewrite_safe
from vault2okf.html import link_health_html
from vault2okf.meta import Meta, vault_base
from vault2okf.names import assign_doc_paths
from vault2okf.parse import _FM_WIKILINK, Note, Problem, Syntax, split_wikilink
from vault2okf.report import LinkRecord, LinkReport, type_rows
from vault2okf.resolve import NOTE_STATUSES, Resolution, Resolver, Status
from vault2okf.rewrite import anchor, label
from vault2okf.skill import skill_text
from vault2okf.suggest import spelling_variants
from vault2okf.walk import Walk, walk_vault

_NOTE = (*NOTE_STATUSES, Status.SELF)
_OKF_KEYS = ("type", "title", "description", "resource", "timestamp", "tags")


@dataclass(frozen=True)
class ConvertResult:
    out: Path
    notes: int
    links: int
    report: LinkReport
    seconds: float
    stages: dict[str, float]  # seconds per stage: walk, parse, resolve, write


def convert(vault: Path, out: Path, *, config_path: Path | None = None, force: bool = False) -> ConvertResult:
    clock = _Clock()
    vault, out = vault.resolve(), out.resolve()
    config = load_config(vault, config_path)
    b.check_output(vault, out, force=force)
    walk = walk_vault(vault, config.exclude)
    config = replace(config, base=vault_base([f.path for f in walk.notes]))
    clock.lap("walk")
    problems: Problems = list(walk.problems)  # every step below reports here instead of raising
    notes = [read_note(f, config, problems) for f in walk.notes]
    metas = {n.path: note_meta_safe(n, f.mtime, config, problems) for n, f in zip(notes, walk.notes, strict=True)}
    clock.lap("parse")
    aliases = {p: m.aliases for p, m in metas.items() if m.aliases}
    records = resolve_links(notes, walk, aliases, config, problems)
    rendered = _render(notes, metas, walk, records, problems, vault.name)
    report = LinkReport(
        vault=vault.name,
        notes=tuple(n.path for n in notes),
        records=tuple(records),
        problems=tuple(sorted([*problems, *((n.path, p) for n in notes for p in n.problems)], key=_by_path)),
        skipped=walk.skipped,
        aliases=aliases,
        types=tuple(type_rows(metas.values())),
        variants=tuple(spelling_variants(notes, aliases, records)),
    )
    clock.lap("resolve")
    with b.bundle_lock(out, "converting"):  # one convert or index of a bundle at a time
        b.prepare_output(vault, out, force=force)
        stage = b.staging_dir(out)
        try:
            _write(stage, out.name, vault, walk, notes, metas, records, report, clock, rendered)
            b.seal(stage)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        b.swap_into_place(stage, out)  # never leaves `out` missing; a kill in it is finished by the next run
    clock.lap("swap")
    return ConvertResult(out, len(notes), len(records), report, clock.total(), clock.laps)


class _Clock:
    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self.last, 4)
        self.last = now

    def total(self) -> float:
        return time.perf_counter() - self.start


def resolve_links(
    notes: list[Note],
    walk: Walk,
    aliases: dict[str, tuple[str, ...]],
    config: Config,
    problems: Problems | None = None,
) -> list[LinkRecord]:
    resolver = Resolver(
        notes=[n.path for n in notes],
        attachments=[f.path for f in walk.attachments],
        aliases=aliases,
        overrides=config.overrides,
        excluded=walk.excluded,
        exclude=config.exclude,
        excluded_names=config.excluded_names,
    )
    found = [] if problems is None else problems
    return [LinkRecord(n.path, link, res) for n in notes for link, res in resolve_note(resolver, n, found)]


@dataclass(frozen=True)
class _Rendered:
    doc_of: dict[str, str]  # vault path (notes and copied attachments) -> path under concepts/
    bodies: dict[str, str]  # vault path -> the rewritten body
    docs: dict[str, b.Doc]  # vault path -> the concept doc
    used: frozenset[str]  # attachments that are linked, so copied


def _render(
    notes: list[Note],
    metas: dict[str, Meta],
    walk: Walk,
    records: list[LinkRecord],
    problems: Problems,
    vault_name: str,
) -> _Rendered:
    """Doc paths (collisions moved aside and reported), every note's rewritten body and its concept doc."""
    doc_of, collisions = assign_doc_paths(n.path for n in notes)
    problems.extend(collisions)
    used = frozenset(r.resolution.path or "" for r in records if r.resolution.status is Status.ATTACHMENT)
    doc_of.update({a.path: a.path for a in walk.attachments if a.path in used})
    resolved = {(r.source, r.link): r.resolution for r in records}
    bodies = {n.path: rewrite_safe(n, {lk: resolved[(n.path, lk)] for lk in n.links}, doc_of, problems) for n in notes}
    docs = {n.path: _doc_safe(n, metas[n.path], bodies[n.path], doc_of, resolved, vault_name, problems) for n in notes}
    return _Rendered(doc_of, bodies, docs, used)


def _by_path(item: tuple[str, Any]) -> str:
    return item[0]


def _write(
    stage: Path,
    name: str,
    vault: Path,
    walk: Walk,
    notes: list[Note],
    metas: dict[str, Meta],
    records: list[LinkRecord],
    report: LinkReport,
    clock: _Clock,
    rendered: _Rendered,
) -> None:
    doc_of, used = rendered.doc_of, rendered.used
    files: dict[str, str | bytes] = {}
    docs, concepts = [], []
    for note in notes:
        body = rendered.bodies[note.path]
        doc = rendered.docs[note.path]
        files[f"{b.CONCEPTS}/{doc.doc_path}"] = doc.text
        docs.append(doc)
        concepts.append(_concept_row(note, metas[note.path], doc, body))
    attachment_folders = {posixpath.dirname(p) for p in used if p}
    for folder, text in b.folder_indexes(docs, vault.name, attachment_folders).items():
        files[posixpath.join(b.CONCEPTS, folder, "index.md")] = text
    types = dict(Counter(d.type for d in docs).most_common())
    data = report.to_json()
    files["SKILL.md"] = skill_text(vault.name, vault.name, types, data["totals"], folders=data["types"])
    files["link-health.md"] = report.to_markdown()
    files["link-health.json"] = report.to_json_text()
    renamed = {p: f"{b.CONCEPTS}/{d}" for p, d in doc_of.items() if d != p}
    files["link-health.html"] = link_health_html(data, renamed)
    files[b.MARKER] = json.dumps({"tool": "vault2okf", "vault": vault.name, "okf_version": b.OKF_VERSION}) + "\n"
    copies = {f"{b.CONCEPTS}/{a.path}": a.abs_path for a in walk.attachments if a.path in used}
    links = [_link_row(r, doc_of) for r in records]
    clock.lap("render")
    meta = {"vault": vault.name, "okf_version": b.OKF_VERSION}
    with ThreadPoolExecutor(max_workers=1) as pool:  # DuckDB loads while the files are written
        database = pool.submit(write_database, stage / "okf.duckdb", Tables(concepts, links), meta)
        b.write_tree(stage, files, copies)
        database.result()
    clock.lap("write")


def _doc_safe(
    note: Note,
    meta: Meta,
    body: str,
    doc_of: dict[str, str],
    resolved: dict[tuple[str, Any], Resolution],
    vault_name: str,
    problems: Problems,
) -> b.Doc:
    """The concept doc; if the note's own frontmatter keys cannot be written, the doc keeps the OKF fields only."""
    doc_path = doc_of[note.path]
    try:
        links = _FrontLinks(note, doc_of, resolved)
        return _doc(note, meta, body, doc_path, vault_name, links)
    except Exception as exc:  # noqa: BLE001 - one bad note never stops a run
        message = f"frontmatter could not be written ({type(exc).__name__}: {exc}"[:300] + "); OKF fields only"
        problems.append((note.path, Problem("error", message)))
        return _doc(replace(note, frontmatter={}, frontmatter_error=None), meta, body, doc_path, vault_name, None)


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
            rel = posixpath.relpath(self.doc_of[res.path], posixpath.dirname(self.source_doc) or ".")
            return rel + anchor(link.anchor)
        return label(link) or link.target


def _doc(note: Note, meta: Meta, body: str, doc_path: str, vault_name: str, links: _FrontLinks | None) -> b.Doc:
    front: dict[str, Any] = {
        "type": meta.type,
        "title": meta.title,
        "description": meta.description,
        "resource": b.obsidian_uri(vault_name, note.path),
        "timestamp": meta.timestamp,
        "tags": list(meta.tags),
    }
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


def _concept_row(note: Note, meta: Meta, doc: b.Doc, body: str) -> ConceptRow:
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


def _link_row(r: LinkRecord, doc_of: dict[str, str]) -> LinkRow:
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


def concept_id(doc_path: str) -> str:
    return doc_path[:-3] if doc_path.lower().endswith(".md") else doc_path
