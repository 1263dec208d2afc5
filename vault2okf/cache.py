"""The convert cache: what the last convert of a bundle read and made, note by note, so that the next convert
redoes only what changed (docs/ARCHITECTURE.md, "Incremental convert").

It lives in the bundle's state folder (``.vault2okf/convert-cache.bin``: marshal, built-in types only), is
written into the staging tree with the rest of the bundle and swapped in with it, so it always describes the
bundle beside it. It is only a cache: a missing, stale or unreadable one means a full convert, never an error.
Its head and its body each carry their length and sha256 (a body is checked when it is read, so a convert that
finds nothing changed still reads only the head); a special file (a pipe) in its place is never opened.
Its key covers the config, the vault's place and the code of vault2okf itself, so a new version of the tool
never trusts an old cache. A convert that finds nothing changed reads only its head.

A file is taken as unchanged without being read when its size, mtime, ctime and inode are the ones recorded,
unless it was modified within ``RACY_NS`` of the run that recorded it (a write in the same clock tick as that
read would keep the mtime): such a file is read and its content hash compared, as git does with its index.
A generated file of the old bundle is reused (hard-linked into the new one) only while its size, mtime and
inode are the ones recorded when it was written: an edited or deleted bundle file is made again.
"""

from __future__ import annotations

import hashlib
import json
import marshal
import mmap
import operator
import os
import stat
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from dataclasses import fields as dataclass_fields
from functools import cache, cached_property
from importlib.resources import files
from pathlib import Path
from typing import Any

from vault2okf import bundle as b
from vault2okf.bundle import Doc
from vault2okf.config import Config
from vault2okf.mentions import Applied, Earlier, vault_mentions
from vault2okf.meta import Meta, TypeOrigin
from vault2okf.parse import Link, Problem, Syntax
from vault2okf.report import LinkRecord, LinkReport, ReportMemo
from vault2okf.resolve import Resolution, Resolver, Status, block_sets, check_blocks
from vault2okf.suggest import BodyWords, StoredWords, Suggestion, Tally, TallyBox
from vault2okf.walk import VaultFile, Walk

NAME = "convert-cache.bin"
BASE = "convert-cache.base"  # the notes' states as a base, linked unchanged from one generation to the next
# 2: each note's state marshalled on its own, so an unchanged one is saved as it was read; 3: a magic line, and
# the head and the body each carry their length and sha256, so no damaged byte is ever trusted; 4: the sha256 of
# each generated file that is not a doc (``digests``), so an unchanged one is linked rather than written again;
# 5: the states in a base file (``BASE``, hard-linked into the next generation while few states changed) and the
# changed ones in the body (a delta), so an edit writes what it changed, not 100 MB of states; 6: each note's words
# marshalled on their own (``suggest.StoredWords``: decoded only for the notes that changed), the tally's count of
# notes writing each word in lower case; 7: spelling_variants' words of each title and alias (``Body.named``)
FORMAT = 7
MAGIC = b"vault2okf convert cache 7\n"
BASE_MAGIC = b"vault2okf convert cache base 7\n"
COMPACT = 8  # the base is written anew once the states not in it (or dead in it) pass 1/COMPACT of it
_LENGTH, _DIGEST = 8, 32


class CacheDamaged(Exception):
    """The cache's body is not the bytes that were written (truncated, edited, replaced): convert in full."""


RACY_NS = 2_000_000_000


@dataclass
class NoteState:
    """One note as the last convert saw it: each step's result and the problems it reported."""

    sig: tuple[int, ...]  # VaultFile.sig of the file that was read
    content: str | None  # sha256 of its bytes ("big: ..." for a note over the size limit; None: never reused)
    read_problems: tuple[Problem, ...]
    parse_problems: tuple[Problem, ...]  # Note.problems
    links: tuple[Link, ...]
    blocks: tuple[str, ...]  # the block ids the note defines (``Note.blocks``), as written
    words: BodyWords
    mtime: float
    base: str
    meta: Meta
    meta_problems: tuple[Problem, ...]
    resolved: tuple[Resolution, ...]  # one per link, before ``check_blocks``
    resolve_problems: tuple[Problem, ...]
    inputs: tuple[Any, ...]  # what the rewrite read besides the note: its doc path, each link's target doc path
    rewrite_problems: tuple[Problem, ...]
    doc_problems: tuple[Problem, ...]
    doc: Doc  # without its text, which is in the bundle
    output: tuple[int, ...]  # output_sig of concepts/<doc_path> as written
    prose: str = ""  # mentions.prose: the running text unlinked mentions are found in
    hits: tuple[Any, ...] = ()  # the names found in ``prose`` (mentions.Hit), valid for ``Body.names``


