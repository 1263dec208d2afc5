"""``convert``: vault -> parsed notes -> resolved links -> OKF docs + link-health report + okf.duckdb."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import posixpath
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from vault2okf import bundle as b
from vault2okf.cache import (
    Body,
    CacheDamaged,
    ConvertCache,
    NoteState,
    cache_key,
    cache_path,
    output_sig,
    suggest_key,
    universe_digest,
    walk_digest,
)
from vault2okf.cache import load as load_cache
from vault2okf.cache import save as save_cache
from vault2okf.config import Config, load_config
from vault2okf.db import ConceptRow, DatabaseWriter, LinkRow
from vault2okf.errors import Vault2OkfError, disk_full_message, is_disk_full
from vault2okf.guard import Problems, note_meta_safe, parse_safe, read_bytes, resolve_links_safe, rewrite_safe
from vault2okf.html import link_health_html
from vault2okf.mentions import Mention, mention_rows, prose, vault_mentions
from vault2okf.meta import Meta, vault_base
from vault2okf.names import assign_doc_paths
from vault2okf.parse import _FM_WIKILINK, Note, Problem, Syntax, split_wikilink
from vault2okf.report import LinkRecord, LinkReport, type_rows
from vault2okf.resolve import NOTE_STATUSES, Resolution, Resolver, Status, block_sets, check_blocks
from vault2okf.rewrite import anchor, label, relative
from vault2okf.scan import prepare_parser
from vault2okf.skill import skill_text
from vault2okf.suggest import BodyWords, body_words, spelling_variants
from vault2okf.walk import VaultFile, Walk, walk_vault
from vault2okf.workers import parallel_chunks, parallel_map

_NOTE = (*NOTE_STATUSES, Status.SELF)
_OKF_KEYS = ("type", "title", "description", "resource", "timestamp", "tags")


@dataclass(frozen=True)
class ConvertResult:
    out: Path
    notes: int
    links: int
    load_report: Callable[[], LinkReport] = field(repr=False, compare=False)
    seconds: float = 0.0
    stages: dict[str, float] = field(default_factory=dict)  # seconds per stage: walk, parse, resolve, write
    unchanged: bool = False  # nothing changed since the last convert: the bundle was left as it was
    reused: int = 0  # notes whose doc and rows were carried from the last convert unchanged
    known_totals: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    notices: tuple[str, ...] = ()  # what the user should know that is not about a note (a damaged cache)

    @cached_property
    def report(self) -> LinkReport:
        return self.load_report()

    @cached_property
    def totals(self) -> dict[str, Any]:
        """``report.totals()``, without reading the report when the convert found nothing changed."""
        return self.known_totals if self.known_totals is not None else self.report.totals()


def convert(
    vault: Path, out: Path, *, config_path: Path | None = None, force: bool = False, full: bool = False
) -> ConvertResult:
    """Convert ``vault`` into the bundle ``out``, redoing only what changed since the last convert of it
    (``vault2okf.cache``); ``full`` ignores what the last convert left. Either way the bundle is the one a
    full convert writes."""
    with _collector_paused():
        try:
            return _convert(vault, out, config_path, force, full)
        except OSError as error:
            if not is_disk_full(error):
                raise
            # the new bundle is built beside the old one, as big; a first one: the docs, okf.duckdb, the reports
            need = _tree_size(out) or 3 * _tree_size(vault) + (2 << 20)
            raise Vault2OkfError(disk_full_message(out, need, "a convert")) from error


def _tree_size(root: Path) -> int:
    """Bytes of the files under ``root`` (0 when it is missing): what a bundle of it takes, about."""
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic collector paused while a convert builds its many small objects, none of them in a cycle,
    and the cache it reads (millions of tuples). At Python's default it ran hundreds of times in a convert and
    took a tenth of it; even at a threshold of 20,000 it took a tenth of loading the cache of a 6.6k-note vault,
    and off, that convert's peak memory was the same (440 MiB). Workers forked meanwhile inherit the pause.
    Reference counting frees everything as before; the collector runs again as soon as the convert ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _convert(vault: Path, out: Path, config_path: Path | None, force: bool, full: bool) -> ConvertResult:
    clock = _Clock()
    started = time.time_ns()
    vault, out = vault.resolve(), out.resolve()
    config = load_config(vault, config_path)
    b.check_output(vault, out, force=force)
    walk = walk_vault(vault, config.exclude)
    config = replace(config, base=vault_base([f.path for f in walk.notes]))
    clock.lap("walk")
    with b.bundle_lock(out, "converting"):  # one convert or index of a bundle at a time
        b.prepare_output(vault, out, force=force)
        key = cache_key(vault, vault.name, config)
        old, unchanged, notices = (None, False, ()) if full or force else _last_cache(out, key, walk)
        if old is not None and unchanged:
            clock.lap("check")
            last = old

            def load() -> LinkReport:
                return last.report(vault.name, walk)

            links, totals = old.summary["links"], old.summary["totals"]
            return ConvertResult(out, len(walk.notes), links, load, clock.total(), clock.laps, True, 0, totals)
        run = _Run(vault, out, walk, config, old, clock)
        stage = b.staging_dir(out)
        try:
            new_cache = run.write(stage, key, started)
            b.seal(stage)
            new_cache.files[b.MARKER] = output_sig(stage / b.MARKER)
            save_cache(stage, new_cache)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        b.swap_into_place(stage, out)  # never leaves `out` missing; a kill in it is finished by the next run
    clock.lap("swap")
    report = run.report
    done = ConvertResult(out, len(walk.notes), len(run.records), lambda: report, clock.total(), clock.laps)
    return replace(done, reused=run.reused, notices=notices)


def _last_cache(out: Path, key: str, walk: Walk) -> tuple[ConvertCache | None, bool, tuple[str, ...]]:
    """The last convert's cache, checked against its digests before anything trusts it; whether nothing changed
    since (then only its body's bytes are hashed, for the report read from it; else the body is decoded now); and
    the notice of a damaged one, which counts as none."""
    try:
        old = load_cache(out, key)
        if old is None:
            return None, False, ()
        if old.unchanged(walk, out):
            if not old.intact():
                raise CacheDamaged(f"{cache_path(out)}: its body is not the one written")
            return old, True, ()
        old.loaded  # noqa: B018 - the body, decoded and checked against its digest
        return old, False, ()
    except CacheDamaged as damage:
        return None, False, (f"the convert cache was damaged ({damage}); every note was converted again",)


class _Run:
    """One convert: every note read, parsed, resolved and rendered, or its last result taken from ``old``."""

    def __init__(
        self, vault: Path, out: Path, walk: Walk, config: Config, old: ConvertCache | None, clock: _Clock
    ) -> None:
        self.vault, self.out, self.walk, self.config, self.clock = vault, out, walk, config, clock
        self.old_db = out / "okf.duckdb"
        db_intact = old is not None and output_sig(self.old_db) == old.files.get("okf.duckdb")
        self.old = old if db_intact else None  # rows are carried from the old database, so it must be intact
        self.problems: Problems = list(walk.problems)  # every step below reports here instead of raising
        self.states: dict[str, dict[str, Any]] = {}  # vault path -> this run's NoteState fields
        self.parsed: dict[str, Note] = {}
        self.files = {f.path: f for f in walk.notes}
        self._parse()
        clock.lap("parse")
        self._resolve()
        self._render()
        clock.lap("resolve")

    # -- reading ------------------------------------------------------------------------------------------
    def _parse(self) -> None:
        old = self.old.notes if self.old else {}
        todo: list[tuple[VaultFile, NoteState | None]] = []
        for f in self.walk.notes:
            st = old.get(f.path)
            if st is not None and self.old is not None and st.sig == f.sig and not self.old.racy(f):
                self.states[f.path] = {"sig": f.sig, "content": st.content, "reuse": st}
            else:
                todo.append((f, st))
        if todo:
            prepare_parser()
        for (f, st), (state, note) in zip(todo, parallel_map(self._read, todo), strict=True):
            if note is not None:
                self.parsed[f.path] = note
                state["words"] = _interned(state["words"])
            self.states[f.path] = {**state, "reuse": st} if "links" not in state else state
        self.problems.extend((p, pr) for p in self.states for pr in self._get(p, "read_problems"))
        for f in self.walk.notes:
            s = self.states[f.path]
            st = s["reuse"]
            if "meta" in s:
                pass
            elif st is not None and st.mtime == f.mtime and st.base == self.config.base:
                s.update(mtime=f.mtime, base=st.base, meta=st.meta, meta_problems=st.meta_problems)
            else:
                self._meta(f, s, self.note(f.path))
                self.parsed[f.path] = replace(self.parsed[f.path], code=None)  # its lines: only the fields read them
            self.problems.extend((f.path, pr) for pr in s["meta_problems"])

    def _read(self, item: tuple[VaultFile, NoteState | None]) -> tuple[dict[str, Any], Note | None]:
        """One note read: its state, and the note parsed (with its fields), or None where its content is the
        one ``st`` recorded. Runs in a worker (``parallel_map``): it changes nothing of the run's."""
        f, st = item
        found: Problems = []
        data = read_bytes(f, self.config, found)
        content = _content(data, found)
        if st is not None and content is not None and content == st.content:
            return {"sig": f.sig, "content": content}, None
        note = data if isinstance(data, Note) else parse_safe(f.path, data, found)
        state = {
            "sig": f.sig,
            "content": content,
            "reuse": None,
            "read_problems": tuple(p for _, p in found),
            "parse_problems": note.problems,
            "links": note.links,
            "blocks": tuple(b.id for b in note.blocks),
            "words": body_words(note.body),
            "prose": prose(note),
        }
        self._meta(f, state, note)
        return state, replace(note, code=None)  # its lines: only the fields read them

    def _meta(self, f: VaultFile, state: dict[str, Any], note: Note) -> None:
        found: Problems = []
        meta = note_meta_safe(note, f.mtime, self.config, found)
        state.update(mtime=f.mtime, base=self.config.base, meta=meta, meta_problems=tuple(p for _, p in found))

    def note(self, path: str) -> Note:
        """The parsed note, read again when it was taken from the cache (its content is the one cached)."""
        if path not in self.parsed:
            s = self.states[path]
            file = self.files[path]
            found: Problems = []
            data = read_bytes(file, self.config, found)
            note = data if isinstance(data, Note) else parse_safe(path, data, found)
            self.parsed[path] = note
            if _content(data, found) != s["content"]:  # changed since the walk: the next run will see it
                s["content"] = None
        return self.parsed[path]

    def _get(self, path: str, name: str) -> Any:
        s = self.states[path]
        if name not in s:
            s[name] = getattr(s["reuse"], name)
        return s[name]

    # -- resolving ----------------------------------------------------------------------------------------
    def _resolve(self) -> None:
        paths = [f.path for f in self.walk.notes]
        self.aliases = {p: m.aliases for p in paths if (m := self.states[p]["meta"]).aliases}
        self.universe = universe_digest(self.walk, self.aliases)
        same = self.old is not None and self.old.universe == self.universe
        resolver: Resolver | None = None
        self.records: list[LinkRecord] = []
        for path in paths:
            s = self.states[path]
            if same and s["reuse"] is not None:
                s.update(resolved=s["reuse"].resolved, resolve_problems=s["reuse"].resolve_problems)
            else:
                resolver = resolver or _resolver(paths, self.walk, self.aliases, self.config)
                found: Problems = []
                pairs = resolve_links_safe(resolver, path, self._get(path, "links"), found)
                s.update(resolved=tuple(r for _, r in pairs), resolve_problems=tuple(p for _, p in found))
            self.problems.extend((path, p) for p in s["resolve_problems"])
        blocks = block_sets((p, self._get(p, "blocks")) for p in paths)
        for path in paths:  # block refs checked once every note's block ids are known
            s = self.states[path]
            links, resolved = self._get(path, "links"), s["resolved"]
            checked = check_blocks(links, resolved, blocks)
            s["missing_blocks"] = tuple(i for i, r in enumerate(checked) if r is not resolved[i])
            self.records.extend(LinkRecord(path, lk, r) for lk, r in zip(links, checked, strict=True))

    # -- rendering ----------------------------------------------------------------------------------------
    def _render(self) -> None:
        """Doc paths (collisions moved aside and reported), then each note's doc: carried from the old bundle
        when everything it was made from is the same and the old file is as written, else made again."""
        paths = [f.path for f in self.walk.notes]
        doc_of, collisions = assign_doc_paths(paths)
        self.problems.extend(collisions)
        used = frozenset(r.resolution.path or "" for r in self.records if r.resolution.status is Status.ATTACHMENT)
        doc_of.update({a.path: a.path for a in self.walk.attachments if a.path in used})
        self.doc_of, self.used = doc_of, used
        self.carried: list[str] = []
        for path in paths:
            s = self.states[path]
            targets = tuple(doc_of.get(r.path) for r in s["resolved"] if r.path)
            s["inputs"] = (doc_of[path], targets, s["missing_blocks"])  # the last: its rows' statuses
            st = s["reuse"]
            if st is not None and self._carries(path, st):
                s.update(rewrite_problems=st.rewrite_problems, doc_problems=st.doc_problems, doc=st.doc)
                self.carried.append(path)
        self.reused = len(self.carried)

    def _make_docs(self, stage: Path, rows: Callable[[list[ConceptRow]], None]) -> None:
        """The doc of every note not carried, written into ``stage`` (spread over workers); its concepts row
        given to ``rows``, a chunk of notes at a time, in the notes' order."""
        todo = [p for p in (f.path for f in self.walk.notes) if "doc" not in self.states[p]]
        b.make_folders(stage, [f"{b.CONCEPTS}/{self.doc_of[p]}" for p in todo])
        self.stage = str(stage)
        self.writer: b.Writer | None = None
        done = 0
        for chunk in parallel_chunks(self._make_doc, todo, self._written):
            for path, (doc, rewrite, problems, _, content) in zip(todo[done : done + len(chunk)], chunk, strict=True):
                self.states[path].update(doc=doc, rewrite_problems=rewrite, doc_problems=problems, content=content)
                self.parsed.pop(path, None)  # its row holds what the database needs: the note need not stay
            rows([row for *_, row, _ in chunk])
            done += len(chunk)
        self.parsed.clear()
        for path in (f.path for f in self.walk.notes):
            self.problems.extend((path, p) for p in self.states[path]["rewrite_problems"])
        for path in (f.path for f in self.walk.notes):
            self.problems.extend((path, p) for p in self.states[path]["doc_problems"])

    def _make_doc(self, path: str) -> tuple[b.Doc, tuple[Problem, ...], tuple[Problem, ...], ConceptRow, str | None]:
        """One note's links rewritten, its doc rendered and written, its concepts row: the doc without its
        text, the problems of each step, the row, and its content key (None: the note changed since the walk).
        Runs in a worker (``parallel_map``)."""
        s, note, found = self.states[path], self.note(path), list[tuple[str, Problem]]()
        # strict=False: a note edited since the walk has other links; the next run redoes it
        resolved = dict(zip(note.links, s["resolved"], strict=False))
        body = rewrite_safe(note, resolved, self.doc_of, found)
        rewrite = tuple(p for _, p in found)
        found = []
        resolved_map = {(path, lk): r for lk, r in resolved.items()}
        doc = _doc_safe(note, s["meta"], body, self.doc_of, resolved_map, self.vault.name, found)
        if self.writer is None or self.writer.pid != os.getpid():  # the first doc of this process
            self.writer = b.Writer()
        self.writer.write(os.path.join(self.stage, b.CONCEPTS, doc.doc_path), doc.text)
        row = _concept_row(note, s["meta"], doc, body)
        return replace(doc, text=""), rewrite, tuple(p for _, p in found), row, s["content"]

    def _written(self) -> None:
        """Every doc this process gave its writer is written (``parallel_map``'s ``finish``)."""
        if self.writer is not None and self.writer.pid == os.getpid():
            writer, self.writer = self.writer, None
            writer.close()

    def _carries(self, path: str, st: NoteState) -> bool:
        s = self.states[path]
        return (
            st.inputs == s["inputs"]
            and st.resolved == s["resolved"]
            and st.meta == s["meta"]
            and output_sig(os.path.join(self.out, b.CONCEPTS, st.doc.doc_path)) == st.output
        )

    # -- the report and the files -------------------------------------------------------------------------
    @cached_property
    def mentions(self) -> list[Mention]:
        """Unlinked mentions, found again over the whole vault each run (every note's names matter)."""
        paths = [f.path for f in self.walk.notes]
        metas = {p: self.states[p]["meta"] for p in paths}
        return vault_mentions(paths, metas, {p: self._get(p, "prose") for p in paths}, self.records)

    @property
    def report(self) -> LinkReport:
        if not hasattr(self, "_report"):
            paths = [f.path for f in self.walk.notes]
            parse = [(p, pr) for p in paths for pr in self._get(p, "parse_problems")]
            notes = [_Path(p) for p in paths]
            words = {p: self._get(p, "words") for p in paths}
            metas = [self.states[p]["meta"] for p in paths]
            memo = self.old.loaded if self.old is not None and self.old.universe == self.universe else None
            self.near = dict(memo.near) if memo else {}
            variants = tuple(spelling_variants(notes, self.aliases, self.records, words, self.near))
            self.suggest_key = suggest_key(self.universe, variants)
            known = memo.suggested if memo and memo.suggest_key == self.suggest_key else {}
            self._report = LinkReport(
                vault=self.vault.name,
                notes=tuple(paths),
                records=tuple(self.records),
                problems=tuple(sorted([*self.problems, *parse], key=_by_path)),
                skipped=self.walk.skipped,
                aliases=self.aliases,
                types=tuple(type_rows(metas)),
                variants=variants,
                suggested=dict(known),
                mentions=tuple(self.mentions),
            )
        return self._report

    def write(self, stage: Path, key: str, started: int) -> ConvertCache:
        meta = {"vault": self.vault.name, "okf_version": b.OKF_VERSION}
        old_db = self.old_db if self.carried else None
        database = DatabaseWriter(stage / "okf.duckdb", meta, old_db, self.carried)
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

    def _write_links(self, database: DatabaseWriter) -> None:
        """The links rows of the notes not carried, a batch at a time, and the database finished."""
        carried = set(self.carried)
        batch: list[LinkRow] = []
        for r in self.records:
            if r.source not in carried:
                batch.append(_link_row(r, self.doc_of))
                if len(batch) >= _LINK_BATCH:
                    database.links(batch)
                    batch = []
        database.links(batch)
        database.mentions(mention_rows(self.mentions, lambda p: concept_id(self.doc_of[p])))
        database.close()

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
        docs = [self.states[f.path]["doc"] for f in self.walk.notes]
        for path in self.carried:
            rel = f"{b.CONCEPTS}/{self.states[path]['doc'].doc_path}"
            links_from[rel] = os.path.join(old_root, rel)
        attachment_folders = {posixpath.dirname(p) for p in used if p}
        for folder, text in b.folder_indexes(docs, vault.name, attachment_folders).items():
            files[posixpath.join(b.CONCEPTS, folder, "index.md")] = text
        types = dict(Counter(d.type for d in docs).most_common())
        data = report.to_json()
        files["SKILL.md"] = skill_text(vault.name, vault.name, types, data["totals"], folders=data["types"])
        renamed = {p: f"{b.CONCEPTS}/{d}" for p, d in doc_of.items() if d != p}
        made: list[tuple[str, Callable[[], str]]] = [
            ("link-health.md", report.to_markdown),
            ("link-health.json", report.to_json_text),
            ("link-health.html", lambda: link_health_html(data, renamed)),
        ]
        for rel, make in made:
            b.write_file(stage / rel, make())
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
        b.write_tree(stage, files, copies, links_from)
        return [*files, *(rel for rel, _ in made)]

    def _cache(self, stage: Path, key: str, started: int, files: list[str]) -> ConvertCache:
        notes, root = {}, str(stage)
        for f in self.walk.notes:
            s = self.states[f.path]
            doc = s["doc"]
            rel = f"{b.CONCEPTS}/{doc.doc_path}"
            fields = {name: self._get(f.path, name) for name in _STATE_FIELDS}
            notes[f.path] = NoteState(**fields, doc=replace(doc, text=""), output=output_sig(os.path.join(root, rel)))
        docs = {f"{b.CONCEPTS}/{s.doc.doc_path}": s.output for s in notes.values()}
        others = {rel: output_sig(os.path.join(root, rel)) for rel in files if rel not in docs}
        others["okf.duckdb"] = output_sig(os.path.join(root, "okf.duckdb"))
        copied = [a for a in self.walk.attachments if a.path in self.used]
        attachments = {a.path: (a.sig, output_sig(os.path.join(root, b.CONCEPTS, a.path))) for a in copied}
        report = self.report
        data = report.to_json()
        broken = {entry["target"] for entry in data["broken"]}
        suggested = {t: found for t, found in report.suggested.items() if t in broken}
        read = self.old.loaded if self.old is not None else None
        blobs = {} if read is None else read.saved([p for p, s in notes.items() if read.notes.get(p) == s])
        body = Body(
            notes, report.problems, report.types, report.variants, self.near, suggested, self.suggest_key, blobs
        )
        contents = {p: s.content for p, s in notes.items()}
        summary = {"links": len(self.records), "totals": data["totals"]}
        walked = walk_digest(self.walk)
        return ConvertCache(
            key, started, walked, self.universe, contents, attachments, others, docs, summary, lambda: body
        )


_LINK_BATCH = 5000  # links rows per insert: few statements, never every row in memory at once
_STATE_FIELDS = (
    "sig", "content", "read_problems", "parse_problems", "links", "blocks", "words", "mtime", "base", "meta",
    "meta_problems", "resolved", "resolve_problems", "inputs", "rewrite_problems", "doc_problems", "prose",
)  # fmt: skip


@dataclass(frozen=True)
class _Path:
    path: str  # a note as spelling_variants needs it when its body_words are known


def _interned(words: BodyWords) -> BodyWords:
    """``words`` sent back by a worker, each word held once again (as ``body_words`` leaves them)."""
    runs = Counter({sys.intern(w): n for w, n in words.runs.items()})
    return BodyWords(runs, frozenset(map(sys.intern, words.lower)))


def _content(data: bytes | Note, problems: Problems) -> str | None:
    """The content key of what ``read_bytes`` gave: None for a note that could not be read (never reused)."""
    if problems:
        return None
    if isinstance(data, Note):
        return "big: " + "; ".join(p.message for p in data.problems)
    return hashlib.sha256(data).hexdigest()


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


def _by_path(item: tuple[str, Any]) -> str:
    return item[0]


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
            rel = relative(self.source_doc, self.doc_of[res.path])
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


@lru_cache(maxsize=1 << 16)
def concept_id(doc_path: str) -> str:
    return doc_path[:-3] if doc_path.lower().endswith(".md") else doc_path
