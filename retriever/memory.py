"""What retrieval keeps in memory per process: every chunk's text and vector, BM25 indexes, link-context vectors.

The chunk table is copied from the Chroma collection when a bundle is opened (docs/adr-003-in-memory-vectors.md),
so the hop scores hundreds of neighbours in a few milliseconds with numpy instead of round trips to Chroma; the
vector stage is an exact top-k over the same table. `index` saves the table beside the index (``save``/``load``),
so a new process opens it without chromadb. The BM25 indexes and the link-context vectors are built on first use
(``Retriever.prepare`` builds them before timing).
"""

from __future__ import annotations

import bisect
import hashlib
import io
import json
import os
import re
import zipfile
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from retriever.bm25 import Bm25, Part, Parted
from retriever.cachefile import (
    MIN_LIMIT,
    CacheDamaged,
    blob,
    read_cache,
    read_file,
    read_head,
    size_limit,
    unblob,
    write_cache,
)
from retriever.embed import Embedder
from retriever.graph import NoteGraph
from retriever.store import ChunkHit, ChunkStore, StoredRow

# the layouts of a saved table and a saved set of BM25 indexes (`Lexical.save`); another number is not read.
# 2: a magic line and a head with the body's length and sha256 before the .npz (`retriever.cachefile`)
TABLE_FORMAT = 2
LEXICAL_FORMAT = 4  # 3: raw term counts (`retriever.bm25`), scored at query time; 4: of a table's base (`Base`)
TABLE_MAGIC = b"vault2okf chunk table 2\n"
LOG_MAGIC = b"vault2okf chunk table edit 1\n"  # each record of a table's log (`TableLog`)
LEXICAL_MAGIC = b"vault2okf bm25 indexes 2\n"  # the framing's format; the body's is LEXICAL_FORMAT
CONTEXTS_MAGIC = b"vault2okf link-context vectors 2\n"
_READ_ERRORS = (OSError, ValueError, KeyError, TypeError, EOFError, RecursionError, zipfile.BadZipFile)
_KINDS = ("chunks", "notes", "chunk_pairs", "note_pairs")  # the indexes a saved file holds (its arrays' prefixes)

_WORD = re.compile(r"\w\w+")
_STOP = frozenset(
    """the a an and or of to in on at for with by from is are was were be been who what when where which why how
    did does do that this it its as into about after before their they them he she his her we our you your
    there then than not no""".split()  # noqa: SIM905
)


@dataclass(frozen=True)
class Base:
    """The saved table a table was read or patched from (its file's ``generation``: the saved BM25 indexes are
    those of the base), its notes row by row, and the notes whose chunks changed since (new, edited or gone)."""

    generation: str
    note_ids: list[str]
    changed: frozenset[str] = frozenset()

    @cached_property
    def groups(self) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The base's notes in row order (note order), and for each row the place of its note among them and its
        place within its note."""
        notes: list[str] = []
        group = np.zeros(len(self.note_ids), dtype=np.int64)
        offset = np.zeros(len(self.note_ids), dtype=np.int64)
        at = 0
        for row, note in enumerate(self.note_ids):
            if not notes or notes[-1] != note:
                notes.append(note)
                at = row
            group[row], offset[row] = len(notes) - 1, row - at
        return notes, group, offset

    def chunk_rows(self, table: ChunkTable) -> np.ndarray:
        """Each base row's row in ``table`` (a table patched from this base), -1 where its note changed since."""
        notes, group, offset = self.groups
        starts = [-1 if note in self.changed or note not in table.rows_of else table.rows_of[note][0] for note in notes]
        rows = np.asarray(starts, dtype=np.int64)[group] if len(group) else np.zeros(0, dtype=np.int64)
        live = rows >= 0
        rows[live] += offset[live]
        return rows

    def fresh_rows(self, table: ChunkTable) -> list[int]:
        """The rows of ``table`` whose notes changed since this base, in order."""
        return sorted(row for note in self.changed for row in table.rows_of.get(note, ()))

    def since(self, notes: Collection[str]) -> Base:
        """This base with ``notes`` changed too (its ``groups`` kept: they are the base's)."""
        base = Base(self.generation, self.note_ids, self.changed | frozenset(notes))
        if "groups" in self.__dict__:
            base.__dict__["groups"] = self.groups
        return base


