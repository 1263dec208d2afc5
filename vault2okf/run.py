"""One convert's work over the notes (``Run``): every note read, parsed, resolved and rendered, or its last result
carried from the convert cache, then the docs, ``okf.duckdb``, the reports and the next cache written.

Each note's work is a ``NoteWork``: the file read (its sig and content key), the last convert's ``NoteState`` when
it may be reused, and each step's result as a record (``Reading``, ``Fields``, ``Resolved``, ``Made``), made now
or taken from that state. The steps keep their problems with the note they belong to; the report's list of
(path, problem) is made once, from them (``Run.problems``).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import posixpath
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property, partial
from itertools import chain
from pathlib import Path
from typing import Any

from vault2okf import bundle as b
from vault2okf.analytics import NoteAnalytics, analyse, as_tuple, from_tuple, frontmatter, graph_key
from vault2okf.cache import (
    RACY_NS,
    Body,
    ConvertCache,
    NoteState,
    output_sig,
    same_files,
    suggest_key,
    universe_digest,
    walk_digest,
)
from vault2okf.concept import concept_id, concept_row, doc_safe, link_row
from vault2okf.config import Config
from vault2okf.db import AnalyticsRow, ConceptRow, DatabasePatcher, DatabaseWriter, LinkRow
from vault2okf.guard import Problems, note_meta_safe, read_note, resolve_links_safe, rewrite_safe
from vault2okf.html import link_health_html
from vault2okf.mentions import (
    Applied,
    Before,
    Found,
    Mention,
    NameIndex,
    NoteNames,
    Now,
    find_again,
    mention_rows,
    name_index,
    prose,
)
from vault2okf.meta import Meta
from vault2okf.names import assign_doc_paths
from vault2okf.parse import Link, Note, Problem
from vault2okf.protocol import DATABASE, database
from vault2okf.report import Changed, LastReport, LinkRecord, LinkReport, ReportMemo, type_rows
from vault2okf.resolve import (
    NOTE_STATUSES,
    Resolution,
    Resolver,
    Status,
    alias_key,
    alias_table,
    block_sets,
    check_blocks,
)
from vault2okf.scan import prepare_parser
from vault2okf.skill import skill_text
from vault2okf.suggest import BodyWords, Tally, TallyBox, body_words, broken_targets, spelling_variants
from vault2okf.walk import VaultFile, Walk
from vault2okf.workers import parallel_chunks, parallel_map

_LINK_BATCH = 5000  # links rows per insert: few statements, never every row in memory at once
_PATCH_MOST = 64  # notes made again beyond which okf.duckdb is written anew rather than the old one patched


@dataclass(frozen=True, slots=True)
class Reading:
    """What reading and parsing a note made: the problems of each, its links, block ids and body words."""

    read_problems: tuple[Problem, ...]
    parse_problems: tuple[Problem, ...]  # Note.problems
    links: tuple[Link, ...]
    blocks: tuple[str, ...]
    words: BodyWords
    prose: str  # mentions.prose: the running text unlinked mentions are found in

    @classmethod
    def of(cls, st: NoteState) -> Reading:
        return cls(read_problems=st.read_problems, parse_problems=st.parse_problems, links=st.links,
                   blocks=st.blocks, words=st.words, prose=st.prose)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Fields:
    """A note's fields (``Meta``), what they were read from besides the note, and the problems reading them."""

    mtime: float  # the file's modification time (a timestamp falls back to it)
    base: str  # the folder that holds the whole vault (meta.vault_base): its children are the categories
    meta: Meta
    problems: tuple[Problem, ...]

    @classmethod
    def of(cls, st: NoteState) -> Fields:
        return cls(mtime=st.mtime, base=st.base, meta=st.meta, problems=st.meta_problems)


@dataclass(frozen=True, slots=True)
class Resolved:
    resolutions: tuple[Resolution, ...]  # one per link, before ``check_blocks``
    problems: tuple[Problem, ...]


@dataclass(frozen=True, slots=True)
class Made:
    """A note's doc (without its text, which is in the bundle) and the problems of rewriting and rendering it."""

    doc: b.Doc
    rewrite_problems: tuple[Problem, ...]
    doc_problems: tuple[Problem, ...]


@dataclass(frozen=True)
class _Read:
    """A note read in a worker: its content key, and what parsing made unless it is the content ``reuse`` had."""

    content: str | None
    reading: Reading | None = None
    fields: Fields | None = None


@dataclass(frozen=True)
class _Doc:
    """A note's doc made in a worker: the doc, its concepts row, and its content key (None: changed since the walk)."""

    made: Made
    row: ConceptRow
    content: str | None


@dataclass(slots=True)  # a watcher keeps one a note between rebuilds (``Loops``): no dict each
class NoteWork:
    """One note in this run: each step's result, made now or carried from ``reuse`` (the last convert's state)."""

    sig: tuple[int, ...]
    content: str | None
    reading: Reading
    reuse: NoteState | None = None
    fields: Fields | None = None
    resolved: Resolved | None = None
    missing_blocks: tuple[int, ...] = ()  # links whose block is missing: their rows' statuses
    inputs: tuple[Any, ...] = ()  # what the rewrite reads besides the note (NoteState.inputs)
    made: Made | None = None
    hits: tuple[Any, ...] = ()  # the names found in its prose (mentions.Hit)

    @property
    def meta(self) -> Meta:
        assert self.fields is not None, "every note's fields are read before anything uses them"
        return self.fields.meta

    @property
    def resolutions(self) -> tuple[Resolution, ...]:
        assert self.resolved is not None, "every note's links are resolved before anything uses them"
        return self.resolved.resolutions

    @property
    def doc(self) -> b.Doc:
        assert self.made is not None, "every note's doc is made or carried before the files are written"
        return self.made.doc

    def problems(self, collisions: tuple[Problem, ...]) -> tuple[Problem, ...]:
        """Every problem of the note's steps, in the order the report lists them."""
        assert self.fields is not None and self.resolved is not None and self.made is not None
        r, m = self.reading, self.made
        return (*r.read_problems, *self.fields.problems, *self.resolved.problems, *collisions, *m.rewrite_problems,
                *m.doc_problems, *r.parse_problems)  # fmt: skip

    def state(self, doc: b.Doc, output: tuple[int, ...]) -> NoteState:
        """The note as the next convert's cache keeps it."""
        assert self.fields is not None and self.resolved is not None and self.made is not None
        r, f, m = self.reading, self.fields, self.made
        return NoteState(
            sig=self.sig, content=self.content, read_problems=r.read_problems, parse_problems=r.parse_problems,
            links=r.links, blocks=r.blocks, words=r.words, mtime=f.mtime, base=f.base, meta=f.meta,
            meta_problems=f.problems, resolved=self.resolved.resolutions, resolve_problems=self.resolved.problems,
            inputs=self.inputs, rewrite_problems=m.rewrite_problems, doc_problems=m.doc_problems, doc=doc,
            output=output, prose=r.prose, hits=self.hits,
        )  # fmt: skip


@dataclass
class Loops:
    """What a run leaves for the next convert of the same process (``cache.Body.loops``, in memory only: a
    watcher's), so that a rebuild whose walk is the last one patched (``convert.Kept.walk``: only the files its
    events named looked at again) visits only the notes whose files may have changed (``Run.touched``) and takes
    every other note's work as this run left it. The next run takes it (the body's is set to None), so a run that
    fails leaves none and the one after it visits every note. Each note's work is whole, its ``reuse`` the state
    the cache saved for it."""

    root: str  # the bundle (``Run.out``)
    walk: Walk
    base: str  # ``Config.base``
    works: dict[str, NoteWork]
    aliases: dict[str, tuple[str, ...]]
    blocks: dict[str, frozenset[str]]  # ``resolve.block_sets`` of every note
    graph_key: str
    analytics: dict[str, NoteAnalytics]
    graph: dict[str, dict[str, Any]]  # each note's ``graph`` key
    doc_of: dict[str, str]
    collisions: list[tuple[str, Problem]]
    used: frozenset[str]  # the attachments linked
    doc_notes: list[str]  # each note, in the order of the cache's ``docs``...
    doc_files: list[str]  # ... and its doc's absolute path in the bundle
    problems: tuple[tuple[str, Problem], ...] | None  # ``Run.problems`` (None: not made)
    doc_links: dict[str, str] | None  # concepts/<doc path> -> the doc in the bundle, each note's
    keys: dict[str, Any] | None  # ``bundle.folder_keys`` of the docs
    folder_notes: dict[str, tuple[str, ...]]  # folder -> the notes whose docs it holds, in order
    docs: list[b.Doc] | None  # every note's doc, in order...
    where: dict[str, int]  # ... each note's place in it
    types: dict[str, int]  # docs of each type, most first