@dataclass
class ConvertCache:
    key: str
    started_ns: int  # when the run that wrote it began
    walk: str  # walk_digest of the vault it converted
    universe: str  # universe_digest: everything a link resolves against
    contents: dict[str, str | None]  # note path -> NoteState.content
    attachments: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]  # path -> (source sig, output_sig of the copy)
    files: dict[str, tuple[int, ...]]  # every other file of the bundle (okf.duckdb included) -> output_sig
    docs: dict[str, tuple[int, ...]]  # concepts/<doc path> -> output_sig
    summary: dict[str, Any]  # "links": how many, "totals": LinkReport.totals()
    body: Callable[[], Body]  # the rest, read from the file only when something changed
    intact: Callable[[], bool] = lambda: True  # the body's bytes are the ones written (hashed, not decoded)
    digests: dict[str, str] = field(default_factory=dict)  # generated file (index.md, report...) -> sha256 as written

    @cached_property
    def loaded(self) -> Body:
        return self.body()

    @cached_property
    def notes(self) -> dict[str, NoteState]:
        return self.loaded.notes

    def unchanged(self, walk: Walk, out: Path) -> bool:
        """Is the vault as this cache saw it (no file read, only stat), and the bundle at ``out`` as written?"""
        if walk_digest(walk) != self.walk:
            return False
        if not all(self._same_content(f) for f in walk.notes if self.racy(f)):
            return False
        root = str(out)
        for outputs in (self.files, self.docs):
            if not all(output_sig(f"{root}/{rel}") == sig for rel, sig in outputs.items()):
                return False
        return all(output_sig(os.path.join(root, b.CONCEPTS, p)) == copy for p, (_, copy) in self.attachments.items())

    def _same_content(self, file: VaultFile) -> bool:
        """A file whose signature cannot be trusted (``racy``): is its content the one recorded?"""
        content = self.contents.get(file.path)
        if content is None:
            return False
        if content.startswith("big: "):  # over the size limit: only its size was read, and it is the same
            return True
        try:
            with open(file.abs, "rb") as fh:
                return hashlib.sha256(fh.read()).hexdigest() == content
        except OSError:
            return False

    def racy(self, file: VaultFile) -> bool:
        return len(file.sig) < 2 or file.sig[1] >= self.started_ns - RACY_NS

    def report(self, vault_name: str, walk: Walk) -> LinkReport:
        """The last convert's link-health report (for a convert that found nothing changed)."""
        body = self.loaded
        notes = body.notes
        paths = [f.path for f in walk.notes]
        blocks = block_sets((p, notes[p].blocks) for p in paths)
        records = [
            LinkRecord(p, link, res)
            for p in paths
            for link, res in zip(notes[p].links, check_blocks(notes[p].links, notes[p].resolved, blocks), strict=True)
        ]
        aliases = {p: notes[p].meta.aliases for p in paths if notes[p].meta.aliases}
        return LinkReport(
            vault=vault_name,
            notes=tuple(paths),
            records=tuple(records),
            problems=body.problems,
            skipped=walk.skipped,
            aliases=aliases,
            types=body.types,
            variants=body.variants,
            mentions=tuple(
                vault_mentions(
                    paths, {p: notes[p].meta for p in paths}, {p: notes[p].prose for p in paths}, records,
                    body.earlier(),
                ).mentions
            ),
        )  # fmt: skip


