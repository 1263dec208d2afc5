"""Chunk vectors in Chroma: one collection per (bundle, embedder), kept in sync by chunk content hash.

The embedded `PersistentClient` lives at `BUNDLE/.vault2okf/chroma`; `open_client(url=...)` talks to a Chroma
server instead. Telemetry is off and no collection gets an embedding function: vectors always come from our
embedder, and Chroma never tries to download its own model.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import urlparse

import numpy as np

from retriever.embed import Embedder
from retriever.errors import RetrieverError
from vault2okf.protocol import state_dir

if TYPE_CHECKING:  # chunking (markdown-it) is index work: a search never imports it
    from retriever.chunk import Chunk

_PAGE = 1000
PROGRESS_ENV = "VAULT2OKF_PROGRESS"  # 1: draw the embed bar even when stderr is not a terminal


@dataclass(frozen=True)
class SyncStats:
    added: int
    removed: int
    unchanged: int


@dataclass(frozen=True)
class ChunkHit:
    chunk_id: str
    note_id: str
    score: float  # cosine similarity, 1 - cosine distance
    text: str
    tokens: int


@dataclass(frozen=True)
class StoredRow:
    """One stored chunk as `ChunkStore.rows` reads it; fields not asked for in `include` are None."""

    chunk_id: str
    document: str | None
    metadata: dict[str, Any] | None
    embedding: np.ndarray | None


class NoteChunk(NamedTuple):
    chunk_id: str
    text: str
    tokens: int
    embedding: np.ndarray


def default_chroma_path(bundle_dir: Path | str) -> Path:
    return state_dir(bundle_dir) / "chroma"


def chroma_settings() -> Any:
    """The settings of every Chroma client we open: telemetry off (nothing leaves the machine by default). A copy
    of one made once: making them reads the environment through pydantic (0.07 s, an edit's index under `watch`
    opens a client each time), and a client writes its path into the settings it is given."""
    return _settings().model_copy()


@functools.cache
def _settings() -> Any:
    from chromadb.config import Settings

    return Settings(anonymized_telemetry=False)


def open_client(bundle_dir: Path | str, *, path: Path | str | None = None, url: str | None = None) -> Any:
    """A Chroma server client when `url` is given, else the persistent client in the bundle (or at `path`)."""
    address = _parse_url(url) if url else None  # a bad URL fails before chromadb is even imported
    import chromadb

    settings = chroma_settings()
    if address:
        host, port, ssl = address
        try:
            return chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
        except Exception as e:  # chromadb raises plain ValueError/ConnectionError variants
            raise RetrieverError(f"Cannot reach the Chroma server at {url}: {e}. Is `chroma run` up?") from e
    location = Path(path) if path else default_chroma_path(bundle_dir)
    location.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(path=str(location), settings=settings)


def chroma_fingerprint(chroma_dir: Path | str, collection: str) -> str | None:
    """What changes whenever anything is written to the collection, read without chromadb; None when unknown.

    The persistent client keeps every write in ``chroma.sqlite3``: each add, upsert, update or delete gets the
    next sequence number, which the collection's metadata segment records as its ``max_seq_id`` once applied.
    The collection's id, that number and its row count identify what it holds. The file is opened read-only
    (a plain read through chromadb rewrites it); a layout this code does not know gives None, never a guess.
    """
    path = Path(chroma_dir) / "chroma.sqlite3"
    if not path.is_file():
        return None
    try:
        con = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
        try:
            row = con.execute(
                "SELECT c.id, m.seq_id, (SELECT count(*) FROM embeddings e WHERE e.segment_id = s.id) "
                "FROM collections c JOIN segments s ON s.collection = c.id AND s.scope = 'METADATA' "
                "JOIN max_seq_id m ON m.segment_id = s.id WHERE c.name = ?",
                (collection,),
            ).fetchone()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return None if row is None else f"{row[0]}:{row[1]}:{row[2]}"


def _parse_url(url: str) -> tuple[str, int, bool]:
    parsed = urlparse(url if "://" in url else f"http://{url}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise RetrieverError(f"Bad Chroma URL {url!r}: expected http://HOST:PORT or https://HOST:PORT.")
    ssl = parsed.scheme == "https"
    return parsed.hostname, parsed.port or (443 if ssl else 8000), ssl


def collection_name(bundle_id: str, embedder_name: str) -> str:
    """A valid Chroma collection name (3-63 chars of [a-zA-Z0-9._-], alphanumeric at both ends)."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", f"v2o-{bundle_id}-{embedder_name}")
    name = re.sub(r"-{2,}", "-", re.sub(r"\.{2,}", ".", name)).strip("._-")
    if len(name) > 63:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[:54].rstrip('._-')}-{digest}"
    return name