class Run:
    """One convert: every note read, parsed, resolved and rendered, or its last result taken from ``old``."""

    def __init__(
        self, vault: Path, out: Path, walk: Walk, config: Config, old: ConvertCache | None, clock: Clock
    ) -> None:
        self.vault, self.out, self.walk, self.config, self.clock = vault, out, walk, config, clock
        self.old_db = database(out)
        db_intact = old is not None and output_sig(self.old_db) == old.files.get(DATABASE)
        self.old = old if db_intact else None  # rows are carried from the old database, so it must be intact
        self.prior = old  # its generated files are linked where their bytes are the same (``_same_file``)
        self.digests: dict[str, str] = {}  # generated file -> sha256 of the bytes this run made
        self.last = old.loaded if old is not None else None  # its memos (analytics, mentions) need no database
        self.report_memo = self.last.report_memo if self.last is not None else ReportMemo()  # a watcher's
        self.works: dict[str, NoteWork] = {}  # vault path -> this run's work on the note
        self.parsed: dict[str, Note] = {}
        self.files = {f.path: f for f in walk.notes}
        self.paths = [f.path for f in walk.notes]
        loops = self.last.loops if self.last is not None else None
        if self.last is not None:
            self.last.loops = None  # taken: a run that fails leaves none behind
        self.loops: Loops | None = loops if self.old is not None else None
        self.touched = self._touched()  # None: every note is visited
        self._parse()
        clock.lap("parse")
        if self.touched is not None and not self._resolve_touched():
            self._restart()
        if self.touched is None:
            self._resolve()
        clock.lap("resolve")
        self.analytics = self._analyse()
        clock.lap("graph")
        self._render()
        clock.lap("carry")

    # -- reading ------------------------------------------------------------------------------------------
    def _touched(self) -> list[str] | None:
        """The notes whose files may have changed since the last run, whose ``Loops`` this run took: those the walk
        found changed (the last walk patched: every other file is the very ``VaultFile`` it found) and the racy ones
        (``ConvertCache.racy``), in the notes' order. None where the notes, the attachments' paths or the excluded
        files are not the last run's, or there are no loops: every note is visited."""
        loops, old = self.loops, self.old
        if loops is None or old is None or loops.root != str(self.out) or loops.base != self.config.base:
            return None
        was, now = loops.walk, self.walk
        if (len(was.notes), len(was.attachments), len(loops.works)) != (len(now.notes), len(now.attachments),
                                                                        len(now.notes)):  # fmt: skip
            return None
        moved = (f is not g and f.path != g.path for f, g in zip(was.attachments, now.attachments, strict=True))
        if was.excluded != now.excluded or any(moved):
            return None
        touched, racy = [], old.started_ns - RACY_NS
        for f, g in zip(was.notes, now.notes, strict=True):
            if f is not g and f != g:  # (a whole walk finds the same files anew)
                if f.path != g.path:
                    return None
                touched.append(g.path)
            elif len(g.sig) < 2 or g.sig[1] >= racy:
                touched.append(g.path)
        return touched

    def _parse(self) -> None:
        old = self.old.notes if self.old else {}
        todo: list[tuple[VaultFile, NoteState | None]] = []
        if self.touched is None:
            files: Iterable[VaultFile] = self.walk.notes
        else:
            assert self.loops is not None
            self.works = self.loops.works  # every other note's work as the last run left it
            files = [self.files[p] for p in self.touched]
        for f in files:
            st = old.get(f.path)
            if st is not None and self.old is not None and st.sig == f.sig and not self.old.racy(f):
                self.works[f.path] = NoteWork(sig=f.sig, content=st.content, reading=Reading.of(st), reuse=st)
            else:
                todo.append((f, st))
        if todo:
            prepare_parser()
        for (f, st), (read, note) in zip(todo, parallel_map(self._read, todo), strict=True):
            if read.reading is None:  # the content the last convert read
                assert st is not None, "only a note the cache has can be read as the same content"
                self.works[f.path] = NoteWork(sig=f.sig, content=read.content, reading=Reading.of(st), reuse=st)
                continue
            assert note is not None
            self.parsed[f.path] = note
            reading = replace(read.reading, words=_interned(read.reading.words))
            self.works[f.path] = NoteWork(sig=f.sig, content=read.content, reading=reading, fields=read.fields)
        for f in files:
            w = self.works[f.path]
            st = w.reuse
            if w.fields is not None:
                pass
            elif st is not None and st.mtime == f.mtime and st.base == self.config.base:
                w.fields = Fields.of(st)
            else:
                w.fields = self._fields(f, self.note(f.path))
                self.parsed[f.path] = replace(self.parsed[f.path], code=None)  # its lines: only the fields read them

    def _read(self, item: tuple[VaultFile, NoteState | None]) -> tuple[_Read, Note | None]:
        """One note read: its content key, and the note parsed (with its fields), or None where its content is
        the one ``st`` recorded. Runs in a worker (``parallel_map``): it changes nothing of the run's."""
        f, st = item
        file = read_note(f, self.config)
        content = file.content
        if st is not None and content is not None and content == st.content:
            return _Read(content), None
        found: Problems = []
        note = file.parse(found)
        reading = Reading(
            read_problems=(*file.problems, *(p for _, p in found)),
            parse_problems=note.problems,
            links=note.links,
            blocks=tuple(b.id for b in note.blocks),
            words=body_words(note.body),
            prose=prose(note),
        )
        return _Read(content, reading, self._fields(f, note)), replace(note, code=None)  # its lines: for the fields

    def _fields(self, f: VaultFile, note: Note) -> Fields:
        found: Problems = []
        meta = note_meta_safe(note, f.mtime, self.config, found)
        return Fields(mtime=f.mtime, base=self.config.base, meta=meta, problems=tuple(p for _, p in found))

    def note(self, path: str) -> Note:
        """The parsed note, read again when it was taken from the cache (its content is the one cached)."""
        if path not in self.parsed:
            w = self.works[path]
            file = read_note(self.files[path], self.config)
            found: Problems = []
            self.parsed[path] = file.parse(found)
            if found or file.content != w.content:  # changed since the walk: the next run will see it
                w.content = None
        return self.parsed[path]

    # -- resolving ----------------------------------------------------------------------------------------
    def _resolve(self) -> None:
        metas = {p: self.works[p].meta for p in self.paths}
        self.aliases = {p: m.aliases for p, m in metas.items() if m.aliases}
        self.universe = universe_digest(self.walk, self.aliases)
        same = self.old is not None and self.old.universe == self.universe
        moved = None if same else self._moved_aliases()
        # a watcher's last resolver, made for the same universe (the config is the same: it keeps one key)
        last = self.last.resolver if self.last is not None else None
        resolver: Resolver | None = last[1] if last is not None and last[0] == self.universe else None
        self.records: list[LinkRecord] = []
        old_notes = self.old.notes if self.old is not None else {}
        for path in self.paths:
            w = self.works[path]
            if w.reuse is not None and (same or (moved is not None and not _names_any(w.reading.links, moved))):
                w.resolved = Resolved(w.reuse.resolved, w.reuse.resolve_problems)
            elif same and (before := _resolved_before(w.reading.links, old_notes.get(path))) is not None:
                w.resolved = Resolved(before, ())  # every target one its last state resolved (a fresh process)
            else:
                resolver = resolver or _resolver(self.paths, self.walk, self.aliases, self.config)
                found: Problems = []
                pairs = resolve_links_safe(resolver, path, w.reading.links, found)
                w.resolved = Resolved(tuple(r for _, r in pairs), tuple(p for _, p in found))
        self.resolver = None if resolver is None else (self.universe, resolver)
        self.blocks = blocks = block_sets((p, self.works[p].reading.blocks) for p in self.paths)
        self.same_notes = self.old is not None and list(self.old.notes) == self.paths  # the last convert's, in order
        # ... each with the block ids of its state: the very block ids the last convert checked links against
        same_blocks = self.same_notes and all(self.works[p].reading.blocks == old_notes[p].blocks for p in self.paths)
        kept = self.last.records if self.last is not None else {}
        self.note_records: dict[str, tuple[Any, ...]] = {}
        self.changed: list[Changed] = []  # the records before and after of each note whose records changed
        taken = 0  # notes whose records are the very ones of last time, or make the same edges
        for path in self.paths:  # block refs checked once every note's block ids are known
            w = self.works[path]
            links, resolved = w.reading.links, w.resolutions
            st = old_notes.get(path)
            if same_blocks and st is not None and links is st.links and resolved is st.resolved and not st.inputs[2]:
                checked = resolved  # what check_blocks gives: no block missing last time, against the same ids
            else:
                checked = check_blocks(links, resolved, blocks)
            w.missing_blocks = (
                () if checked is resolved else tuple(i for i, r in enumerate(checked) if r is not resolved[i])
            )
            was = kept.get(path)
            if was is not None and was[0] is links and was[1] is checked:  # the very records a watcher made last
                records = was[2]  # (the report's memo then compares them by identity)
                taken += 1
            else:
                records = _records(path, links, checked)
                taken += was is not None and _edges(was[2]) == _edges(records)
            self.note_records[path] = (links, checked, records)
            self.records.extend(records)
            if st is not None and not (links is st.links and resolved is st.resolved
                                       and w.missing_blocks == st.inputs[2]):  # fmt: skip
                self.changed.append((_records_of(path, st), records))
        # the same notes in the same order, each with the very records of last time or the same edges: the same
        # link graph as a watcher's last convert
        self.same_graph = taken == len(self.paths) == len(kept) and list(kept) == self.paths
        if not self.same_graph and self.same_notes and self.last is not None and self.last.graph[0]:
            # a fresh process: every note's records the very ones of its state but for the changed ones, which
            # make the same edges: the graph of the cached analytics
            self.same_graph = all(_edges(old) == _edges(new) for old, new in self.changed)

    def _resolve_touched(self) -> bool:
        """``_resolve`` for the touched notes alone, every other note's resolutions and records the last run's:
        where each touched note has its state's block ids (so every block check is the last run's). Where a
        touched note's aliases changed, the notes whose links name an alias key it had or has are touched too and
        resolved again (``_aliases_moved``); where a touched note makes other edges, ``same_graph`` is False (the
        analytics made again). False where a block id changed: then every note is visited (``_restart``)."""
        assert self.loops is not None and self.old is not None and self.last is not None and self.touched is not None
        loops, old_notes = self.loops, self.old.notes
        renamed = []  # touched notes whose aliases changed
        for path in self.touched:
            w, st = self.works[path], old_notes[path]
            if w.reading.blocks != st.blocks:
                return False
            if w.meta.aliases != st.meta.aliases:
                renamed.append(path)
        self.blocks = loops.blocks
        moved = frozenset[str]()
        if renamed:
            moved = self._aliases_moved(renamed)
        else:
            self.aliases, self.universe = loops.aliases, self.old.universe
        touched = self.touched
        last = self.last.resolver
        resolver: Resolver | None = last[1] if last is not None and last[0] == self.universe else None
        if resolver is None and last is not None and renamed and same_files(last[0], self.universe):
            resolver = _with_aliases(last[1], self.aliases)  # the same files: the last one, its aliases now
        kept = self.last.records
        self.note_records = dict(kept)
        self.changed = []
        regraphed = False  # a touched note makes other edges than its last records: another link graph
        for path in touched:
            w, st = self.works[path], old_notes[path]
            links = w.reading.links
            names = bool(moved) and _names_any(links, moved)  # a link whose target may resolve otherwise now
            if w.reuse is not None and not names:  # the content of its state
                w.resolved = Resolved(w.reuse.resolved, w.reuse.resolve_problems)
            elif not names and (before := _resolved_before(links, st)) is not None:
                w.resolved = Resolved(before, ())
            else:
                resolver = resolver or _resolver(self.paths, self.walk, self.aliases, self.config)
                found: Problems = []
                pairs = resolve_links_safe(resolver, path, links, found)
                w.resolved = Resolved(tuple(r for _, r in pairs), tuple(p for _, p in found))
            resolved = w.resolutions
            if links is st.links and resolved is st.resolved and not st.inputs[2]:
                checked = resolved
            else:
                checked = check_blocks(links, resolved, self.blocks)
            w.missing_blocks = (
                () if checked is resolved else tuple(i for i, r in enumerate(checked) if r is not resolved[i])
            )
            was = kept.get(path)
            if was is None:
                return False
            if was[0] is links and was[1] is checked:
                records = was[2]
            else:
                records = _records(path, links, checked)
                regraphed = regraphed or _edges(was[2]) != _edges(records)  # the analytics made again (``_analyse``)
            self.note_records[path] = (links, checked, records)
            if not (links is st.links and resolved is st.resolved and w.missing_blocks == st.inputs[2]):
                self.changed.append((_records_of(path, st), records))
        self.resolver = None if resolver is None else (self.universe, resolver)
        self.records = list(chain.from_iterable(r for _, _, r in self.note_records.values()))
        self.same_notes, self.same_graph = True, not regraphed
        return True

    def _aliases_moved(self, renamed: list[str]) -> frozenset[str]:
        """Where touched notes' aliases changed (``renamed``): this run's aliases and universe, every note whose
        links name one of the alias keys those notes had or have now added to ``touched`` (in the notes' order),
        and those keys. A link naming none of them resolves as before (``_moved_aliases``): the notes, attachments
        and excluded files are the last run's (``_touched``)."""
        assert self.loops is not None and self.touched is not None
        old_notes, works = self.old.notes if self.old is not None else {}, self.works
        moved = frozenset(
            alias_key(name) for p in renamed for name in (*old_notes[p].meta.aliases, *works[p].meta.aliases)
        )
        self.aliases = {p: m.aliases for p in self.paths if (m := works[p].meta).aliases}
        self.universe = universe_digest(self.walk, self.aliases)
        touched = frozenset(self.touched)
        named = frozenset(p for p in self.paths if p not in touched and _names_any(works[p].reading.links, moved))
        if named:
            self.touched = [p for p in self.paths if p in touched or p in named]
            self.named_again = named  # their works are the last run's: ``_restart`` gives them their states
        return moved

    def _restart(self) -> None:
        """Every note visited after all (``_resolve_touched`` declined): each note not touched given the work
        ``_parse`` gives a note whose file is its state's."""
        assert self.old is not None and self.touched is not None
        old, touched = self.old.notes, frozenset(self.touched) - getattr(self, "named_again", frozenset())
        self.works = {p: self.works[p] if p in touched else _from_state(old[p]) for p in self.paths}
        self.touched = None

    def _moved_aliases(self) -> frozenset[str] | None:
        """Where only aliases changed since the last convert (the same notes, attachments and excluded files): the
        alias keys (as ``Resolver`` folds them) whose notes changed. A link naming none of them resolves as
        before: an alias is looked up only for a name no note has, and the notes are the same. None: not known."""
        if self.old is None or not same_files(self.old.universe, self.universe):
            return None
        was = alias_table({p: st.meta.aliases for p, st in self.old.notes.items() if st.meta.aliases})
        now = alias_table(self.aliases)
        return frozenset(k for k in was.keys() | now.keys() if was.get(k) != now.get(k))

    # -- rendering ----------------------------------------------------------------------------------------
    def _render(self) -> None:
        """Doc paths (collisions moved aside and reported), then each note's doc: carried from the old bundle
        when everything it was made from is the same and the old file is as written, else made again."""
        if self.touched is not None:
            self._render_touched()
            return
        doc_of, self.collisions = self._doc_paths()
        used = frozenset(r.resolution.path or "" for r in self.records if r.resolution.status is Status.ATTACHMENT)
        doc_of.update({a.path: a.path for a in self.walk.attachments if a.path in used})
        self.doc_of, self.used = doc_of, used
        self.carried: list[str] = []
        self.graph = {p: frontmatter(a) for p, a in self.analytics.items()}
        # the same notes (so the same doc paths) and analytics as the last convert: a note whose resolutions are its
        # state's very tuple, with the same missing blocks, has its state's inputs (its targets' doc paths too)
        kept = self.same_notes and self.same_graph
        for path in self.paths:
            if self._placed(path, doc_of, kept):
                self.carried.append(path)
        self.reused = len(self.carried)
        self.carried_set = frozenset(self.carried)

    def _placed(self, path: str, doc_of: dict[str, str], same_inputs: bool) -> bool:
        """A note's ``inputs`` (its state's where ``same_inputs`` holds and its resolutions are its state's very
        tuple, with the same missing blocks: its targets' doc paths and ``graph`` key are then the same too), and
        its doc carried from its state where everything it is made from is the same and the old file is as written:
        True then."""
        w = self.works[path]
        st = w.reuse
        if same_inputs and st is not None and w.resolutions is st.resolved and w.missing_blocks == st.inputs[2]:
            w.inputs = st.inputs
        else:
            targets = tuple(doc_of.get(r.path) for r in w.resolutions if r.path)
            # missing_blocks: its rows' statuses; graph: the doc's `graph` key, which other notes' links move
            w.inputs = (doc_of[path], targets, w.missing_blocks, tuple(self.graph[path].items()))
        if st is None or not self._carries(w, st):
            return False
        w.made = Made(doc=st.doc, rewrite_problems=st.rewrite_problems, doc_problems=st.doc_problems)
        return True

    def _render_touched(self) -> None:
        """``_render`` for the touched notes alone: the same notes as the last run (so the same doc paths, and each
        other note's doc made from what it was), every other note carried as it was unless its doc in the old bundle
        is not as written, or the analytics were made again and its doc's ``graph`` key moved."""
        assert self.loops is not None and self.old is not None and self.last is not None and self.touched is not None
        loops, kept = self.loops, self.last.records
        self.collisions, self.graph = loops.collisions, loops.graph
        visit, regraphed = self.touched, frozenset[str]()
        if self.analytics is not loops.analytics:  # another link graph: each doc whose ``graph`` key moved too
            self.graph = {p: frontmatter(a) for p, a in self.analytics.items()}
            regraphed = frozenset(p for p in self.paths if self.graph[p] != loops.graph[p])
            touched = frozenset(self.touched)
            visit = [p for p in self.paths if p in touched or p in regraphed]
        doc_of, used = loops.doc_of, loops.used
        attached = Status.ATTACHMENT
        if any(r.resolution.status is attached for p in self.touched for r in (*kept[p][2], *self.note_records[p][2])):
            used = frozenset(r.resolution.path or "" for r in self.records if r.resolution.status is attached)
            if used == loops.used:
                used = loops.used
            else:
                doc_of = {p: loops.doc_of[p] for p in self.paths}
                doc_of.update({a.path: a.path for a in self.walk.attachments if a.path in used})
        self.doc_of, self.used = doc_of, used
        remade = set()
        for path in visit:
            if not self._placed(path, doc_of, path not in regraphed):
                self.works[path].made = None
                remade.add(path)
        self.remade = remade
        now = list(map(output_sig, loops.doc_files))
        for path, sig, was in zip(loops.doc_notes, now, self.old.docs.values(), strict=True):
            if sig != was and path not in remade:  # its doc in the old bundle is not as written: made again
                self.works[path].made = None
                remade.add(path)
        self.carried = [p for p in self.paths if p not in remade]
        self.reused = len(self.carried)
        self.carried_set = frozenset(self.carried)

    def _doc_paths(self) -> tuple[dict[str, str], list[tuple[str, Problem]]]:
        """``names.assign_doc_paths``: the last convert's where its notes are these, in the same order (a function
        of them alone; each state keeps its doc path, the cache the collisions), else assigned now."""
        last = self.last
        if self.old is None or last is None or last.collisions is None or not self.same_notes:
            return assign_doc_paths(self.paths)
        doc_of = {p: st.inputs[0] for p, st in self.old.notes.items()}
        return doc_of, [(p, Problem("collision", message)) for p, message in last.collisions]

    def _analyse(self) -> dict[str, NoteAnalytics]:
        """The graph analytics: the last convert's while the graph is the same (``analytics.graph_key``)."""
        if self.touched is not None:  # the same graph (``_resolve_touched``): the very analytics of the last run
            assert self.loops is not None
            self.graph_key = self.loops.graph_key
            if self.same_graph:
                return self.loops.analytics
            edges = self._edges()  # a touched note's edges changed: made again where the set of edges did
            self.graph_key = graph_key(self.paths, edges)
            return self.loops.analytics if self.graph_key == self.loops.graph_key else analyse(self.paths, edges)
        if self.last is not None and self.last.graph[0] and self.same_graph:  # a watcher's: no digest to make
            self.graph_key = self.last.graph[0]
            return {p: from_tuple(p, t) for p, t in self.last.graph[1].items()}
        edges = self._edges()
        self.graph_key = graph_key(self.paths, edges)
        if self.last is not None and self.last.graph[0] == self.graph_key:
            return {p: from_tuple(p, t) for p, t in self.last.graph[1].items()}
        return analyse(self.paths, edges)

    def _edges(self) -> list[tuple[str, str]]:
        """The link graph's edges: (source, target) of every link to another note, as ``okf.duckdb``'s ``links``
        has them with a ``target_id``."""
        return _edges(self.records)

    def _make_docs(self, stage: Path, rows: Callable[[list[ConceptRow]], None]) -> None:
        """The doc of every note not carried, written into ``stage`` (spread over workers); its concepts row
        given to ``rows``, a chunk of notes at a time, in the notes' order."""
        todo = [p for p in self.paths if self.works[p].made is None]
        b.clear(stage, [f"{b.CONCEPTS}/{self.doc_of[p]}" for p in todo], self.present)
        b.make_folders(stage, [f"{b.CONCEPTS}/{self.doc_of[p]}" for p in todo])
        self.stage = str(stage)
        self.writer: b.Writer | None = None
        self.bodies: dict[str, str] = {}  # each doc made: md5 of its concepts row's body, as ``watch`` reads them
        done = 0
        for chunk in parallel_chunks(self._make_doc, todo, self._written):
            for path, made in zip(todo[done : done + len(chunk)], chunk, strict=True):
                w = self.works[path]
                w.made, w.content = made.made, made.content
                self.bodies[path] = hashlib.md5(made.row.body.encode("utf-8", "surrogatepass")).hexdigest()
                self.parsed.pop(path, None)  # its row holds what the database needs: the note need not stay
            rows([made.row for made in chunk])
            done += len(chunk)
        self.parsed.clear()

    def _make_doc(self, path: str) -> _Doc:
        """One note's links rewritten, its doc rendered and written, its concepts row. Runs in a worker
        (``parallel_map``)."""
        w, note, found = self.works[path], self.note(path), list[tuple[str, Problem]]()
        meta = w.meta
        # strict=False: a note edited since the walk has other links; the next run redoes it
        resolved = dict(zip(note.links, w.resolutions, strict=False))
        body = rewrite_safe(note, resolved, self.doc_of, found)
        rewrite = tuple(p for _, p in found)
        found = []
        resolved_map = {(path, lk): r for lk, r in resolved.items()}
        doc = doc_safe(note, meta, body, self.doc_of, resolved_map, self.vault.name, found, self.graph[path])
        if self.writer is None or self.writer.pid != os.getpid():  # the first doc of this process
            self.writer = b.Writer()
        self.writer.write(os.path.join(self.stage, b.CONCEPTS, doc.doc_path), doc.text)
        made = Made(doc=replace(doc, text=""), rewrite_problems=rewrite, doc_problems=tuple(p for _, p in found))
        return _Doc(made=made, row=concept_row(note, meta, doc, body), content=w.content)

    def _written(self) -> None:
        """Every doc this process gave its writer is written (``parallel_map``'s ``finish``)."""
        if self.writer is not None and self.writer.pid == os.getpid():
            writer, self.writer = self.writer, None
            writer.close()

    def _carries(self, w: NoteWork, st: NoteState) -> bool:
        return (
            st.inputs == w.inputs
            and st.resolved == w.resolutions
            and st.meta == w.meta
            and output_sig(f"{self.out}/{b.CONCEPTS}/{st.doc.doc_path}") == st.output  # a join 13k times: a format
        )

    # -- the report and the files -------------------------------------------------------------------------
    def problems(self) -> tuple[tuple[str, Problem], ...]:
        """The report's problems: the walk's, then each note's (with its collision), by path."""
        collided: dict[str, list[Problem]] = {}
        for path, problem in self.collisions:
            collided.setdefault(path, []).append(problem)
        loops = self.loops
        if (
            self.touched is not None and loops is not None and loops.problems is not None
            and not self.walk.problems and not loops.walk.problems
        ):  # fmt: skip
            # the last run's, each note touched or made again with its problems of now (the same collisions)
            changed = {*self.touched, *self.remade}
            works = self.works
            now = [(p, pr) for p in self.paths if p in changed for pr in works[p].problems(tuple(collided.get(p, ())))]
            was = [item for item in loops.problems if item[0] in changed]
            if was == now:
                self.made_problems = loops.problems
            else:
                kept = [item for item in loops.problems if item[0] not in changed]
                self.made_problems = tuple(sorted([*kept, *now], key=_by_path))
            return self.made_problems
        notes: list[tuple[str, Problem]] = []
        for p in self.paths:  # most notes have none: each step's problems looked at before any tuple is made
            w = self.works[p]
            r, f, res, m = w.reading, w.fields, w.resolved, w.made
            assert f is not None and res is not None and m is not None
            if (r.read_problems or r.parse_problems or f.problems or res.problems or m.rewrite_problems
                    or m.doc_problems or p in collided):  # fmt: skip
                notes.extend((p, pr) for pr in w.problems(tuple(collided.get(p, ()))))
        self.made_problems = tuple(sorted([*self.walk.problems, *notes], key=_by_path))
        return self.made_problems

    @cached_property
    def found(self) -> Found:
        """Unlinked mentions over the whole vault, worked out again only where an edit may have changed them
        (``mentions.find_again``): the notes whose prose, links or names differ from their last state, and the
        notes that hold a name that came, went or changed. One pass over the notes compares each one's parts with
        its last state's by identity; nothing else is done per note."""
        last = self.last
        states = last.notes if last is not None else {}
        touched: list[str] = []
        renamed = False  # a note's names (file name, title, aliases) differ from its last state's, or it is new
        for path in self.paths:
            w = self.works[path]
            st = states.get(path)
            if st is None:
                touched.append(path)
                renamed = True
                continue
            w.hits = st.hits  # unless read again
            meta = w.meta
            if w.reading.prose is st.prose and w.resolutions is st.resolved and meta is st.meta:
                continue
            touched.append(path)
            renamed = renamed or (
                meta is not st.meta and (meta.title, meta.aliases) != (st.meta.title, st.meta.aliases)
            )
        same = len(states) == len(self.paths) - sum(1 for p in touched if p not in states)
        gone = [] if same else [p for p in states if p not in self.works]
        applied = last.applied if last is not None else None
        found = find_again(
            self.paths,
            Now(lambda p: self.works[p].reading.prose, lambda p: _linked(self.works[p].resolutions)),
            self._name_index(renamed or bool(gone), applied),
            Before(partial(_prose_hits, states), last.names if last is not None else frozenset(), applied),
            touched, gone, same_order=not gone and not renamed and list(states) == self.paths,
        )  # fmt: skip
        for path, hits in found.hits.items():
            self.works[path].hits = hits
        return found

    def _name_index(self, renamed: bool, applied: Applied | None) -> NameIndex:
        """``mentions.name_index``: the last convert's where no note's names changed and none came or went."""
        last = self.last
        if not renamed and applied is not None:
            return applied.index, applied.capital
        if not renamed and last is not None and last.name_index is not None:
            return last.name_index
        metas = {p: self.works[p].meta for p in self.paths}
        return name_index([NoteNames(p, (p.rpartition("/")[2][:-3], m.title, *m.aliases), "", frozenset())
                           for p, m in metas.items()])  # fmt: skip

    @property
    def mentions(self) -> list[Mention]:
        return self.found.mentions

    @property
    def report(self) -> LinkReport:
        if not hasattr(self, "_report"):
            was = self.report_memo.paths
            notes = was[1] if was is not None and was[0] == self.paths else [_Path(p) for p in self.paths]
            self.report_memo.paths = (self.paths, notes)
            works = [self.works[p] for p in self.paths]
            words = [w.reading.words for w in works]
            memo = self.old.loaded if self.old is not None and self.old.universe == self.universe else None
            self.near = dict(memo.near) if memo else {}
            last = self.last.tally.tally if self.last is not None else None
            self.tally = TallyBox(last)  # the sum of the notes' words, moved on from a watcher's last convert
            broken = self._broken_words(last)
            self.named = dict(self.last.named) if self.last is not None else {}  # a function of each name alone
            found = spelling_variants(notes, self.aliases, (), words, self.near, self.tally, self.named, broken)
            variants = tuple(found)
            self.suggest_key = suggest_key(self.universe, variants)
            known = memo.suggested if memo and memo.suggest_key == self.suggest_key else {}
            same_suggestions = memo is not None and memo.suggest_key == self.suggest_key
            earlier = None if self.report_memo.json else self._last_report(same_suggestions)
            self._report = LinkReport(
                vault=self.vault.name,
                notes=tuple(self.paths),
                records=tuple(self.records),
                problems=self.problems(),
                skipped=self.walk.skipped,
                aliases=self.aliases,
                types=self._types([w.meta for w in works]),
                variants=variants,
                suggested=dict(known),
                mentions=tuple(self.mentions),
                memo=self.report_memo,
                last=earlier,
                by_note={p: self.note_records[p][2] for p in self.paths},
            )
        return self._report

    def _broken_words(self, tally: Tally | None) -> Counter[str]:
        """The broken links' words counted (``suggest.broken_targets``): the last convert's (kept with its tally's
        clusters) where the notes are its notes and each note whose records changed links the same broken targets;
        else counted over every link."""
        clusters = tally.clusters if tally is not None else None
        if clusters is not None and self.same_notes and all(_broken(a) == _broken(b) for a, b in self.changed):
            return clusters.broken
        return broken_targets(r.link.target for r in self.records if r.resolution.status is Status.BROKEN)

    def _types(self, metas: list[Meta]) -> tuple[dict[str, Any], ...]:
        """``report.type_rows`` of the notes' metas: a watcher's last rows where every meta is the very same, or has
        the same origin (all that ``type_rows`` reads); in a fresh process, the cache's rows where the notes are its
        notes, each meta its state's or of the same origin."""
        was = self.report_memo.types
        if was is None and self.old is not None and self.last is not None and self.same_notes:
            was = ([st.meta for st in self.old.notes.values()], self.last.types)
        if (
            was is not None
            and len(was[0]) == len(metas)
            and all(
                a is b or a.origin == b.origin  # the same meta, or one of the same origin: all type_rows reads
                for a, b in zip(was[0], metas, strict=True)
            )
        ):
            self.report_memo.types = (metas, was[1])
            return was[1]
        rows = tuple(type_rows(metas))
        self.report_memo.types = (metas, rows)
        return rows

    def _last_report(self, suggestions: bool) -> LastReport | None:
        """The last convert's ``link-health.json`` (``report.LastReport``), for a process with no report memo (a
        fresh one, a watcher's first convert): read where it is as written (its signature and sha256 the ones
        recorded) and the rows were carried from the same cache (``self.old``: the notes' states)."""
        rel, prior = "link-health.json", self.prior
        if self.old is None or prior is None or not prior.digests.get(rel) or not prior.files.get(rel):
            return None
        path = os.path.join(self.out, rel)
        try:
            if output_sig(path) != prior.files[rel]:
                return None
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            return None
        digest = hashlib.sha256(data).hexdigest()
        if digest != prior.digests[rel]:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        last = LastReport.parse(text, self.old.universe == self.universe, suggestions, tuple(self.changed))
        if last is not None:
            last.seed(self.report_memo, data, digest)
        return last

    def write(self, stage: Path, key: str, started: int, present: set[str] | None = None) -> ConvertCache:
        """The new generation written into ``stage``; ``present``: the files a recycled stage holds (``b.Spare``),
        taken where carried, unlinked before anything is written at their paths."""
        self.present = present if present is not None else set()
        meta = {"vault": self.vault.name, "okf_version": b.OKF_VERSION}
        old_db = self.old_db if self.carried else None
        database: DatabaseWriter | DatabasePatcher
        self.patching = self._patches()  # the old file copied and patched: its tables as they were but where set
        if self.patching:
            database = DatabasePatcher(stage / DATABASE, self.old_db)
        else:
            database = DatabaseWriter(stage / DATABASE, meta, old_db, self.carried)
        try:
            self._make_docs(stage, database.concepts)
            self.clock.lap("docs")
            self.mentions  # noqa: B018 - found now, so the clock times them alone
            self.clock.lap("mentions")
            with ThreadPoolExecutor(max_workers=1) as pool:  # DuckDB loads while the rest is made and written
                links = pool.submit(self._write_links, database)
                files = self._write_rest(stage)
                links.result()
        except BaseException:
            database.abort()
            raise
        self.clock.lap("write")
        return self._cache(stage, key, started, files)

    def _patches(self) -> bool:
        """May ``okf.duckdb`` be the old one patched (``db.DatabasePatcher``)? Where the notes are the old ones in
        the same order, at most ``_PATCH_MOST`` of them made again, each with its old doc path, as many links and
        the same tags and aliases (the list columns, which DuckDB cannot update in place)."""
        if self.old is None:
            return False
        made = [p for p in self.paths if self.works[p].made is None]
        notes = self.old.notes
        if len(made) > _PATCH_MOST or list(notes) != self.paths:
            return False
        return all(
            notes[p].doc.doc_path == self.doc_of[p]
            and len(notes[p].links) == len(self.works[p].reading.links)
            and (notes[p].meta.tags, notes[p].meta.aliases) == (self.works[p].meta.tags, self.works[p].meta.aliases)
            for p in made
        )

    def _write_links(self, database: DatabaseWriter | DatabasePatcher) -> None:
        """The links rows of the notes not carried, a batch at a time, and the database finished."""
        carried = self.carried_set
        batch: list[LinkRow] = []
        for path in self.paths:
            if path in carried:
                continue
            for r in self.note_records[path][2]:  # ``records``, a note at a time
                batch.append(link_row(r, self.doc_of))
                if len(batch) >= _LINK_BATCH:
                    database.links(batch)
                    batch = []
        database.links(batch)
        database.mentions(mention_rows(self.mentions, lambda p: concept_id(self.doc_of[p])))
        if not (self.patching and self._same_analytics()):
            database.analytics([self._analytics_row(self.analytics[p]) for p in self.paths])
        database.close()

    def _same_analytics(self) -> bool:
        """Are the analytics rows the old ``okf.duckdb`` holds the ones this run would write? Where it is patched
        (the same notes in the same order, so the same doc paths) and the link graph is the one the last convert's
        analytics were made from (its key: a digest of the notes and edges, of which the analytics are a function).
        Then the patch keeps the table as it is (rewriting 13k rows took 0.3 s of a one-edit rebuild)."""
        last = self.last
        return self.old is not None and last is not None and bool(last.graph[0]) and last.graph[0] == self.graph_key

    def _analytics_row(self, a: NoteAnalytics) -> AnalyticsRow:
        return AnalyticsRow(
            id=concept_id(self.doc_of[a.path]), pagerank=a.pagerank, rank=a.rank, centrality=a.centrality,
            community=concept_id(self.doc_of[a.community]), in_degree=a.in_degree, out_degree=a.out_degree, hub=a.hub,
            orphan=a.orphan,
        )  # fmt: skip

    def _write_rest(self, stage: Path) -> list[str]:
        """The folder indexes, the link-health report, SKILL.md and the marker written, the attachments copied
        and every file carried from the old bundle linked: the paths of the files written. Each link-health
        file is written as soon as it is made (the page of a big vault is tens of MB, made while the database
        still takes rows: holding all three would raise a convert's peak memory)."""
        report = self.report
        self.clock.lap("report")
        vault, doc_of, used = self.vault, self.doc_of, self.used
        files: dict[str, str | bytes] = {}
        links_from: dict[str, str] = {}
        old_root = str(self.out)
        loops = self.loops if self.touched is not None else None
        docs, types = self._docs(loops)
        if loops is not None and loops.doc_links is not None:  # every note's doc but those made again
            links_from = dict(loops.doc_links)
            for path in self.remade:
                del links_from[f"{b.CONCEPTS}/{doc_of[path]}"]
        else:
            for path in self.carried:
                rel = f"{b.CONCEPTS}/{self.works[path].doc.doc_path}"
                links_from[rel] = f"{old_root}/{rel}"
        attachment_folders = {posixpath.dirname(p) for p in used if p}
        indexes: list[str] = []
        todo = dict[str, b.IndexKey]()
        if loops is not None and loops.keys is not None and used is loops.used:
            old_keys, self.index_keys = self._folder_keys_touched(loops, loops.keys)
        else:
            old_keys = self._old_folder_keys(vault.name)
            self.index_keys = b.folder_keys(docs, vault.name, attachment_folders)
        for folder, index_key in self.index_keys.items():
            rel = posixpath.join(b.CONCEPTS, folder, "index.md")
            indexes.append(rel)
            if old_keys.get(folder) == index_key and self._as_written(rel):  # made from the same docs: linked
                links_from[rel] = os.path.join(old_root, rel)
            else:
                todo[folder] = index_key
        for folder, text in b.folder_texts(todo, self.report_memo.indexes).items():
            files[posixpath.join(b.CONCEPTS, folder, "index.md")] = text
        files["index.md"] = b.root_index(vault.name)
        data = report.to_json()
        files["SKILL.md"] = skill_text(vault.name, vault.name, types, data["totals"], folders=data["types"])
        renamed = {p: f"{b.CONCEPTS}/{d}" for p, d in doc_of.items() if d != p}
        json_data, json_digest = report.to_json_file(self.report_memo)
        held = [json_data]  # given up once written
        del json_data
        # the page and the Markdown are made from the JSON (the page with the renamed docs' paths): where that is
        # what the old ones were made from, and they are as written, they are linked without being made again
        json_source = json_digest.encode()
        made: list[tuple[str, str | None, Callable[[], str | bytes]]] = [
            ("link-health.json", None, held.pop),
            ("link-health.md", _digest(json_source), lambda: report.to_markdown(self.report_memo)),
            ("link-health.html", _digest(json_source, repr(sorted(renamed.items())).encode("utf-8")),
             lambda: link_health_html(data, renamed, self.report_memo.html)),
        ]  # fmt: skip
        for rel, source, make in made:
            if source is not None and self._made_from(rel, source):
                links_from[rel] = os.path.join(old_root, rel)
                continue
            content = _encoded(make())
            if self._same_file(rel, content, json_digest if rel == "link-health.json" else None):
                links_from[rel] = os.path.join(old_root, rel)
            else:
                b.clear(stage, [rel], self.present)
                b.write_file(stage / rel, content)
            del content
        listed = frozenset(indexes)
        written = [*indexes, *(rel for rel in files if rel not in listed), *(rel for rel, _, _ in made)]
        for rel in list(files):  # the same bytes as the old bundle's file: linked, not written again
            if self._same_file(rel, _encoded(files[rel])):
                links_from[rel] = os.path.join(old_root, rel)
                del files[rel]
        files[b.MARKER] = json.dumps({"tool": "vault2okf", "vault": vault.name, "okf_version": b.OKF_VERSION}) + "\n"
        copies, old_copies = {}, self.old.attachments if self.old else {}
        sources = {a.path: a for a in self.walk.attachments if a.path in used}
        for path, a in sources.items():
            rel = f"{b.CONCEPTS}/{path}"
            was = old_copies.get(path)
            if was is not None and was[0] == a.sig and output_sig(os.path.join(old_root, rel)) == was[1]:
                links_from[rel] = os.path.join(old_root, rel)
            else:
                copies[rel] = a.abs_path
        self.clock.lap("render")
        self.copied = b.write_tree(stage, files, copies, links_from, present=self.present)
        self.linked = frozenset(links_from) - self.copied  # the very files of the old bundle
        return [*written, b.MARKER]

    def _docs(self, loops: Loops | None) -> tuple[list[b.Doc], dict[str, int]]:
        """Every note's doc, and how many docs of each type (most first): the last run's, each doc made again in
        its place, where its loops were followed."""
        if loops is not None and loops.docs is not None:
            docs, where = list(loops.docs), loops.where
            for path in self.remade:
                docs[where[path]] = self.works[path].doc
            if all(docs[where[p]].type == loops.docs[where[p]].type for p in self.remade):
                self.docs_made, self.types = docs, loops.types
                return docs, loops.types
        else:
            docs = [self.works[p].doc for p in self.paths]
        self.docs_made, self.types = docs, dict(Counter(d.type for d in docs).most_common())
        return docs, self.types

    def _folder_keys_touched(
        self, loops: Loops, keys: dict[str, b.IndexKey]
    ) -> tuple[dict[str, b.IndexKey], dict[str, b.IndexKey]]:
        """The old and new ``bundle.folder_keys`` where the last run's loops were followed: the same notes, doc
        paths and attachments, so the last run's keys, with each folder of a doc made again keyed anew."""
        new = dict(keys)
        for folder in {self.doc_of[p].rpartition("/")[0] for p in self.remade}:
            _, subs, title = keys[folder]
            new[folder] = (tuple(self.works[p].doc for p in loops.folder_notes[folder]), subs, title)
        return keys, new

    def _old_folder_keys(self, title: str) -> dict[str, b.IndexKey]:
        """What each folder's ``index.md`` of the old bundle was made from (``bundle.folder_keys``), from the last
        convert's states: the docs carried are the very ``Doc`` objects, so a folder whose notes were all carried
        compares by identity."""
        old = self.prior
        if old is None:
            return {}
        extra = {posixpath.dirname(p) for p in old.attachments}
        return b.folder_keys([st.doc for st in old.notes.values()], title, extra)

    def _as_written(self, rel: str) -> bool:
        """Is the old bundle's ``rel`` the file the last convert wrote (its signature the one recorded, its sha256
        known)? Then its digest is this run's too."""
        old = self.prior
        if old is None or rel not in old.digests or not old.files.get(rel):
            return False
        if output_sig(os.path.join(self.out, rel)) != old.files[rel]:
            return False
        self.digests[rel] = old.digests[rel]
        return True

    def _made_from(self, rel: str, source: str) -> bool:
        """Was the old bundle's ``rel`` made from ``source`` (a digest of what makes it), and is it as written?
        Then it is what this run would make. Recorded either way."""
        self.digests[f"{rel}\0from"] = source
        old = self.prior
        if old is None or old.digests.get(f"{rel}\0from") != source or rel not in old.digests:
            return False
        if output_sig(os.path.join(self.out, rel)) != old.files.get(rel, ()) or not old.files.get(rel):
            return False
        self.digests[rel] = old.digests[rel]
        return True

    def _same_file(self, rel: str, data: bytes, digest: str | None = None) -> bool:
        """Is ``data`` the content of the old bundle's ``rel``, as the last convert wrote it (its sha256 recorded
        then, the file not touched since: size, mtime and inode the same)? Its digest (``digest`` where it is
        known) is recorded either way."""
        digest = self.digests[rel] = digest or hashlib.sha256(data).hexdigest()
        old = self.prior
        return (
            old is not None
            and old.digests.get(rel) == digest
            and output_sig(os.path.join(self.out, rel)) == old.files.get(rel, ())
            and old.files.get(rel, ()) != ()
        )

    def _cache(self, stage: Path, key: str, started: int, files: list[str]) -> ConvertCache:
        root, carried = str(stage), self.carried_set
        visit = self._changed_states()
        old = self.old
        notes = {} if visit is None or old is None else dict(old.notes)
        for path in self.paths if visit is None else visit:
            w = self.works[path]
            doc = w.doc
            rel = f"{b.CONCEPTS}/{doc.doc_path}"
            if path in carried and w.reuse is not None and rel not in self.copied:
                output = w.reuse.output  # hard-linked: the very file the last convert wrote, as it checked
            else:
                output = output_sig(os.path.join(root, rel))
            if w.reuse is not None and _as_kept(w, w.reuse, output):
                notes[path] = w.reuse  # every part the very one of its state: no state made, none compared
                continue
            state = w.state(doc if not doc.text else replace(doc, text=""), output)
            notes[path] = w.reuse = w.reuse if w.reuse is not None and w.reuse == state else state  # the base's
        if visit is None or old is None:
            docs = {f"{b.CONCEPTS}/{s.doc.doc_path}": s.output for s in notes.values()}
            contents = {p: s.content for p, s in notes.items()}
        else:  # the same doc paths as the last run's (``_render_touched``)
            docs, contents = dict(old.docs), dict(old.contents)
            for path in visit:
                st = notes[path]
                docs[f"{b.CONCEPTS}/{st.doc.doc_path}"], contents[path] = st.output, st.content
        # a file linked from the old bundle is the very file (inode, size, mtime) whose signature was checked
        linked, was = self.linked, self.prior.files if self.prior is not None else {}
        others = {
            rel: was[rel] if rel in linked and rel in was else output_sig(os.path.join(root, rel))
            for rel in files
            if rel not in docs
        }
        others[DATABASE] = output_sig(os.path.join(root, DATABASE))
        copied = [a for a in self.walk.attachments if a.path in self.used]
        old_copies = self.prior.attachments if self.prior is not None else {}
        attachments = {a.path: (a.sig, self._copy_sig(root, a.path, old_copies.get(a.path))) for a in copied}
        report = self.report
        data = report.to_json()
        broken = {entry["target"] for entry in data["broken"]}
        suggested = {t: found for t, found in report.suggested.items() if t in broken}
        last = self.last
        body = Body(
            notes=notes, problems=report.problems, types=report.types, variants=report.variants, near=self.near,
            suggested=suggested, suggest_key=self.suggest_key, names=self.found.keys,
            graph=self._graph_saved(), tally=self.tally,
            collisions=tuple((p, problem.message) for p, problem in self.collisions),
            name_index=None if self.found.applied is None else (dict(self.found.applied.index),
                                                                self.found.applied.capital),
            named=self.named, report_memo=self.report_memo, base=last.base if last else None,
            base_notes=last.base_notes if last else {},
            records=self.note_records, resolver=self.resolver, applied=self.found.applied,
        )  # fmt: skip
        body.loops = self._loops(notes, docs)
        return ConvertCache(
            key=key,
            started_ns=started,
            walk=walk_digest(self.walk),
            universe=self.universe,
            contents=contents,
            attachments=attachments,
            files=others,
            docs=docs,
            summary={"links": len(self.records), "totals": data["totals"]},
            body=lambda: body,
            digests=self.digests,
        )

    def _copy_sig(self, root: str, path: str, was: tuple[tuple[int, ...], tuple[int, ...]] | None) -> tuple[int, ...]:
        """The signature of an attachment's copy in the stage: the old one's where it was linked from the old
        bundle (checked then), else read."""
        rel = f"{b.CONCEPTS}/{path}"
        if was is not None and rel in self.linked:
            return was[1]
        return output_sig(os.path.join(root, rel))

    def _changed_states(self) -> list[str] | None:
        """The notes whose state may not be the one the cache has (``_cache``), where the last run's ``Loops`` were
        followed: the touched notes, those made again and those whose mentions' hits changed, in the notes' order;
        None where every note is to be looked at."""
        if self.touched is None or self.old is None or any(rel in self.old.docs for rel in self.copied):
            return None
        special = frozenset(self.touched) | frozenset(p for p in self.paths if p not in self.carried_set)
        return [p for p, w in self.works.items() if p in special or w.reuse is None or w.hits is not w.reuse.hits]

    def _graph_saved(self) -> tuple[str, dict[str, tuple[Any, ...]]]:
        """``Body.graph``: the last run's where the analytics are its very ones."""
        last = self.last
        if self.touched is not None and last is not None and last.graph[0] == self.graph_key:
            return last.graph
        return self.graph_key, {p: as_tuple(a) for p, a in self.analytics.items()}

    def _loops(self, notes: dict[str, NoteState], docs: dict[str, tuple[int, ...]]) -> Loops | None:
        """What this run leaves for the next one's loops (``Loops``), each note's ``reuse`` its new state."""
        if self.touched is not None and self.loops is not None:
            loops = self.loops
            doc_notes, doc_files, doc_links = loops.doc_notes, loops.doc_files, loops.doc_links
            folder_notes, where = loops.folder_notes, loops.where
        else:
            where = {p: i for i, p in enumerate(self.paths)}
            doc_notes, doc_files = list(notes), [f"{self.out}/{rel}" for rel in docs]
            doc_links = dict(zip(docs, doc_files, strict=True))
            by_folder: dict[str, list[str]] = {}
            for path in self.paths:
                by_folder.setdefault(self.doc_of[path].rpartition("/")[0], []).append(path)
            folder_notes = {folder: tuple(paths) for folder, paths in by_folder.items()}
        if len(doc_notes) != len(docs) or len(notes) != len(self.paths):
            return None
        return Loops(
            root=str(self.out), walk=self.walk, base=self.config.base, works=self.works, aliases=self.aliases,
            blocks=self.blocks, graph_key=self.graph_key, analytics=self.analytics, graph=self.graph,
            doc_of=self.doc_of, collisions=self.collisions, used=self.used, doc_notes=doc_notes, doc_files=doc_files,
            problems=getattr(self, "made_problems", None), doc_links=doc_links, keys=getattr(self, "index_keys", None),
            folder_notes=folder_notes, docs=getattr(self, "docs_made", None), where=where,
            types=getattr(self, "types", {}),
        )  # fmt: skip