@dataclass
class Body:
    notes: dict[str, NoteState]
    problems: tuple[tuple[str, Problem], ...]  # the report's, in its order
    types: tuple[dict[str, Any], ...]
    variants: tuple[dict[str, Any], ...]
    near: dict[tuple[str, int], list[tuple[int, str]]]  # spelling_variants' memo, valid for the same universe
    suggested: dict[str, list[Suggestion]]  # LinkReport.suggested, valid for the same suggest_key
    suggest_key: str  # suggest_key(universe, variants)
    names: frozenset[tuple[str, ...]] = frozenset()  # the names the notes' ``hits`` were found with
    graph: tuple[str, dict[str, tuple[Any, ...]]] = ("", {})  # analytics.graph_key -> each note's analytics
    # names.assign_doc_paths' collision problems for these notes, in its order: (path, message); None: not kept
    collisions: tuple[tuple[str, str], ...] | None = None
    # mentions.name_index for these notes (name -> its one note or None, the capitalised one-word names)
    name_index: tuple[dict[tuple[str, ...], str | None], frozenset[tuple[str, ...]]] | None = None
    # spelling_variants' words of each title and alias (a function of the name alone): name -> (every, long)
    named: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = field(default_factory=dict)
    base: BaseFile | None = field(default=None, compare=False, repr=False)  # the base file the states came from
    # note path -> its state as the base holds it (the very objects of ``notes`` where a state is the base's)
    base_notes: dict[str, NoteState] = field(default_factory=dict, compare=False, repr=False)
    tally: TallyBox = field(default_factory=TallyBox, compare=False, repr=False)  # the sums of the notes' words
    report_memo: ReportMemo = field(default_factory=ReportMemo, compare=False, repr=False)  # the same
    # in memory only, for a watcher's next convert: each note's (links, checked resolutions, LinkRecords), reused
    # where the links and resolutions are the very same tuples; the resolver, for the same universe
    records: dict[str, tuple[Any, ...]] = field(default_factory=dict, compare=False, repr=False)
    resolver: tuple[str, Resolver] | None = field(default=None, compare=False, repr=False)
    applied: Applied | None = field(default=None, compare=False, repr=False)  # mentions' rules 4 and 5, per note
    # in memory only: what a watcher's last run left for the next one's loops (``run.Loops``), taken by that run
    loops: Any = field(default=None, compare=False, repr=False)

    def earlier(self) -> Earlier:
        """What unlinked mentions may reuse (``mentions.Earlier``)."""
        return Earlier(self.names, {p: (s.prose, s.hits) for p, s in self.notes.items()}, self.applied)

    def delta(self) -> dict[str, NoteState]:
        """The states that are not the base's (changed or new since the base was written), in the notes' order."""
        base = self.base_notes
        return {p: s for p, s in self.notes.items() if not _same(base.get(p), s)}


def _same(base: NoteState | None, state: NoteState) -> bool:
    return base is state or (base is not None and base == state)


@dataclass(frozen=True)
class BaseFile:
    """The file of the notes' states a cache's delta applies to (``BASE`` in the state folder)."""

    path: str  # where it is: the bundle's state folder
    sig: tuple[int, ...]  # its output_sig when it was read or written: linked only while it is still that file
    size: int  # bytes after its magic line
    digest: bytes  # their sha256
    count: int  # states it holds


def suggest_key(universe: str, variants: Any) -> str:
    """What suggestions for broken links are made from: the notes and aliases (universe), the variants."""
    return hashlib.sha256(f"{universe}\0{variants!r}".encode("utf-8", "surrogatepass")).hexdigest()


def output_sig(path: str | Path) -> tuple[int, ...]:
    """(size, mtime_ns, inode) of a file the bundle holds; () when it is missing or not a regular file."""
    try:
        info = os.lstat(path)
    except OSError:
        return ()
    return (info.st_size, info.st_mtime_ns, info.st_ino) if stat.S_ISREG(info.st_mode) else ()


def walk_digest(walk: Walk) -> str:
    """Every file the walk found with its signature, and what it skipped, excluded and reported (the last walk's
    remembered: a convert asks twice, when it checks the cache and when it saves the next). Each file's line is
    the last walk's where the file is its very ``VaultFile`` at the same place (a watcher's walk, patched: 13k
    lines made again for one edit cost more than the hash)."""
    last = _LAST_WALK[0]
    if last is not None and last[0] is walk:
        return last[1]
    files = (*walk.notes, *walk.attachments)
    if last is not None and len(last[2]) == len(files):
        lines = [was if f is g else _walk_line(f) for f, g, was in zip(files, last[2], last[3], strict=True)]
    else:
        lines = list(map(_walk_line, files))
    h = hashlib.sha256(b"".join(lines))
    h.update(repr((walk.skipped, walk.excluded, walk.problems)).encode("utf-8", "surrogatepass"))
    digest = h.hexdigest()
    _LAST_WALK[0] = (walk, digest, files, lines)
    return digest


def _walk_line(f: VaultFile) -> bytes:
    return f"{f.path}\0{f.sig}\0{f.mtime!r}\n".encode("utf-8", "surrogatepass")