@dataclass
class ChunkTable:
    ids: list[str]
    note_ids: list[str]
    texts: list[str]
    tokens: np.ndarray  # int, per chunk
    vectors: np.ndarray  # (n, dim) float32, L2-normalised
    rows_of: dict[str, list[int]]  # note id -> chunk rows in document order
    stamp: str | None = None  # the Chroma fingerprint a saved table was copied at; None: read from Chroma
    base: Base | None = None  # the saved table this one is (patched from): None, read from Chroma

    @classmethod
    def from_store(cls, store: ChunkStore) -> ChunkTable:
        ids: list[str] = []
        notes: list[str] = []
        texts: list[str] = []
        tokens: list[int] = []
        vectors: list[np.ndarray] = []
        for stored in store.rows(["documents", "metadatas", "embeddings"]):
            meta = stored.metadata or {}
            ids.append(stored.chunk_id)
            notes.append(meta["note_id"])
            texts.append(stored.document or "")
            tokens.append(int(meta["tokens"]))
            vectors.append(stored.embedding if stored.embedding is not None else np.zeros(0, dtype=np.float32))
        order = sorted(range(len(ids)), key=lambda i: (notes[i], _chunk_no(ids[i])))
        rows_of: dict[str, list[int]] = defaultdict(list)
        for row, i in enumerate(order):
            rows_of[notes[i]].append(row)
        matrix = np.vstack([vectors[i] for i in order]) if order else np.zeros((0, 1), dtype=np.float32)
        return cls(
            ids=[ids[i] for i in order],
            note_ids=[notes[i] for i in order],
            texts=[texts[i] for i in order],
            tokens=np.array([tokens[i] for i in order], dtype=np.int64),
            vectors=matrix,
            rows_of=dict(rows_of),
        )

    def patched(self, notes: Collection[str], rows: Iterable[StoredRow]) -> ChunkTable:
        """This table with the chunks of ``notes`` exchanged for ``rows``, those notes' chunks as the store holds
        them now (none for a note that is gone): what `from_store` reads after an edit of those notes, row for row,
        without reading the other notes' chunks again. The untouched notes between two touched ones are copied as
        one slice (a note's rows are consecutive, in note order, in every table `from_store`, `load` and this
        make)."""
        fresh: dict[str, list[tuple[int, str, str, int, np.ndarray]]] = defaultdict(list)
        for stored in rows:
            meta = stored.metadata or {}
            vector = stored.embedding if stored.embedding is not None else np.zeros(0, dtype=np.float32)
            no = _chunk_no(stored.chunk_id)
            fresh[meta["note_id"]].append((no, stored.chunk_id, stored.document or "", int(meta["tokens"]), vector))
        order = sorted(self.rows_of)
        parts: list[tuple[int, int] | str] = []  # slices of this table's rows, and the notes read anew between them
        cursor = 0
        for note in sorted({*notes, *fresh}):
            at = bisect.bisect_left(order, note)
            end = self.rows_of[order[at]][0] if at < len(order) else len(self.ids)
            if end > cursor:
                parts.append((cursor, end))
            cursor = self.rows_of[note][-1] + 1 if note in self.rows_of else max(cursor, end)
            if note in fresh:
                parts.append(note)
        if cursor < len(self.ids):
            parts.append((cursor, len(self.ids)))
        ids: list[str] = []
        note_ids: list[str] = []
        texts: list[str] = []
        tokens: list[np.ndarray] = []
        vectors: list[np.ndarray] = []
        for part in parts:
            if isinstance(part, tuple):
                ids += self.ids[part[0] : part[1]]
                note_ids += self.note_ids[part[0] : part[1]]
                texts += self.texts[part[0] : part[1]]
                tokens.append(self.tokens[part[0] : part[1]])
                vectors.append(self.vectors[part[0] : part[1]])
                continue
            chunks = sorted(fresh[part], key=lambda chunk: chunk[0])
            ids += [chunk[1] for chunk in chunks]
            note_ids += [part] * len(chunks)
            texts += [chunk[2] for chunk in chunks]
            tokens.append(np.array([chunk[3] for chunk in chunks], dtype=np.int64))
            vectors.append(np.vstack([chunk[4] for chunk in chunks]).astype(np.float32))
        rows_of: dict[str, list[int]] = defaultdict(list)
        for row, note in enumerate(note_ids):
            rows_of[note].append(row)
        return ChunkTable(
            ids,
            note_ids,
            texts,
            np.concatenate(tokens).astype(np.int64) if tokens else np.zeros(0, dtype=np.int64),
            np.concatenate(vectors) if vectors else np.zeros((0, 1), dtype=np.float32),
            dict(rows_of),
        )

    def nearest(self, qvec: np.ndarray, k: int, among: np.ndarray | None = None) -> list[ChunkHit]:
        """The ``k`` chunks most similar to ``qvec`` (cosine: rows and question are unit vectors), best first;
        with ``among`` (row numbers), the ``k`` most similar of those rows (a search filter's chunks).

        Exact, over every chunk: what an approximate (HNSW) index returns when it finds the true neighbours.
        Equal similarities keep table order, so the result does not change from run to run.
        """
        n = len(self.ids) if among is None else len(among)
        if k <= 0 or n == 0:
            return []
        sims = self.vectors @ np.asarray(qvec, dtype=np.float32)
        if among is None:
            top = np.argpartition(-sims, k - 1)[:k] if k < n else np.arange(n)
        else:
            top = among[np.argpartition(-sims[among], k - 1)[:k]] if k < n else among
        rows = sorted(top.tolist(), key=lambda r: (-float(sims[r]), r))
        return [
            ChunkHit(self.ids[r], self.note_ids[r], float(sims[r]), self.texts[r], int(self.tokens[r])) for r in rows
        ]

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        """Write the table and ``meta`` (what it was made from) to one file, its head carrying the body's sha256,
        atomically: a reader, or a run killed here, sees the old file or the new one."""
        arrays = {"vectors": np.ascontiguousarray(self.vectors, dtype=np.float32), "tokens": self.tokens}
        for key, values in (("ids", self.ids), ("note_ids", self.note_ids), ("texts", self.texts)):
            arrays[key], arrays[f"{key}_ends"] = blob(values)
        save_npz(path, TABLE_MAGIC, {**meta, "format": TABLE_FORMAT}, arrays)

    @classmethod
    def load(cls, path: Path, limit: int = MIN_LIMIT) -> tuple[ChunkTable, dict[str, Any]] | None:
        """A table saved by ``save``, with the edits its log holds since (`TableLog`), and its meta as of the last
        of them; None when the file is missing or of another format; ``CacheDamaged`` when it or its log is not what
        was written (edited, a special file, over ``limit`` bytes; a record cut short by a kill is no damage: it and
        what follows are left out, and the table is then older than Chroma, which its stamp says)."""
        try:
            found = read_cache(path, TABLE_MAGIC, limit)
        except CacheDamaged:
            if older_npz(path):
                return None  # a table of the format before this one: `index` writes it again
            raise
        if found is None or found[0].get("format") != TABLE_FORMAT:
            return None
        meta, body = found
        table = cls._from_body(path, body)
        stamp = meta.get("fingerprint")
        table.stamp = stamp if isinstance(stamp, str) else None
        generation = meta.get("generation") or table.stamp or ""
        table.base = Base(generation, table.note_ids)
        log = TableLog(log_path(path), generation)
        records = log.read(limit)
        meta = {**meta, "base_size": len(body), "log_size": log.size, "log_records": len(records)}
        return log.replay(table, meta, records) if records else (table, meta)

    @classmethod
    def _from_body(cls, path: Path, body: bytes) -> ChunkTable:
        try:
            with np.load(io.BytesIO(body), allow_pickle=False) as data:
                ids, notes, texts = (unblob(data[key], data[f"{key}_ends"]) for key in ("ids", "note_ids", "texts"))
                vectors = np.ascontiguousarray(data["vectors"], dtype=np.float32)
                tokens = np.asarray(data["tokens"], dtype=np.int64)
        except _READ_ERRORS as error:  # the bytes written, of the wrong shape
            raise CacheDamaged(f"{path.name}: {type(error).__name__}") from None
        if vectors.ndim != 2 or not (len(ids) == len(notes) == len(texts) == len(tokens) == len(vectors)):
            raise CacheDamaged(f"{path.name}: its arrays do not fit together")
        rows_of: dict[str, list[int]] = defaultdict(list)
        for row, note in enumerate(notes):
            rows_of[note].append(row)
        return cls(ids, notes, texts, tokens, vectors, dict(rows_of))

    def best_chunk(self, note_id: str, qvec: np.ndarray) -> tuple[int, float] | None:
        """(row, similarity) of the note's chunk closest to the question."""
        rows = self.rows_of.get(note_id)
        if not rows:
            return None
        sims = self.vectors[rows] @ qvec
        best = int(np.argmax(sims))
        return rows[best], float(sims[best])