@dataclass(frozen=True)
class _Path:
    path: str  # a note as spelling_variants needs it when its body_words are known


def _broken(records: tuple[LinkRecord, ...]) -> list[str]:
    """The targets of a note's broken links, in its order."""
    return [r.link.target for r in records if r.resolution.status is Status.BROKEN]


def _as_kept(w: NoteWork, st: NoteState, output: tuple[int, ...]) -> bool:
    """Would ``w.state(doc, output)`` equal ``st`` because each of its parts is ``st``'s very object (or an equal
    number, path or signature)? Most notes of a one-edit convert: their state is taken as it is, none made."""
    r, f, res, m = w.reading, w.fields, w.resolved, w.made
    return (
        f is not None and res is not None and m is not None
        and r.links is st.links and r.words is st.words and r.read_problems is st.read_problems
        and r.parse_problems is st.parse_problems and r.blocks is st.blocks and r.prose is st.prose
        and f.meta is st.meta and f.problems is st.meta_problems and f.mtime == st.mtime and f.base == st.base
        and res.resolutions is st.resolved and res.problems is st.resolve_problems and w.inputs is st.inputs
        and m.doc is st.doc and m.rewrite_problems is st.rewrite_problems and m.doc_problems is st.doc_problems
        and w.hits is st.hits and w.sig == st.sig and w.content == st.content and output == st.output
    )  # fmt: skip