_LAST_WALK: list[tuple[Walk, str, tuple[VaultFile, ...], list[bytes]] | None] = [None]


def universe_digest(walk: Walk, aliases: dict[str, tuple[str, ...]]) -> str:
    """What a link resolves against besides the config: the notes, attachments and excluded files, then the
    aliases, as two digests joined by a ``.`` (``same_files``: the first part alone says the files are the same,
    only aliases changed)."""
    files = ([f.path for f in walk.notes], [f.path for f in walk.attachments], list(walk.excluded))
    named = sorted(aliases.items())
    return ".".join(hashlib.sha256(repr(part).encode("utf-8", "surrogatepass")).hexdigest() for part in (files, named))


def same_files(universe: str, other: str) -> bool:
    """Do two ``universe_digest``s have the same notes, attachments and excluded files (aliases aside)?"""
    return universe.split(".")[0] == other.split(".")[0]


def cache_key(vault: Path, vault_name: str, config: Config) -> str:
    """The config (less ``base``, which each note's state records), the vault's place and name, the code."""
    fields = asdict(config)
    fields.pop("base", None)
    fields.pop("source", None)  # where the settings came from, not what they are
    text = json.dumps([FORMAT, str(vault), vault_name, fields, code_digest()], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@cache
def code_digest() -> str:
    """A digest of vault2okf's own source and defaults: a cache written by other code is never trusted."""
    h = hashlib.sha256()
    root = files("vault2okf")
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith((".py", ".toml")):
            h.update(entry.name.encode())
            h.update(entry.read_bytes())
    return h.hexdigest()


def cache_path(bundle: Path) -> Path:
    return bundle / b.STATE / NAME


def base_path(bundle: Path) -> Path:
    return bundle / b.STATE / BASE


def load(bundle: Path, key: str) -> ConvertCache | None:
    """The bundle's cache when it was written for ``key``; None when there is none or it was written for another
    key (config, code, vault); ``CacheDamaged`` when it is not what a convert wrote (a special file, truncated,
    edited). Only its head is read here (marshal, no code runs on load), checked against its digest; the notes'
    states (the base file, then the body's delta) when first asked for, checked the same way."""
    path = cache_path(bundle)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CacheDamaged(f"{path}: {error}") from error
    if not stat.S_ISREG(info.st_mode):  # a pipe or a device would block the read, or never end it
        raise CacheDamaged(f"{path} is not a regular file")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(len(MAGIC))
            size = int.from_bytes(fh.read(_LENGTH), "little")
            digest = fh.read(_DIGEST)
            head_bytes = fh.read(min(size, info.st_size))
        if magic != MAGIC:
            raise CacheDamaged(f"{path} is not a vault2okf convert cache of format {FORMAT}")
        if len(head_bytes) != size or hashlib.sha256(head_bytes).digest() != digest:
            raise CacheDamaged(f"{path}: its head is not the one written")
        head = marshal.loads(head_bytes)
        if head[0] != FORMAT or head[1] != key:
            return None
        _, _, started, walk, universe, contents, attachments, files, docs, summary, digests = head[:11]
        base_size, base_digest, base_count, body_size, body_digest = head[11:]
    except CacheDamaged:
        raise
    except Exception as error:  # noqa: BLE001 - an unreadable or wrongly shaped head: damaged, never a crash
        raise CacheDamaged(f"{path}: {type(error).__name__}: {error}") from error
    offset = len(MAGIC) + _LENGTH + _DIGEST + size
    if offset + body_size != info.st_size:
        raise CacheDamaged(f"{path} is {info.st_size} bytes, not the {offset + body_size} written")
    base = BaseFile(str(base_path(bundle)), (), base_size, base_digest, base_count)

    def body() -> Body:
        return _body(path, offset, body_size, body_digest, base, contents)

    def intact() -> bool:
        return _intact(path, offset, body_digest) and _intact(Path(base.path), len(BASE_MAGIC), base_digest)

    return ConvertCache(
        key, started, walk, universe, contents, attachments, files, docs, summary, body, intact, digests
    )  # fmt: skip


def _intact(path: Path, offset: int, digest: bytes) -> bool:
    """Are the bytes of ``path`` after ``offset`` the ones written? Hashed in blocks, not decoded (a special file
    is not opened)."""
    sha = hashlib.sha256()
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fh:
            fh.seek(offset)
            while block := fh.read(1 << 20):
                sha.update(block)
    except OSError:
        return False
    return sha.digest() == digest


def _decoded(path: Path, offset: int, size: int, digest: bytes, magic: bytes = b"") -> Any:
    """The bytes of ``path`` after ``offset``, mapped rather than read (no copy of the file on the heap), hashed,
    then unmarshalled in one call. Streamed through a Python reader instead, marshal asked it for every string
    (264k calls at 4.3k notes, 0.3 s of a one-edit convert's 5 s). The files are only ever replaced whole (written
    in the staging tree, swapped in), never truncated in place, so the mapping cannot lose its pages under it."""
    if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe in its place would block the read
        raise CacheDamaged(f"{path} is not a regular file")
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        if len(mapped) != offset + size or mapped[: len(magic)] != magic:
            raise CacheDamaged(f"{path}: not the one written")
        with memoryview(mapped) as whole, whole[offset:] as view:
            if hashlib.sha256(view).digest() != digest:
                raise CacheDamaged(f"{path}: not the one written")
            return marshal.loads(view)


def _body(path: Path, offset: int, size: int, digest: bytes, base: BaseFile, contents: dict[str, Any]) -> Body:
    sig, base_sig = output_sig(path), output_sig(base.path)
    try:
        data = _decoded(path, offset, size, digest)
        states = _decoded(Path(base.path), len(BASE_MAGIC), base.size, base.digest, BASE_MAGIC)
        if sig != output_sig(path) or base_sig != output_sig(base.path) or len(states) != base.count:
            raise CacheDamaged(f"{path}: the body is not the one written")
        *data, done = data  # done: mentions.Applied.saved()
        delta, problems, types, variants, near, suggested, key, names, graph, tally, collisions, index, named = data
        keys, name_index = frozenset(names), None if index is None else (dict(index[0]), frozenset(index[1]))
        applied = None if done is None or name_index is None else Applied.restored(done, keys, name_index)
        notes, base_notes = {}, {}
        decoder = _Decoder()
        for p in contents:
            if p in delta:
                notes[p] = decoder.state(delta[p])
            else:
                notes[p] = base_notes[p] = decoder.state(states[p])
        paths = list(notes)
        restored = None if tally is None else Tally.restored(paths, [notes[p].words for p in paths], tally)
        return Body(
            notes,
            tuple((p, Problem(*t)) for p, *t in problems),
            tuple(types),
            tuple(variants),
            near,
            {target: [Suggestion(*s) for s in found] for target, found in suggested.items()},
            key,
            keys,
            (graph[0], graph[1]),
            None if collisions is None else tuple((path, message) for path, message in collisions),
            name_index,
            {name: (tuple(every), tuple(long)) for name, (every, long) in named.items()},
            base=replace(base, sig=base_sig),
            base_notes=base_notes,
            tally=TallyBox(restored),
            applied=applied,
        )
    except CacheDamaged:
        raise
    except Exception as error:  # noqa: BLE001 - EOFError, ValueError, a wrong type: all the same to a convert
        raise CacheDamaged(f"{path}: {type(error).__name__}: {error}") from error


def save(stage: Path, found: ConvertCache, out: Path) -> None:
    """Write the cache into the staging tree (swapped in with the bundle it describes, which will be at ``out``):
    the base of the notes' states, then a head (what a convert that finds nothing changed reads) and the body.
    The base the last cache was read from (or saved with) is hard-linked from ``out`` while it is still that file
    and the states not in it stay under 1/``COMPACT`` of it: the body holds those (the delta). Else a new base
    holds every state and the delta is empty."""
    body = found.body()
    base, delta = _base(stage, body, out)
    data = (
        {p: _unstate(s) for p, s in delta.items()},
        [(p, pr.kind, pr.message, pr.line) for p, pr in body.problems],
        list(body.types),
        list(body.variants),
        body.near,
        {t: [(s.path, s.name, s.why, s.score, s.confident) for s in found] for t, found in body.suggested.items()},
        body.suggest_key,
        body.names,
        body.graph,
        None if body.tally.tally is None else body.tally.tally.saved(),
        body.collisions,
        body.name_index,
        body.named,
        None if body.applied is None else body.applied.saved(),
    )
    body_bytes = marshal.dumps(data)
    head = (
        FORMAT, found.key, found.started_ns, found.walk, found.universe, found.contents, found.attachments,
        found.files, found.docs, found.summary, found.digests, base.size, base.digest, base.count, len(body_bytes),
        hashlib.sha256(body_bytes).digest(),
    )  # fmt: skip
    head_bytes = marshal.dumps(head)
    with open(cache_path(stage), "wb") as fh:
        fh.write(MAGIC)
        fh.write(len(head_bytes).to_bytes(_LENGTH, "little"))
        fh.write(hashlib.sha256(head_bytes).digest())
        fh.write(head_bytes)
        fh.write(body_bytes)


def _base(stage: Path, body: Body, out: Path) -> tuple[BaseFile, dict[str, NoteState]]:
    """The staging tree's base (the last one linked, or one written with every state) and the delta to it; the
    body is told which base it now has (``Body.base``, ``Body.base_notes``), for a watcher's next save."""
    target = base_path(stage)
    target.parent.mkdir(parents=True, exist_ok=True)
    old = body.base
    if old is not None and output_sig(old.path) == old.sig:
        delta = body.delta()
        gone = max(0, old.count - len(body.notes))  # at least as many states of notes gone, still in the base
        if len(delta) + gone <= old.count // COMPACT and _linked(Path(old.path), target):
            body.base_notes = {p: s for p, s in body.notes.items() if p not in delta}
            body.base = replace(old, path=str(base_path(out)), sig=output_sig(target))
            return body.base, delta
    data = marshal.dumps({p: _unstate(s) for p, s in body.notes.items()})
    with open(target, "wb") as fh:
        fh.write(BASE_MAGIC)
        fh.write(data)
    body.base_notes = dict(body.notes)
    body.base = BaseFile(str(base_path(out)), output_sig(target), len(data), hashlib.sha256(data).digest(),
                         len(body.notes))  # fmt: skip
    return body.base, {}


def _linked(old: Path, new: Path) -> bool:
    """``old`` hard-linked at ``new`` (never copied: a copy costs what writing it anew costs, and is not checked)."""
    try:
        os.link(old, new)
    except OSError:
        return False
    return True


# -- the states as plain values (marshal writes only built-in types) --------------------------------------
def _problems(found: tuple[Problem, ...]) -> tuple[tuple[Any, ...], ...]:
    return tuple((p.kind, p.message, p.line) for p in found)


def _unproblems(found: tuple[tuple[Any, ...], ...]) -> tuple[Problem, ...]:
    return tuple(Problem(*t) for t in found)


def _unstate(s: NoteState) -> tuple[Any, ...]:
    m = s.meta
    origin = None if m.origin is None else (m.origin.type, m.origin.rule, m.origin.folder, m.origin.tags)
    meta = (m.type, m.title, m.description, m.timestamp, m.tags, m.aliases, m.session_date, m.session_number,
            _problems(m.problems), origin)  # fmt: skip
    links = tuple(
        (k.line, k.col, k.raw, k.target, k.anchor, k.label, k.embed, k.syntax.value, k.context) for k in s.links
    )
    resolved = tuple((r.status.value, r.path, r.candidates, r.rule) for r in s.resolved)
    doc = (s.doc.doc_path, s.doc.title, s.doc.description, s.doc.type)
    return (
        s.sig, s.content, _problems(s.read_problems), _problems(s.parse_problems), links, s.blocks,
        s.words.saved(), s.mtime, s.base, meta, _problems(s.meta_problems), resolved,
        _problems(s.resolve_problems), s.inputs, _problems(s.rewrite_problems), _problems(s.doc_problems), doc,
        s.output, s.prose, s.hits,
    )  # fmt: skip


_SYNTAX = {s.value: s for s in Syntax}
_STATUS = {s.value: s for s in Status}
_new = object.__new__


def _fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclass_fields(cls))