def log_path(table: Path) -> Path:
    """The log of edits beside a saved table (``table-COLLECTION.npz`` -> ``table-COLLECTION.log``)."""
    return table.with_name(f"{table.stem}.log")


class TableLog:
    """The edits since a saved table was written, one record each, appended: an edit's index writes the chunks of
    the notes it changed and the meta they change (Chroma's fingerprint, the note hashes), not the whole table.

    A record is a magic line, a head (one line of JSON: the table's ``generation`` it follows, its number, the notes
    it replaces, what the meta changes, the body's length and sha256) and the body (an .npz of those notes' chunks).
    Records of another generation (a log left beside a table written since) are not read; a record cut short (a run
    killed while it was written) ends the log, and the next append cuts it off. A reader that meets a record being
    written sees the table as it was, older than Chroma: its stamp says so."""

    def __init__(self, path: Path, generation: str) -> None:
        self.path = path
        self.generation = generation
        self.size = 0  # bytes of whole records of this generation, as last read or written

    def read(self, limit: int) -> list[tuple[dict[str, Any], bytes]]:
        data = read_file(self.path, limit)
        records: list[tuple[dict[str, Any], bytes]] = []
        at = 0
        while data is not None and data.startswith(LOG_MAGIC, at):
            end = data.find(b"\n", at + len(LOG_MAGIC))
            try:
                head = json.loads(data[at + len(LOG_MAGIC) : end]) if end > 0 else None
            except (ValueError, RecursionError):
                head = None
            if not isinstance(head, dict) or not isinstance(head.get("body_size"), int):
                break
            body = data[end + 1 : end + 1 + head["body_size"]]
            whole = len(body) == head["body_size"] and hashlib.sha256(body).hexdigest() == head.get("body_sha256")
            if not whole or head.get("base") != self.generation or head.get("seq") != len(records) + 1:
                break
            records.append((head, body))
            at = end + 1 + len(body)
        self.size = at
        return records

    def append(self, head: dict[str, Any], table: ChunkTable, notes: Collection[str], seq: int) -> None:
        """Add the record of an edit of ``notes`` (their chunks as ``table`` holds them now) after the ``size``
        bytes known to be whole; anything after those (a record cut short) is cut off."""
        rows = sorted(row for note in notes for row in table.rows_of.get(note, ()))
        arrays = {"vectors": np.ascontiguousarray(table.vectors[rows], dtype=np.float32), "tokens": table.tokens[rows]}
        for key, values in (("ids", table.ids), ("note_ids", table.note_ids), ("texts", table.texts)):
            arrays[key], arrays[f"{key}_ends"] = blob([values[row] for row in rows])
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
        body = buffer.getvalue()
        framed = {**head, "base": self.generation, "seq": seq, "notes": sorted(notes)}
        framed.update(body_size=len(body), body_sha256=hashlib.sha256(body).hexdigest())
        record = LOG_MAGIC + json.dumps(framed, sort_keys=True, ensure_ascii=True).encode() + b"\n" + body
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            os.ftruncate(fd, self.size)
            os.lseek(fd, self.size, os.SEEK_SET)
            view = memoryview(record)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        self.size += len(record)

    def replay(
        self, table: ChunkTable, meta: dict[str, Any], records: list[tuple[dict[str, Any], bytes]]
    ) -> tuple[ChunkTable, dict[str, Any]]:
        """``table`` (the saved one) with the ``records`` applied in order, and its meta as of the last."""
        latest: dict[str, list[StoredRow]] = {}
        hashes, keys = dict(meta.get("note_hashes") or {}), dict(meta.get("note_keys") or {})
        for head, body in records:
            try:
                with np.load(io.BytesIO(body), allow_pickle=False) as data:
                    ids, notes, texts = (unblob(data[k], data[f"{k}_ends"]) for k in ("ids", "note_ids", "texts"))
                    vectors = np.asarray(data["vectors"], dtype=np.float32)
                    tokens = np.asarray(data["tokens"], dtype=np.int64)
                edited = [str(note) for note in head["notes"]]
            except (*_READ_ERRORS, KeyError) as error:
                raise CacheDamaged(f"{self.path.name}: {type(error).__name__}") from None
            sizes = {len(ids), len(notes), len(texts), len(tokens), len(vectors)}
            if len(sizes) > 1 or len(vectors) and vectors.shape[1:] != table.vectors.shape[1:]:
                raise CacheDamaged(f"{self.path.name}: a record's arrays do not fit the table")
            latest.update((note, []) for note in edited)
            for i, chunk_id in enumerate(ids):
                meta_row = {"note_id": notes[i], "tokens": int(tokens[i])}
                latest.setdefault(notes[i], []).append(StoredRow(chunk_id, texts[i], meta_row, vectors[i]))
            for note in edited:
                hashes.pop(note, None)
            hashes.update(head.get("note_hashes") or {})
            keys.update(head.get("note_keys") or {})
            meta = {**meta, **{k: head[k] for k in ("fingerprint", "info") if k in head}}
        patched = table.patched(latest, (row for rows in latest.values() for row in rows))
        stamp = meta.get("fingerprint")
        patched.stamp = stamp if isinstance(stamp, str) else None
        assert table.base is not None
        patched.base = table.base.since(latest)
        return patched, {**meta, "note_hashes": hashes, "note_keys": keys}