def _from_state(st: NoteState) -> NoteWork:
    """A note's work where its file is the one ``st`` read (``Run._parse``)."""
    return NoteWork(sig=st.sig, content=st.content, reading=Reading.of(st), reuse=st, fields=Fields.of(st))


def _prose_hits(states: Mapping[str, NoteState], path: str) -> tuple[str, tuple[Any, ...]] | None:
    """A note's prose and hits as its last state has them (``mentions.Before``)."""
    st = states.get(path)
    return None if st is None else (st.prose, st.hits)


def _linked(resolutions: Iterable[Resolution]) -> set[str]:
    """The notes a note's links reached (an ambiguous link's candidates too): where it has no unlinked mention."""
    out: set[str] = set()
    for res in resolutions:
        if res.path is not None:
            out.add(res.path)
        if res.candidates:
            out.update(res.candidates)
    return out


def _edges(records: Iterable[LinkRecord]) -> list[tuple[str, str]]:
    return [(r.source, r.resolution.path) for r in records if r.resolution.status in NOTE_STATUSES
            and r.resolution.path is not None]  # fmt: skip


def _resolved_before(links: tuple[Link, ...], st: NoteState | None) -> tuple[Resolution, ...] | None:
    """Each link's resolution where the note's last state resolved its target too, with no problem (a link
    resolves by its target and its note's path alone, for the same universe and config); else None."""
    if st is None or st.resolve_problems:
        return None
    before = dict(zip((link.target for link in st.links), st.resolved, strict=True))
    found = [before.get(link.target) for link in links]
    return None if None in found else tuple(found)  # type: ignore[arg-type]