_META, _DOC = _fields(Meta), _fields(Doc)


def _made(cls: type, names: tuple[str, ...], values: Any) -> Any:
    """``cls(*values)`` for a dataclass of plain fields, its fields set as one dict rather than by its
    ``__init__`` (a frozen one sets each through ``object.__setattr__``): a load makes hundreds of thousands."""
    obj: Any = _new(cls)
    obj.__dict__.update(zip(names, values, strict=True))
    return obj


_LINK = _fields(Link)
if _LINK != ("line", "col", "raw", "target", "anchor", "label", "embed", "syntax", "context"):
    raise ImportError("parse.Link's fields are not the ones cache._StoredLink reads")  # a Link field added: name it
_SYNTAX_AT = _LINK.index("syntax")
_link_fields = operator.attrgetter(*_LINK)


class _Saved:
    """A field of ``_StoredLink``, read from the saved values when first asked for (then the instance's own, which
    comes first: a non-data descriptor). On the subclass, so ``Link``'s defaults (``context``) never answer."""

    def __init__(self, name: str, at: int) -> None:
        self.name, self.at = name, at

    def __get__(self, link: Any, owner: Any = None) -> Any:
        if link is None:
            return self
        value = link.__dict__["_saved"][self.at]
        if self.at == _SYNTAX_AT:
            value = _SYNTAX[value]
        link.__dict__[self.name] = value
        return value


