"""What retrieval keeps in memory per process: every chunk's text and vector, BM25 indexes, link-context vectors.

The chunk table is copied from the Chroma collection when a bundle is opened (docs/adr-003-in-memory-vectors.md),
so the hop scores hundreds of neighbours in a few milliseconds with numpy instead of round trips to Chroma; the
vector stage is an exact top-k over the same table. `index` saves the table beside the index (``save``/``load``),
so a new process opens it without chromadb. The BM25 indexes and the link-context vectors are built on first use
(``Retriever.prepare`` builds them before timing).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from retriever.embed import Embedder
from retriever.graph import NoteGraph
from retriever.store import ChunkHit, ChunkStore

TABLE_FORMAT = 1  # the layout of a saved table; another number is not read

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

    def nearest(self, qvec: np.ndarray, k: int) -> list[ChunkHit]:
        """The ``k`` chunks most similar to ``qvec`` (cosine: rows and question are unit vectors), best first.

        Exact, over every chunk: what an approximate (HNSW) index returns when it finds the true neighbours.
        Equal similarities keep table order, so the result does not change from run to run.
        """
        n = len(self.ids)
        if k <= 0 or n == 0:
            return []
        sims = self.vectors @ np.asarray(qvec, dtype=np.float32)
        top = np.argpartition(-sims, k - 1)[:k] if k < n else np.arange(n)
        rows = sorted(top.tolist(), key=lambda r: (-float(sims[r]), r))
        return [
            ChunkHit(self.ids[r], self.note_ids[r], float(sims[r]), self.texts[r], int(self.tokens[r])) for r in rows
        ]

    def save(self, path: Path, meta: dict[str, Any]) -> None:
        """Write the table and ``meta`` (what it was made from) to one ``.npz``, atomically: a reader, or a run
        killed here, sees the old file or the new one."""
        arrays = {
            "vectors": np.ascontiguousarray(self.vectors, dtype=np.float32),
            "tokens": self.tokens,
            "meta": _blob([json.dumps({**meta, "format": TABLE_FORMAT}, sort_keys=True)])[0],
        }
        for key, values in (("ids", self.ids), ("note_ids", self.note_ids), ("texts", self.texts)):
            arrays[key], arrays[f"{key}_ends"] = _blob(values)
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.part-{os.getpid()}.npz")
        try:
            np.savez(part, **arrays)  # type: ignore[arg-type]
            os.replace(part, path)
        finally:
            part.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: Path) -> tuple[ChunkTable, dict[str, Any]] | None:
        """A table saved by ``save`` and its meta; None when the file is missing, unreadable or of another format."""
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(bytes(data["meta"]).decode())
                if meta.get("format") != TABLE_FORMAT:
                    return None
                ids, notes, texts = (_unblob(data[key], data[f"{key}_ends"]) for key in ("ids", "note_ids", "texts"))
                vectors = np.ascontiguousarray(data["vectors"], dtype=np.float32)
                tokens = np.asarray(data["tokens"], dtype=np.int64)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # a damaged file is no table
            return None
        if not (len(ids) == len(notes) == len(texts) == len(tokens) == len(vectors)):
            return None
        rows_of: dict[str, list[int]] = defaultdict(list)
        for row, note in enumerate(notes):
            rows_of[note].append(row)
        return cls(ids, notes, texts, tokens, vectors, dict(rows_of)), meta

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
    raw = blob.tobytes()
    starts = [0, *ends[:-1].tolist()]
    return [raw[a:b].decode() for a, b in zip(starts, ends.tolist(), strict=True)]


def _chunk_no(chunk_id: str) -> int:
    tail = chunk_id.rsplit("#", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class Lexical:
    """BM25 (bm25s) over notes (title + aliases + chunk texts) and over chunks, each built on first use."""

    def __init__(self, table: ChunkTable, graph: NoteGraph) -> None:
        self.table = table
        self.graph = graph
        self.note_ids = sorted(table.rows_of)

    @cached_property
    def notes(self) -> Any:
        note_docs = []
        for note in self.note_ids:
            c = self.graph.concepts.get(note)
            head = f"{c.title} {' '.join(c.aliases)} " if c else ""
            note_docs.append(words(head * 2 + " ".join(self.table.texts[r] for r in self.table.rows_of[note])))
        return _bm25(note_docs)

    @cached_property
    def chunks(self) -> Any:
        return _bm25([words(t) for t in self.table.texts])

    def note_scores(self, question: str) -> dict[str, float]:
        q = words(question)
        scores = self.notes.get_scores(q) if q else np.zeros(len(self.note_ids))
        return {n: float(scores[i]) for i, n in enumerate(self.note_ids)}

    def chunk_scores(self, question: str) -> np.ndarray:
        q = words(question)
        return self.chunks.get_scores(q) if q else np.zeros(len(self.table.texts), dtype=np.float32)


def _bm25(docs: list[list[str]]) -> Any:
    import bm25s

    index = bm25s.BM25()
    index.index(docs, show_progress=False)
    return index


class ContextVectors:
    """Embeddings of the sentences that link notes, cached on disk beside the Chroma index."""

    def __init__(self, texts: list[str], vectors: np.ndarray) -> None:
        self.row = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors

    @classmethod
    def build(cls, graph: NoteGraph, embedder: Embedder, cache_dir: Path) -> ContextVectors:
        texts = sorted({t for nbrs in graph.neighbours.values() for ts in nbrs.values() for t in ts})
        digest = hashlib.sha256("\n".join([embedder.name, *texts]).encode()).hexdigest()[:16]
        path = cache_dir / f"contexts-{embedder.name}-{digest}.npy"
        if path.is_file():
            return cls(texts, np.load(path))
        vectors = embedder.embed_documents(texts) if texts else np.zeros((0, 1), dtype=np.float32)
        cache_dir.mkdir(parents=True, exist_ok=True)
        for old in cache_dir.glob(f"contexts-{embedder.name}-*.npy"):
            old.unlink()
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vectors)
        tmp.replace(path)
        return cls(texts, vectors)

    def similarity(self, texts: list[str], qvec: np.ndarray) -> float:
        rows = [self.row[t] for t in texts if t in self.row]
        return float(np.max(self.vectors[rows] @ qvec)) if rows else 0.0