def _records_of(path: str, st: NoteState) -> tuple[LinkRecord, ...]:
    """A note's records as the last convert made them from its state (``NoteState.inputs[2]``: the links whose
    block was missing)."""
    checked = list(st.resolved)
    for i in st.inputs[2]:
        r = checked[i]
        checked[i] = Resolution(Status.MISSING_BLOCK, r.path, r.candidates, r.rule)
    return _records(path, st.links, tuple(checked))


def _records(path: str, links: tuple[Link, ...], checked: tuple[Resolution, ...]) -> tuple[LinkRecord, ...]:
    """``LinkRecord(path, link, resolution)`` for each link, its fields stored in its dict rather than by the frozen
    dataclass's ``__init__`` (one ``object.__setattr__`` a field), one item at a time (a third faster than one
    ``dict.update`` with keywords): a fresh one-edit convert makes one per link of the vault, 111k at 13k notes."""
    new, out = object.__new__, list[LinkRecord]()
    add = out.append
    for lk, r in zip(links, checked, strict=True):
        record = new(LinkRecord)
        fields = record.__dict__
        fields["source"], fields["link"], fields["resolution"] = path, lk, r
        add(record)
    return tuple(out)


def _with_aliases(resolver: Resolver, aliases: dict[str, tuple[str, ...]]) -> Resolver:
    """``resolver`` with the alias table of ``aliases``: what ``_resolver`` makes for the same notes, attachments,
    excluded files and config (the rest of a ``Resolver`` is made from those alone, and only read)."""
    new = copy.copy(resolver)
    new.aliases = alias_table(aliases)
    return new


