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
import re
import zipfile
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from retriever.bm25 import Bm25
from retriever.cachefile import (
    MIN_LIMIT,
    CacheDamaged,
    blob,
    read_cache,
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
LEXICAL_FORMAT = 3  # 3: raw term counts (`retriever.bm25`), scored at query time
TABLE_MAGIC = b"vault2okf chunk table 2\n"
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


@dataclass
class ChunkTable:
    ids: list[str]
    note_ids: list[str]
    texts: list[str]
    tokens: np.ndarray  # int, per chunk
    vectors: np.ndarray  # (n, dim) float32, L2-normalised
    rows_of: dict[str, list[int]]  # note id -> chunk rows in document order
    stamp: str | None = None  # the Chroma fingerprint a saved table was copied at; None: read from Chroma

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
        """A table saved by ``save`` and its meta; None when the file is missing or of another format;
        ``CacheDamaged`` when it is not what ``save`` wrote (edited, cut, a special file, over ``limit`` bytes)."""
        try:
            found = read_cache(path, TABLE_MAGIC, limit)
        except CacheDamaged:
            if older_npz(path):
                return None  # a table of the format before this one: `index` writes it again
            raise
        if found is None or found[0].get("format") != TABLE_FORMAT:
            return None
        meta, body = found
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
        stamp = meta.get("fingerprint")
        return cls(ids, notes, texts, tokens, vectors, dict(rows_of), stamp if isinstance(stamp, str) else None), meta

    def best_chunk(self, note_id: str, qvec: np.ndarray) -> tuple[int, float] | None:
        """(row, similarity) of the note's chunk closest to the question."""
        rows = self.rows_of.get(note_id)
        if not rows:
            return None
        sims = self.vectors[rows] @ qvec
        best = int(np.argmax(sims))
        return rows[best], float(sims[best])


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


class Lexical:
    """BM25 over notes (title + aliases + chunk texts) and over chunks, each built on first use.

    ``phrases`` adds the question's adjacent word pairs as terms, scored by a second BM25 over each document's
    adjacent word pairs (``note_pairs``, ``chunk_pairs``): a note holding the question's two words side by side, as
    a phrase, scores more than one holding them apart.

    With ``saved`` (``lexical-COLLECTION.npz``, written by `index` beside the table: ``save``), the indexes come
    from that file while it was made from this table (the same Chroma fingerprint and chunk count) and, for the
    notes, from the same titles and aliases; else they are built here, as before. A file from before the pair
    indexes gives the other two (and is ``stale``). The titles and aliases come from ``graph``, or as ``heads``
    (note -> `note_head`: `index` reads them from okf.duckdb, without the graph's links).

    After an edit, `index` makes the indexes of the new table from the saved ones (``updated``): only the documents
    the edit changed are read again, and the result is the one a build from scratch gives.
    """

    def __init__(
        self,
        table: ChunkTable,
        graph: NoteGraph | None,
        saved: Path | None = None,
        read: SavedLexical | None = None,
        *,
        heads: Mapping[str, str] | None = None,
    ) -> None:
        self.table = table
        self.graph = graph
        self.note_ids = sorted(table.rows_of)
        self.saved = saved
        self.read = read  # ``saved`` as `read_lexical` found it (`Retriever.open` reads it first, for its notice)
        self._heads = heads

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
        return read_lexical(self.saved) if self.saved is not None and self.table.stamp is not None else SavedLexical()

    @cached_property
    def _from_file(self) -> dict[str, Bm25]:
        """The indexes in ``saved`` that still describe this table and these notes (none when it is stale)."""
        found = self._file.found
        if self.saved is None or self.table.stamp is None or found is None:
            return {}
        meta, body = found
        if meta.get("format") != LEXICAL_FORMAT or meta.get("table") != self._table_key:
            return {}
        kinds = ["chunks", "chunk_pairs"] + (["notes", "note_pairs"] if meta.get("notes") == self._notes_key else [])
        try:
            with np.load(io.BytesIO(body), allow_pickle=False) as data:
                return {kind: Bm25.from_arrays(data, kind) for kind in kinds if f"{kind}_indptr" in data.files}
        except _READ_ERRORS:  # the bytes written, of the wrong shape: built instead
            return {}

    @property
    def _table_key(self) -> list[Any]:
        return [self.table.stamp, len(self.table.ids)]

    @cached_property
    def _notes_key(self) -> str:
        """What the note index is made from besides the table's texts: every note's title and aliases."""
        return hashlib.sha256(json.dumps([self.note_ids, self.heads]).encode()).hexdigest()

    @property
    def stale(self) -> bool:
        """Whether ``saved`` lacks an index this table could have loaded (so a save would help)."""
        return self.saved is not None and self.table.stamp is not None and len(self._from_file) < len(_KINDS)

    @cached_property
    def notes(self) -> Bm25:
        if "notes" in self._from_file:
            return self._from_file["notes"]
        return Bm25.build([self._note_words(i) for i in range(len(self.note_ids))])

    @cached_property
    def chunks(self) -> Bm25:
        if "chunks" in self._from_file:
            return self._from_file["chunks"]
        return Bm25.build([words(t) for t in self.table.texts])

    @cached_property
    def note_pairs(self) -> Bm25:
        if "note_pairs" in self._from_file:
            return self._from_file["note_pairs"]
        return Bm25.build([pairs(self._note_words(i)) for i in range(len(self.note_ids))])

    @cached_property
    def chunk_pairs(self) -> Bm25:
        if "chunk_pairs" in self._from_file:
            return self._from_file["chunk_pairs"]
        return Bm25.build([pairs(words(t)) for t in self.table.texts])

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

    def updated(self, table: ChunkTable, heads: Mapping[str, str]) -> Lexical:
        """The indexes of ``table`` (this one's table after an edit; ``heads``: its notes' `note_head`) made from
        this one's: a note whose chunk texts are the same keeps its chunks' counts, and its own when its head is
        the same too; the rest are read again. Equal to a build from scratch (tests/test_lexical_update.py); costs
        the changed documents' words and a few passes of numpy over the counts."""
        new = Lexical(table, self.graph, heads=heads)
        before = {note: i for i, note in enumerate(self.note_ids)}
        moved_chunks = np.full(len(self.table.ids), -1, dtype=np.int64)
        moved_notes = np.full(len(self.note_ids), -1, dtype=np.int64)
        fresh_chunks: dict[int, list[str]] = {}
        fresh_notes: dict[int, list[str]] = {}
        for i, note in enumerate(new.note_ids):
            rows, old = table.rows_of[note], self.table.rows_of.get(note, [])
            if [table.texts[r] for r in rows] == [self.table.texts[r] for r in old]:
                moved_chunks[old] = rows
                if new.heads[i] == self.heads[before[note]]:
                    moved_notes[before[note]] = i
                    continue
            else:
                fresh_chunks.update((r, words(table.texts[r])) for r in rows)
            fresh_notes[i] = new._note_words(i)
        chunk_docs, note_docs = len(table.ids), len(new.note_ids)
        chunk_pairs = {r: pairs(w) for r, w in fresh_chunks.items()}
        new.__dict__.update(
            chunks=self.chunks.updated(moved_chunks, fresh_chunks, chunk_docs),
            chunk_pairs=self.chunk_pairs.updated(moved_chunks, chunk_pairs, chunk_docs),
            notes=self.notes.updated(moved_notes, fresh_notes, note_docs),
            note_pairs=self.note_pairs.updated(moved_notes, {i: pairs(w) for i, w in fresh_notes.items()}, note_docs),
        )
        return new

    def save(self, path: Path) -> None:
        """Write the four indexes to ``path``, stamped with the table's and the notes' keys, atomically (a reader,
        or a run killed here, sees the old file or the new one). A table read from Chroma has no stamp: nothing is
        written."""
        if self.table.stamp is None:
            return
        meta = {"format": LEXICAL_FORMAT, "table": self._table_key, "notes": self._notes_key}
        heads, ends = blob(self.heads)
        arrays: dict[str, np.ndarray] = {"heads": heads, "heads_ends": ends}  # what `saved_for` compares with
        for kind in _KINDS:
            arrays.update(getattr(self, kind).arrays(kind))
        save_npz(path, LEXICAL_MAGIC, meta, arrays)

    def saved_in(self, path: Path) -> bool:
        """Whether the file at ``path`` says it holds this table's and these notes' indexes (its head alone is
        read: a damaged body is found, and rebuilt, by the search that loads it)."""
        head = read_head(path, LEXICAL_MAGIC)
        wanted = {"format": LEXICAL_FORMAT, "table": self._table_key, "notes": self._notes_key}
        return head is not None and all(head.get(key) == value for key, value in wanted.items())

    @classmethod
    def saved_for(cls, table: ChunkTable, path: Path) -> Lexical | None:
        """The four indexes saved at ``path`` for ``table`` (a saved one: stamped), with the note heads they were
        made from, ready to be ``updated``; None when the file is missing, damaged, or lacks any of them."""
        read = read_lexical(path)
        if read.found is None or table.stamp is None:
            return None
        try:
            with np.load(io.BytesIO(read.found[1]), allow_pickle=False) as data:
                heads = unblob(data["heads"], data["heads_ends"])
        except _READ_ERRORS:
            return None
        notes = sorted(table.rows_of)
        if len(heads) != len(notes):
            return None
        saved = cls(table, None, path, read, heads=dict(zip(notes, heads, strict=True)))
        return None if saved.stale else saved


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