def _chunk_no(chunk_id: str) -> int:
    tail = chunk_id.rsplit("#", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def pairs(found: list[str]) -> list[str]:
    """Each two adjacent ``words`` as one phrase term ("iron crown"; a space never occurs inside a word)."""
    return [f"{a} {b}" for a, b in zip(found, found[1:], strict=False)]


def note_head(title: str, aliases: Iterable[str]) -> str:
    """What a note's BM25 document starts with, twice (names are what a question most often shares): its title and
    aliases."""
    return f"{title} {' '.join(aliases)} "


@dataclass(frozen=True)
class BaseIndexes:
    """The BM25 indexes saved for a table's base (``Base.generation``): by kind, with the heads of the base's notes
    (in note order) they were made from."""

    generation: str
    kinds: dict[str, Bm25]
    heads: list[str]


class Lexical:
    """BM25 over notes (title + aliases + chunk texts) and over chunks, each built on first use.

    ``phrases`` adds the question's adjacent word pairs as terms, scored by a second BM25 over each document's
    adjacent word pairs (``note_pairs``, ``chunk_pairs``): a note holding the question's two words side by side, as
    a phrase, scores more than one holding them apart.

    With ``saved`` (``lexical-COLLECTION.npz``, written by `index` beside the table: ``save``), the indexes come
    from that file when it holds those of the table's base (``ChunkTable.base``: the saved table the table was
    patched from, edit by edit): the base's documents that changed since (a note's chunks edited, its title or
    aliases) are left out and scored from an index of the changed documents alone (`bm25.Parted`), so the scores
    are the ones a build from scratch gives and an edit costs what it touched. Else they are built here. The
    titles and aliases come from ``graph``, or as ``heads`` (note -> `note_head`: `index` reads them from
    okf.duckdb, without the graph's links).
    """

    def __init__(
        self,
        table: ChunkTable,
        graph: NoteGraph | None,
        saved: Path | None = None,
        read: SavedLexical | None = None,
        *,
        heads: Mapping[str, str] | None = None,
        base: BaseIndexes | None = None,
    ) -> None:
        self.table = table
        self.graph = graph
        self.note_ids = sorted(table.rows_of)
        self.saved = saved
        self.read = read  # ``saved`` as `read_lexical` found it (`Retriever.open` reads it first, for its notice)
        self._heads = heads
        self._given = base  # the base's indexes as this process holds them (`index`), instead of reading ``saved``

    @cached_property
    def heads(self) -> list[str]:
        """Each note's `note_head`, in ``note_ids`` order (empty for a note the graph does not hold)."""
        if self._heads is not None:
            return [self._heads.get(note, "") for note in self.note_ids]
        concepts = self.graph.concepts if self.graph is not None else {}
        return [note_head(c.title, c.aliases) if (c := concepts.get(n)) else "" for n in self.note_ids]

    @cached_property
    def _file(self) -> SavedLexical:
        if self.read is not None:
            return self.read
        return read_lexical(self.saved) if self.saved is not None and self.table.base is not None else SavedLexical()

    @cached_property
    def base(self) -> BaseIndexes | None:
        """The indexes saved for this table's base (None: no file, another base's, or damaged)."""
        base = self.table.base
        if base is None:
            return None
        if self._given is not None:
            return self._given if self._given.generation == base.generation else None
        found = self._file.found
        if self.saved is None or found is None:
            return None
        meta, body = found
        if meta.get("format") != LEXICAL_FORMAT or meta.get("table") != base.generation:
            return None
        try:
            with np.load(io.BytesIO(body), allow_pickle=False) as data:
                kinds = {kind: Bm25.from_arrays(data, kind) for kind in _KINDS if f"{kind}_indptr" in data.files}
                heads = unblob(data["heads"], data["heads_ends"])
        except _READ_ERRORS:  # the bytes written, of the wrong shape: built instead
            return None
        notes = base.groups[0]
        fits = len(heads) == len(notes) and all(k.num_docs == len(base.note_ids) for k in _chunk_kinds(kinds))
        if not fits or any(k.num_docs != len(notes) for k in _note_kinds(kinds)):
            return None
        return BaseIndexes(base.generation, kinds, heads)

    @property
    def stale(self) -> bool:
        """Whether ``saved`` lacks an index this table could have saved (so a ``save`` would help): only a table that
        is its base itself can (`index` saves the indexes of a new base whenever it writes one)."""
        base = self.table.base
        if self.saved is None or base is None or base.changed:
            return False
        return self.base is None or len(self.base.kinds) < len(_KINDS)

    @cached_property
    def _chunk_rows(self) -> tuple[np.ndarray, list[int]]:
        """Each base chunk's row now (-1: its note changed), and the rows of the changed notes' chunks."""
        base = self.table.base
        assert base is not None
        return base.chunk_rows(self.table), base.fresh_rows(self.table)

    @cached_property
    def _note_rows(self) -> tuple[np.ndarray, list[int]]:
        """Each base note's place now (-1: its chunks, title or aliases changed, or it is gone), and the places of
        the notes that changed."""
        base, indexes = self.table.base, self.base
        assert base is not None and indexes is not None
        place = {note: i for i, note in enumerate(self.note_ids)}
        was = dict(zip(base.groups[0], indexes.heads, strict=True))
        fresh = [i for i, note in enumerate(self.note_ids) if note in base.changed or was.get(note) != self.heads[i]]
        changed = {self.note_ids[i] for i in fresh}
        rows = [-1 if note in changed else place.get(note, -1) for note in base.groups[0]]
        return np.asarray(rows, dtype=np.int64), fresh

    @cached_property
    def _fresh_words(self) -> dict[int, list[str]]:
        return {row: words(self.table.texts[row]) for row in self._chunk_rows[1]}

    @cached_property
    def _fresh_note_words(self) -> dict[int, list[str]]:
        return {i: self._note_words(i) for i in self._note_rows[1]}

    def _from_base(self, kind: str) -> Bm25 | Parted | None:
        """``kind``'s index from the base's: as saved when nothing changed since, else in parts."""
        indexes = self.base
        if indexes is None or kind not in indexes.kinds:
            return None
        if kind in ("chunks", "chunk_pairs"):
            rows, fresh = self._chunk_rows
            docs = [self._fresh_words[r] if kind == "chunks" else pairs(self._fresh_words[r]) for r in fresh]
            size = len(self.table.ids)
        else:
            rows, fresh = self._note_rows
            docs = [self._fresh_note_words[i] if kind == "notes" else pairs(self._fresh_note_words[i]) for i in fresh]
            size = len(self.note_ids)
        if not fresh and len(rows) == size and np.array_equal(rows, np.arange(size)):
            return indexes.kinds[kind]
        added = Part(Bm25.build(docs), np.asarray(fresh, dtype=np.int64))
        return Parted([Part(indexes.kinds[kind], rows), added], size)

    def compacted(self) -> dict[str, Bm25] | None:
        """The four indexes of this table in one piece each, made from the base's (their counts kept, the changed
        documents read again: `Bm25.updated`), to be saved for a new base; None without the base's four."""
        indexes = self.base
        if indexes is None or len(indexes.kinds) < len(_KINDS):
            return None
        rows, fresh = self._chunk_rows
        notes, note_words = self._note_rows[0], self._fresh_note_words
        chunk_docs, note_docs = len(self.table.ids), len(self.note_ids)
        return {
            "chunks": indexes.kinds["chunks"].updated(rows, self._fresh_words, chunk_docs),
            "chunk_pairs": indexes.kinds["chunk_pairs"].updated(
                rows, {r: pairs(w) for r, w in self._fresh_words.items()}, chunk_docs
            ),
            "notes": indexes.kinds["notes"].updated(notes, note_words, note_docs),
            "note_pairs": indexes.kinds["note_pairs"].updated(
                notes, {i: pairs(w) for i, w in note_words.items()}, note_docs
            ),
        }

    @cached_property
    def notes(self) -> Bm25 | Parted:
        return self._from_base("notes") or Bm25.build([self._note_words(i) for i in range(len(self.note_ids))])

    @cached_property
    def chunks(self) -> Bm25 | Parted:
        return self._from_base("chunks") or Bm25.build([words(t) for t in self.table.texts])

    @cached_property
    def note_pairs(self) -> Bm25 | Parted:
        found = self._from_base("note_pairs")
        return found or Bm25.build([pairs(self._note_words(i)) for i in range(len(self.note_ids))])

    @cached_property
    def chunk_pairs(self) -> Bm25 | Parted:
        return self._from_base("chunk_pairs") or Bm25.build([pairs(words(t)) for t in self.table.texts])

    def _note_words(self, i: int) -> list[str]:
        """The words of the ``i``-th note: its head twice, then its chunk texts."""
        texts = self.table.texts
        return words(self.heads[i] * 2 + " ".join(texts[r] for r in self.table.rows_of[self.note_ids[i]]))

    def note_scores(self, question: str, *, phrases: bool = False) -> dict[str, float]:
        q = words(question)
        scores = self.notes.get_scores(q) if q else np.zeros(len(self.note_ids))
        if phrases and len(q) > 1:
            scores = scores + self.note_pairs.get_scores(pairs(q))
        return {n: float(scores[i]) for i, n in enumerate(self.note_ids)}

    def chunk_scores(self, question: str, *, phrases: bool = False) -> np.ndarray:
        q = words(question)
        scores = self.chunks.get_scores(q) if q else np.zeros(len(self.table.texts), dtype=np.float32)
        if phrases and len(q) > 1:
            scores = scores + self.chunk_pairs.get_scores(pairs(q))
        return scores

    def save(self, path: Path) -> BaseIndexes | None:
        """Write the four indexes to ``path`` as those of the table's base, atomically (a reader, or a run killed
        here, sees the old file or the new one), and return them. Only a table that is its own base (saved, no
        change since) has them whole: otherwise (or when any is in parts) nothing is written."""
        base = self.table.base
        kinds = {kind: getattr(self, kind) for kind in _KINDS} if base is not None and not base.changed else {}
        if base is None or not all(isinstance(index, Bm25) for index in kinds.values()) or not kinds:
            return None
        meta = {"format": LEXICAL_FORMAT, "table": base.generation}
        heads, ends = blob(self.heads)
        arrays: dict[str, np.ndarray] = {"heads": heads, "heads_ends": ends}  # the base heads, compared by a search
        for kind, index in kinds.items():
            arrays.update(index.arrays(kind))  # type: ignore[union-attr]
        save_npz(path, LEXICAL_MAGIC, meta, arrays)
        return BaseIndexes(base.generation, kinds, list(self.heads))  # type: ignore[arg-type]

    @staticmethod
    def saved_in(path: Path, generation: str) -> bool:
        """Whether the file at ``path`` says it holds the indexes of base ``generation`` (its head alone is read: a
        damaged body is found, and rebuilt, by the search that loads it)."""
        head = read_head(path, LEXICAL_MAGIC)
        return head is not None and head.get("format") == LEXICAL_FORMAT and head.get("table") == generation


def _chunk_kinds(kinds: dict[str, Bm25]) -> list[Bm25]:
    return [index for kind, index in kinds.items() if kind in ("chunks", "chunk_pairs")]


def _note_kinds(kinds: dict[str, Bm25]) -> list[Bm25]:
    return [index for kind, index in kinds.items() if kind in ("notes", "note_pairs")]


@dataclass(frozen=True)
class SavedLexical:
    """A saved set of BM25 indexes as read: its head and body (None: no file, or a damaged one) and the notice a
    damaged one makes."""

    found: tuple[dict[str, Any], bytes] | None = None
    notice: str | None = None


def read_lexical(path: Path) -> SavedLexical:
    """The BM25 indexes `index` saved at ``path`` (``BUNDLE/.vault2okf/lexical-COLLECTION.npz``), their body
    proven by its sha256; a damaged file is a notice, and the indexes are built from the chunk table instead."""
    try:
        return SavedLexical(read_cache(path, LEXICAL_MAGIC, size_limit(path.parent.parent)))
    except CacheDamaged as damage:
        if older_npz(path):
            return SavedLexical()  # of the format before this one: built and saved again, silently
        notice = f"the saved BM25 indexes were damaged ({damage}): built from the chunk table and saved again"
        return SavedLexical(None, notice)


class ContextVectors:
    """Embeddings of the sentences that link notes, cached on disk beside the Chroma index."""

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        self.row = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors

    @classmethod
    def build(cls, graph: NoteGraph, embedder: Embedder, cache_dir: Path) -> ContextVectors:
        """The vectors of the graph's link sentences: from the cache file while it proves its body and holds one
        vector per sentence, else embedded and written again."""
        texts = sorted({t for nbrs in graph.neighbours.values() for ts in nbrs.values() for t in ts})
        digest = hashlib.sha256("\n".join([embedder.name, *texts]).encode()).hexdigest()[:16]
        path = cache_dir / f"contexts-{embedder.name}-{digest}.npz"
        cached = _read_contexts(path, len(texts), size_limit(cache_dir.parent))
        if cached is not None:
            return cls(texts, cached)
        vectors = embedder.embed_documents(texts) if texts else np.zeros((0, 1), dtype=np.float32)
        cache_dir.mkdir(parents=True, exist_ok=True)
        for old in cache_dir.glob(f"contexts-{embedder.name}-*.np[yz]"):
            if old != path:
                old.unlink(missing_ok=True)
        save_npz(path, CONTEXTS_MAGIC, {"rows": len(texts)}, {"vectors": np.asarray(vectors, dtype=np.float32)})
        return cls(texts, vectors)

    def similarity(self, texts: list[str], qvec: np.ndarray) -> float:
        rows = [self.row[t] for t in texts if t in self.row]
        return float(np.max(self.vectors[rows] @ qvec)) if rows else 0.0


def _read_contexts(path: Path, rows: int, limit: int) -> np.ndarray | None:
    """The saved link-context vectors when they prove their body and hold ``rows`` finite vectors; None (embed
    them again) when missing or damaged."""
    try:
        found = read_cache(path, CONTEXTS_MAGIC, limit)
        if found is None or found[0].get("rows") != rows:
            return None
        with np.load(io.BytesIO(found[1]), allow_pickle=False) as data:
            vectors = np.asarray(data["vectors"], dtype=np.float32)
    except (CacheDamaged, *_READ_ERRORS):
        return None
    return vectors if vectors.ndim == 2 and len(vectors) == rows and np.isfinite(vectors).all() else None


def older_npz(path: Path) -> bool:
    """Whether ``path`` is a plain .npz (a zip) as the format before this one wrote it: not damage."""
    import os
    import stat

    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            return False
        with open(path, "rb") as fh:
            return fh.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def save_npz(path: Path, magic: bytes, head: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` as an .npz body after ``magic`` and ``head`` (`retriever.cachefile`), atomically: a temp
    file beside it, renamed over it (a kill leaves the old)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    write_cache(path, magic, head, buffer.getvalue())