def _names_any(links: tuple[Link, ...], keys: frozenset[str]) -> bool:
    """Does one of ``links`` name (as ``Resolver`` looks up an alias) one of ``keys``?"""
    return bool(keys) and any(alias_key(link.target) in keys for link in links)


def _encoded(text: str | bytes) -> bytes:
    return text if isinstance(text, bytes) else text.encode("utf-8")


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


def _interned(words: BodyWords) -> BodyWords:
    """``words`` sent back by a worker, each word held once again (as ``body_words`` leaves them)."""
    runs = Counter({sys.intern(w): n for w, n in words.runs.items()})
    return BodyWords(runs, frozenset(map(sys.intern, words.lower)))


def _resolver(paths: list[str], walk: Walk, aliases: dict[str, tuple[str, ...]], config: Config) -> Resolver:
    return Resolver(
        notes=paths,
        attachments=[f.path for f in walk.attachments],
        aliases=aliases,
        overrides=config.overrides,
        excluded=walk.excluded,
        exclude=config.exclude,
        excluded_names=config.excluded_names,
        source=config.source,
    )


class Clock:
    """Seconds per stage of a convert (``ConvertResult.stages``)."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self.last, 4)
        self.last = now

    def total(self) -> float:
        return time.perf_counter() - self.start


def _by_path(item: tuple[str, Any]) -> str:
    return item[0]