class ChunkStore:
    """One Chroma collection of chunks: cosine space, ids are chunk ids, documents are chunk texts."""

    def __init__(self, client: Any, name: str) -> None:
        self.name = name
        self.collection = client.get_or_create_collection(
            name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )

    def count(self) -> int:
        return self.collection.count()

    def rows(self, include: Sequence[str], where: dict[str, Any] | None = None) -> Iterator[StoredRow]:
        """Every stored chunk (matching `where`), a page at a time: the one reader of the whole collection.

        `include` names Chroma fields: any of "documents", "metadatas", "embeddings".
        """
        offset = 0
        while True:
            page = self.collection.get(include=list(include), where=where, limit=_PAGE, offset=offset)
            yield from _page_rows(page)
            if len(page["ids"]) < _PAGE:
                return
            offset += _PAGE

    def stored_metadata(self) -> dict[str, dict[str, Any]]:
        """chunk_id -> metadata (note_id, content_hash, note_hash, note_chunks, ...) of everything stored."""
        return {row.chunk_id: row.metadata or {} for row in self.rows(["metadatas"])}

    def metadata_of(self, chunk_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """chunk_id -> metadata of the given chunks that are stored (`stored_metadata` of those alone)."""
        found: dict[str, dict[str, Any]] = {}
        for batch in _batches(list(chunk_ids), _PAGE):
            page = self.collection.get(ids=list(batch), include=["metadatas"])
            found.update((row.chunk_id, row.metadata or {}) for row in _page_rows(page))
        return found

    def note_rows(self, note_ids: Sequence[str]) -> Iterator[StoredRow]:
        """Every stored chunk of the given notes, with its text, metadata and vector (`rows` of those notes)."""
        for batch in _batches(list(dict.fromkeys(note_ids)), _PAGE):
            yield from self.rows(["documents", "metadatas", "embeddings"], {"note_id": {"$in": list(batch)}})

    def unchanged_notes(self, note_hashes: dict[str, str], stored: dict[str, dict[str, Any]]) -> set[str]:
        """Notes that are completely stored from their current text, so they need not even be re-chunked.

        A note counts only when every stored chunk of it carries the current ``note_hash`` and the stored
        chunks number exactly the ``note_chunks`` its chunks were written with: a note whose chunks were only
        partly written (an interrupted index) is chunked again and its missing chunks are embedded.
        """
        counts = Counter(meta.get("note_id", "") for meta in stored.values())
        complete: dict[str, bool] = {}
        for meta in stored.values():
            note = meta.get("note_id", "")
            whole = meta.get("note_hash") == note_hashes.get(note) and meta.get("note_chunks") == counts[note]
            complete[note] = complete.get(note, True) and whole
        return {note for note, done in complete.items() if done and note in note_hashes}

    def sync(
        self,
        chunks: Sequence[Chunk],
        embedder: Embedder,
        *,
        batch_size: int = 64,
        progress: bool = True,
        keep_notes: frozenset[str] | set[str] = frozenset(),
        note_hashes: dict[str, str] | None = None,
        stored: dict[str, dict[str, Any]] | None = None,
    ) -> SyncStats:
        """Make the collection hold exactly `chunks` plus the stored chunks of `keep_notes` (notes known to be
        unchanged, so not re-chunked): drop stale ids, embed only new or changed chunks.

        Ids are deterministic and writes are upserts, so an interrupted sync resumes without duplicates.
        """
        stored = self.stored_metadata() if stored is None else stored
        hashes = {cid: meta.get("content_hash", "") for cid, meta in stored.items()}
        kept = {cid for cid, meta in stored.items() if meta.get("note_id") in keep_notes}
        wanted = {chunk.chunk_id: chunk for chunk in chunks}
        stale = [
            cid for cid, h in hashes.items() if cid not in kept and (cid not in wanted or wanted[cid].content_hash != h)
        ]
        todo = [chunk for cid, chunk in wanted.items() if hashes.get(cid) != chunk.content_hash]
        for batch in _batches(stale, _PAGE):
            self.collection.delete(ids=batch)
        todo = _by_length(todo, embedder)
        meta = _Metadata(note_hashes or {}, Counter(chunk.note_id for chunk in chunks))
        self._embed_and_add(todo, embedder, batch_size, progress, meta)
        embedded = {chunk.chunk_id for chunk in todo}
        self._refresh_metadata([c for c in wanted.values() if c.chunk_id not in embedded], stored, meta)
        return SyncStats(added=len(todo), removed=len(stale), unchanged=len(wanted) - len(todo) + len(kept))

    def _refresh_metadata(self, chunks: list[Chunk], stored: dict[str, dict[str, Any]], meta: _Metadata) -> None:
        """Unchanged chunks whose metadata is out of date (an edited note, an older index) get the current one,
        without re-embedding. Runs after every new chunk is stored, so a note is marked complete only then."""
        stale = [c for c in chunks if stored.get(c.chunk_id) != meta.of(c)]
        for batch in _batches(stale, _PAGE):
            self.collection.update(ids=[c.chunk_id for c in batch], metadatas=[meta.of(c) for c in batch])

    def _embed_and_add(
        self, chunks: list[Chunk], embedder: Embedder, batch_size: int, progress: bool, meta: _Metadata
    ) -> None:
        from tqdm import tqdm

        # a bar only for a person watching a terminal, or when VAULT2OKF_PROGRESS=1 asks for one anyway
        bar_off = not progress or not (sys.stderr.isatty() or os.environ.get(PROGRESS_ENV) == "1")
        eta = Eta(len(chunks))
        with tqdm(total=len(chunks), unit="chunk", desc="embed", file=sys.stderr, disable=bar_off) as bar:
            for batch in _batches(chunks, batch_size):
                line = eta.line() if progress else None
                if line:
                    tqdm.write(line, file=sys.stderr)
                vectors = embedder.embed_documents([chunk.text for chunk in batch])
                self.collection.upsert(
                    ids=[chunk.chunk_id for chunk in batch],
                    embeddings=vectors,
                    documents=[chunk.text for chunk in batch],
                    metadatas=[meta.of(chunk) for chunk in batch],
                )
                bar.update(len(batch))
                eta.done(len(batch))

    def query(self, vector: np.ndarray, k: int) -> list[ChunkHit]:
        """The `k` chunks nearest to `vector`, best first."""
        if k <= 0 or self.count() == 0:
            return []
        result = self.collection.query(
            query_embeddings=[np.asarray(vector, dtype=np.float32)],
            n_results=min(k, self.count()),
            include=["documents", "metadatas", "distances"],
        )
        rows = zip(
            result["ids"][0],
            result["documents"][0],
            result["metadatas"][0],
            result["distances"][0],
            strict=True,
        )
        return [ChunkHit(cid, meta["note_id"], 1.0 - dist, text, meta["tokens"]) for cid, text, meta, dist in rows]

    def get_note_chunks(self, note_ids: Sequence[str]) -> dict[str, list[NoteChunk]]:
        """Stored chunks of the given notes, with their embeddings, in document order."""
        found: dict[str, list[NoteChunk]] = {}
        for row in self.note_rows(note_ids):
            meta = row.metadata or {}
            found.setdefault(meta["note_id"], []).append(
                NoteChunk(row.chunk_id, row.document or "", meta["tokens"], np.asarray(row.embedding))
            )
        return {note: sorted(chunks, key=_chunk_order) for note, chunks in found.items()}


def _chunk_order(chunk: NoteChunk) -> int:
    return int(chunk.chunk_id.rsplit("#", 1)[1])


def _page_rows(page: dict[str, Any]) -> Iterator[StoredRow]:
    ids = page["ids"]
    documents, metadatas, embeddings = (page.get(key) for key in ("documents", "metadatas", "embeddings"))
    for i, chunk_id in enumerate(ids):
        vector = None if embeddings is None else np.asarray(embeddings[i], dtype=np.float32)
        yield StoredRow(
            chunk_id,
            None if documents is None else documents[i],
            None if metadatas is None else metadatas[i],
            vector,
        )


@dataclass(frozen=True)
class _Metadata:
    """What each chunk's metadata says about its note: the note's text hash and how many chunks it has."""

    note_hashes: dict[str, str]
    note_chunks: Counter[str]

    def of(self, chunk: Chunk) -> dict[str, Any]:
        return {
            "note_hash": self.note_hashes.get(chunk.note_id, ""),
            "note_chunks": self.note_chunks[chunk.note_id],
            "note_id": chunk.note_id,
            "title": chunk.title,
            "heading_path": " > ".join(chunk.heading_path),
            "content_hash": chunk.content_hash,
            "tokens": chunk.tokens,
        }


def _by_length(chunks: list[Chunk], embedder: Embedder) -> list[Chunk]:
    """``chunks`` shortest first, so each batch holds texts of like lengths and little compute goes to padding: in
    tokens when the embedder counts them (`OnnxEmbedder.token_counts`: thellade's chunks at 32 a batch, 1.003x the
    real tokens padded), else in characters (1.09x)."""
    counts = getattr(embedder, "token_counts", None)
    lengths = counts([chunk.text for chunk in chunks]) if counts and chunks else [len(c.text) for c in chunks]
    order = sorted(range(len(chunks)), key=lengths.__getitem__)
    return [chunks[i] for i in order]


def _batches(items: Sequence[Any], size: int) -> Iterator[Any]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Eta:
    """The time an embedding run has left, from its first batches: said once, after the first batch (its one-off
    costs left out) and ``ETA_BATCHES`` more, when at least as many again are left to embed."""

    ETA_BATCHES = 2

    def __init__(self, total: int) -> None:
        self.total = total
        self.embedded = 0
        self.batches = 0
        self.start: tuple[float, int] | None = None  # (time, chunks embedded) at the end of the first batch
        self.said = False

    def done(self, chunks: int) -> None:
        self.embedded += chunks
        self.batches += 1
        if self.batches == 1:
            self.start = (time.perf_counter(), self.embedded)

    def line(self) -> str | None:
        if self.said or self.start is None or self.batches < 1 + self.ETA_BATCHES:
            return None
        self.said = True
        seconds = time.perf_counter() - self.start[0]
        measured = self.embedded - self.start[1]
        left = self.total - self.embedded
        if seconds <= 0 or left < measured:
            return None
        rate = measured / seconds
        return (
            f"embedding {self.total:,} chunks at {rate:.1f} chunks/s (measured over {measured}): "
            f"about {_duration(left / rate)} to go"
        )


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