class _StoredLink(Link):
    """A ``Link`` as the convert cache saved it (its fields' values, their count and syntax checked on load), each
    field set when first read: a fresh one-edit convert reads one field (``anchor``, for block refs) of most of the
    unchanged notes' links (111k at 13k notes), and made each a whole ``Link`` before. Equal to the ``Link`` it was
    saved from, with the same hash (``Link`` compared with one goes to this ``__eq__``: a subclass's comes first)."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Link):
            return NotImplemented
        return self is other or _link_fields(self) == _link_fields(other)

    __hash__ = Link.__hash__


for _at, _name in enumerate(_LINK):
    setattr(_StoredLink, _name, _Saved(_name, _at))


def _link(k: tuple[Any, ...], new: Any = _new, syntax: dict[str, Syntax] = _SYNTAX) -> Link:
    """A saved link as a ``_StoredLink``: nine values, a known syntax (checked now: a wrong one is a damaged cache,
    found on load)."""
    if len(k) != 9 or k[7] not in syntax:
        raise ValueError(f"a link of {len(k)} fields" if len(k) != 9 else f"a link of syntax {k[7]!r}")
    link: Link = new(_StoredLink)
    link.__dict__["_saved"] = k
    return link


def _not_bytes(value: Any) -> bytes:
    raise ValueError(f"a note's words are a {type(value).__name__}, not bytes")


class _Once(dict[Any, Any]):
    """Values made once per key (``make(key)``) when first looked up: ``map(once.__getitem__, keys)`` stays in C for
    every key already seen."""

    def __init__(self, make: Callable[[Any], Any], known: dict[Any, Any] | None = None) -> None:
        super().__init__(known or {})
        self.make = make

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.make(key)
        return value


def _resolution(r: tuple[Any, ...]) -> Resolution:
    return Resolution(_STATUS[r[0]], r[1], r[2], r[3])


def _stored(blob: Any, new: Any = _new) -> StoredWords:
    """``StoredWords(blob)``, its one field set in its dict (a load makes one per note)."""
    words: StoredWords = new(StoredWords)
    words.__dict__["blob"] = blob if type(blob) is bytes else _not_bytes(blob)
    return words


class _Decoder:
    """Turns the states' plain values back into ``NoteState``s; equal resolutions and problems are made once
    (they are immutable, and a vault links the same notes again and again)."""

    def __init__(self) -> None:
        self.resolutions: dict[tuple[Any, ...], Resolution] = _Once(_resolution)
        self.problems: dict[tuple[Any, ...], tuple[Problem, ...]] = _Once(_unproblems, {(): ()})

    def state(self, t: tuple[Any, ...]) -> NoteState:
        sig, content, read, parse, links, blocks, words, mtime, base, meta, meta_p, resolved, resolve_p = t[:13]
        inputs, rewrite_p, doc_p, doc, output, prose, hits = t[13:]
        problems = self.problems.__getitem__
        origin = meta[9]
        meta_values = (*meta[:8], problems(meta[8]), None if origin is None else TypeOrigin(*origin))
        state: NoteState = _new(NoteState)
        state.__dict__.update(
            sig=sig,
            content=content,
            read_problems=problems(read),
            parse_problems=problems(parse),
            links=tuple(map(_link, links)),
            blocks=blocks,
            words=_stored(words),
            mtime=mtime,
            base=base,
            meta=_made(Meta, _META, meta_values),
            meta_problems=problems(meta_p),
            resolved=tuple(map(self.resolutions.__getitem__, resolved)),
            resolve_problems=problems(resolve_p),
            inputs=inputs,
            rewrite_problems=problems(rewrite_p),
            doc_problems=problems(doc_p),
            doc=_made(Doc, _DOC, (*doc, "")),
            output=output,
            prose=prose,
            hits=hits,
        )
        return state
