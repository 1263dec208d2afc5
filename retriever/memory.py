"""What retrieval keeps in memory per process: every chunk's text and vector, BM25 indexes, link-context vectors.

The chunk table is copied from the Chroma collection when a bundle is opened (docs/adr-003-in-memory-vectors.md),
so the hop scores hundreds of neighbours in a few milliseconds with numpy instead of round trips to Chroma; the
vector stage is an exact top-k over the same table. `index` saves the table beside the index (``save``/``load``),
so a new process opens it without chromadb. The BM25 indexes and the link-context vectors are built on first use
(``Retriever.prepare`` builds them before timing).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from retriever.cachefile import MIN_LIMIT, CacheDamaged, read_cache, size_limit, write_cache
from retriever.embed import Embedder
from retriever.graph import NoteGraph
from retriever.store import ChunkHit, ChunkStore

# the layouts of a saved table and a saved set of BM25 indexes (`Lexical.save`); another number is not read.
# 2: a magic line and a head with the body's length and sha256 before the .npz (`retriever.cachefile`)
TABLE_FORMAT = 2
LEXICAL_FORMAT = 2
TABLE_MAGIC = b"vault2okf chunk table 2\n"
LEXICAL_MAGIC = b"vault2okf bm25 indexes 2\n"
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
            arrays[key], arrays[f"{key}_ends"] = _blob(values)
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
                ids, notes, texts = (_unblob(data[key], data[f"{key}_ends"]) for key in ("ids", "note_ids", "texts"))
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


def _blob(values: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array and the end offset of each (no pickles, no fixed-width padding)."""
    encoded = [v.encode() for v in values]
    ends = np.cumsum([len(e) for e in encoded], dtype=np.int64) if encoded else np.zeros(0, dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends


def _unblob(blob: np.ndarray, ends: np.ndarray) -> list[str]:
    """The strings back: a NUL put after each one by numpy, then one decode and one split, both in C (a cold
    search reads some 10^5 BM25 terms; slicing and decoding them one by one cost it 0.1 s). Strings that hold a
    NUL themselves split wrongly, are counted off and take the slow way."""
    ends = np.asarray(ends, dtype=np.int64)
    if not len(ends):
        return []
    marked = np.insert(np.asarray(blob, dtype=np.uint8), ends[:-1], 0)
    values = marked.tobytes().decode().split("\x00")
    if len(values) == len(ends):
        return values
    raw = blob.tobytes()
    starts = [0, *ends[:-1].tolist()]
    return [raw[a:b].decode() for a, b in zip(starts, ends.tolist(), strict=True)]


def _chunk_no(chunk_id: str) -> int:
    tail = chunk_id.rsplit("#", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def pairs(found: list[str]) -> list[str]:
    """Each two adjacent ``words`` as one phrase term ("iron crown"; a space never occurs inside a word)."""
    return [f"{a} {b}" for a, b in zip(found, found[1:], strict=False)]


class Lexical:
    """BM25 over notes (title + aliases + chunk texts) and over chunks, each built on first use.

    ``phrases`` adds the question's adjacent word pairs as terms, scored by a second BM25 over each document's
    adjacent word pairs (``note_pairs``, ``chunk_pairs``): a note holding the question's two words side by side, as
    a phrase, scores more than one holding them apart.

    With ``saved`` (``lexical-COLLECTION.npz``, written by `index` beside the table: ``save``), the indexes come
    from that file while it was made from this table (the same Chroma fingerprint and chunk count) and, for the
    notes, from the same titles and aliases; else they are built here, as before. A file from before the pair
    indexes gives the other two (and is ``stale``).
    """

    def __init__(
        self, table: ChunkTable, graph: NoteGraph, saved: Path | None = None, read: SavedLexical | None = None
    ) -> None:
        self.table = table
        self.graph = graph
        self.note_ids = sorted(table.rows_of)
        self.saved = saved
        self.read = read  # ``saved`` as `read_lexical` found it (`Retriever.open` reads it first, for its notice)

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
                return {kind: Bm25.from_arrays(data, kind) for kind in kinds if f"{kind}_data" in data.files}
        except _READ_ERRORS:  # the bytes written, of the wrong shape: built instead
            return {}

    @property
    def _table_key(self) -> list[Any]:
        return [self.table.stamp, len(self.table.ids)]

    @cached_property
    def _notes_key(self) -> str:
        """What the note index is made from besides the table's texts: every note's title and aliases."""
        digest = hashlib.sha256()
        for note in self.note_ids:
            c = self.graph.concepts.get(note)
            digest.update(json.dumps([note, c.title, list(c.aliases)] if c else [note]).encode() + b"\n")
        return digest.hexdigest()

    @property
    def stale(self) -> bool:
        """Whether ``saved`` lacks an index this table could have loaded (so a save would help)."""
        return self.saved is not None and self.table.stamp is not None and len(self._from_file) < len(_KINDS)

    @cached_property
    def notes(self) -> Bm25:
        if "notes" in self._from_file:
            return self._from_file["notes"]
        return Bm25.build(self._note_words())

    @cached_property
    def chunks(self) -> Bm25:
        if "chunks" in self._from_file:
            return self._from_file["chunks"]
        return Bm25.build([words(t) for t in self.table.texts])

    @cached_property
    def note_pairs(self) -> Bm25:
        if "note_pairs" in self._from_file:
            return self._from_file["note_pairs"]
        return Bm25.build([pairs(found) for found in self._note_words()])

    @cached_property
    def chunk_pairs(self) -> Bm25:
        if "chunk_pairs" in self._from_file:
            return self._from_file["chunk_pairs"]
        return Bm25.build([pairs(words(t)) for t in self.table.texts])

    def _note_words(self) -> list[list[str]]:
        """Each note's words: its title and aliases (twice: names are what a question most often shares), then its
        chunk texts."""
        docs = []
        for note in self.note_ids:
            c = self.graph.concepts.get(note)
            head = f"{c.title} {' '.join(c.aliases)} " if c else ""
            docs.append(words(head * 2 + " ".join(self.table.texts[r] for r in self.table.rows_of[note])))
        return docs

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

    def save(self, path: Path) -> None:
        """Write the four indexes to ``path``, stamped with the table's and the notes' keys, atomically (a reader,
        or a run killed here, sees the old file or the new one). A table read from Chroma has no stamp: nothing is
        written."""
        if self.table.stamp is None:
            return
        meta = {"format": LEXICAL_FORMAT, "table": self._table_key, "notes": self._notes_key}
        arrays: dict[str, np.ndarray] = {}
        for kind in _KINDS:
            arrays.update(getattr(self, kind).arrays(kind))
        save_npz(path, LEXICAL_MAGIC, meta, arrays)


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


@dataclass(frozen=True)
class Bm25:
    """A BM25 index as bm25s builds it (its defaults: Lucene BM25, k1 1.5, b 0.75): for each term a column of
    (document, score) pairs in CSC layout, and the vocabulary. Scoring adds the columns of the query's terms in
    query order, as bm25s's numpy scorer does, so the scores are the same; only building needs bm25s.
    """

    data: np.ndarray  # float32 scores, column by column
    indices: np.ndarray  # the document of each score
    indptr: np.ndarray  # where each term's column starts (one more than there are terms)
    num_docs: int
    vocab: dict[str, int]  # term -> column

    @classmethod
    def build(cls, docs: list[list[str]]) -> Bm25:
        """The index of ``docs`` (lists of terms); one with no term at all (notes with no text) scores nothing,
        where bm25s would fail on the empty vocabulary."""
        import bm25s

        if not any(docs):
            empty = np.zeros(0, dtype=np.float32)
            return cls(empty, np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int32), len(docs), {})
        index = bm25s.BM25()
        index.index(docs, show_progress=False)
        s = index.scores
        data, indices, indptr = (np.asarray(s[key]) for key in ("data", "indices", "indptr"))
        return cls(data, indices, indptr, int(s["num_docs"]), dict(index.vocab_dict))

    def get_scores(self, query: list[str]) -> np.ndarray:
        scores = np.zeros(self.num_docs, dtype=self.data.dtype)
        for term in query:
            column = self.vocab.get(term)
            if column is not None and column + 1 < len(self.indptr):  # bm25s's "" term has no column
                start, end = self.indptr[column], self.indptr[column + 1]
                np.add.at(scores, self.indices[start:end], self.data[start:end])
        return scores

    def df(self, term: str) -> int:
        """How many documents hold ``term``."""
        column = self.vocab.get(term)
        if column is None or column + 1 >= len(self.indptr):
            return 0
        return int(self.indptr[column + 1] - self.indptr[column])

    def arrays(self, kind: str) -> dict[str, np.ndarray]:
        terms = sorted(self.vocab, key=self.vocab.__getitem__)
        blob, ends = _blob(terms)
        return {
            f"{kind}_data": self.data,
            f"{kind}_indices": self.indices,
            f"{kind}_indptr": self.indptr,
            f"{kind}_docs": np.array([self.num_docs], dtype=np.int64),
            f"{kind}_terms": blob,
            f"{kind}_terms_ends": ends,
            f"{kind}_columns": np.array([self.vocab[t] for t in terms], dtype=np.int64),
        }

    @classmethod
    def from_arrays(cls, data: Any, kind: str) -> Bm25:
        terms = _unblob(data[f"{kind}_terms"], data[f"{kind}_terms_ends"])
        columns = data[f"{kind}_columns"].tolist()
        index = cls(
            np.asarray(data[f"{kind}_data"]),
            np.asarray(data[f"{kind}_indices"]),
            np.asarray(data[f"{kind}_indptr"]),
            int(data[f"{kind}_docs"][0]),
            dict(zip(terms, columns, strict=True)),
        )
        if len(index.data) != len(index.indices) or not len(index.indptr) or index.indptr[-1] != len(index.data):
            raise ValueError(f"{kind}: the saved BM25 arrays do not fit together")
        return index


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
