"""Index a bundle: chunk every concept in `okf.duckdb`, embed, and sync its Chroma collection.

`BUNDLE/.vault2okf/index.json` records the embedder and collection the index was built with, so `search`
and `ask` embed questions with the same model (`read_index_info`, `open_index`).

Beside it, `table-COLLECTION.npz` holds a copy of the collection (every chunk's id, note, text, tokens and
vector) and the note hashes it was built from, stamped with the Chroma data's fingerprint
(`store.chroma_fingerprint`). While the stamp matches, `open_table` reads the copy instead of importing chromadb,
and an `index` whose notes all hash the same returns before any embedder or Chroma client loads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import uuid
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retriever.cachefile import CacheDamaged, size_limit
from retriever.embed import DEFAULT_EMBEDDER, Embedder, check_embedder, get_embedder
from retriever.embed import embedder_name as name_of_embedder
from retriever.errors import RetrieverError
from retriever.lock import bundle_lock, check_no_stranded_index, holder
from retriever.memory import Base, BaseIndexes, ChunkTable, Lexical, TableLog, log_path, note_head, older_npz
from retriever.okf import concept_hashes, concept_texts
from retriever.store import ChunkStore, chroma_fingerprint, collection_name, default_chroma_path, open_client
from vault2okf.protocol import index_info, state_dir
from vault2okf.protocol.disk import disk_full_message, free_space, is_disk_full
from vault2okf.protocol.index_info import IndexInfo, index_info_path

if TYPE_CHECKING:
    from retriever.chunk import Chunk
    from retriever.encoder import Precision

MAX_TOKENS = 400
MIN_TOKENS = 40
OUT_OF_SPACE = 1 << 20  # free bytes under which a failed write is taken for a full disk
BATCH_ENV = "VAULT2OKF_EMBED_BATCH"  # chunks embedded and stored per write (default 64)


@dataclass(frozen=True)
class IndexResult:
    collection: str
    notes: int
    chunks: int
    added: int
    removed: int
    unchanged: int
    seconds: float
    embedder: str
    notices: tuple[str, ...] = ()  # what the user should know: the question encoder could not be written


def bundle_id(bundle_dir: Path | str) -> str:
    """A short, stable id for a bundle: a hash of its resolved path."""
    return hashlib.sha256(str(Path(bundle_dir).resolve()).encode()).hexdigest()[:12]


def index_bundle(
    bundle_dir: Path | str,
    *,
    embedder_name: str = DEFAULT_EMBEDDER,
    chroma_path: Path | str | None = None,
    chroma_url: str | None = None,
    progress: bool = True,
    device: str = "cpu",
    batch_size: int | None = None,
    precision: Precision | None = None,
) -> IndexResult:
    """Chunk, embed and store every concept of the bundle; only new or changed chunks are embedded.

    Notes completely stored from their current text (same ``note_hash`` and all ``note_chunks`` chunks stored)
    are not even re-chunked, so re-indexing after one edit costs about one note's work, and a run killed at
    any point resumes where it stopped. Holds the bundle lock: one convert or index of a bundle at a time.

    On a CPU the documents go through the bundle's ONNX export (`retriever.export.index_embedder`) at
    ``precision`` (default `export.default_precision`: fp32); another precision than the last index's re-embeds
    every chunk, so one index never mixes vectors of two precisions.
    """
    from retriever.export import default_precision

    batch = batch_size or _batch_from_env()  # a bad value fails before the model loads
    check_embedder(embedder_name)  # an unknown name or missing BGE-M3 weights fail before the bundle is locked
    wanted = precision or default_precision(embedder_name)
    with bundle_lock(bundle_dir, "indexing"):
        check_no_stranded_index(bundle_dir)
        started = time.perf_counter()
        saved = None if chroma_url else _saved_index(bundle_dir, embedder_name, chroma_path)
        note_hashes, names, keys = concept_hashes(Path(bundle_dir), _known(saved))
        heads = None if names is None else {note: note_head(*name) for note, name in names.items()}
        if saved is not None and _precision_of(bundle_dir) not in (None, wanted):
            saved = None  # the stored vectors are of another precision: embed them all again
        if saved is not None and saved.meta.get("note_hashes") == note_hashes:
            done = saved.info
            saved.meta["note_keys"] = keys  # this process's copy (`Kept`): hashes found again need not be again
            _refresh_lexical(bundle_dir, saved, heads, keys)
            notices = _question_encoder(bundle_dir, done, device, wanted)
            seconds = _since(started)
            return IndexResult(
                done.collection, done.notes, done.chunks, 0, 0, done.chunks, seconds, done.embedder, notices
            )
        _check_writable(bundle_dir)
        spec = embedder_name
        try:
            result = _index(
                bundle_dir, note_hashes, spec, chroma_path, chroma_url, progress, device, batch, wanted,
                saved, heads, keys,
            )  # fmt: skip
        except Exception as error:  # chromadb words a full disk its own way ("Error in compaction" ...)
            where = Path(chroma_path) if chroma_path else default_chroma_path(bundle_dir)
            if not is_disk_full(error) and not _out_of_space(where):
                raise
            text = sum(len(title) + len(body) for _, title, body in load_concepts(bundle_dir))
            need = 4 * text + (2 << 20)  # chunk texts, vectors, Chroma's own files and the saved table, about
            raise RetrieverError(disk_full_message(where, need, "this index")) from None
        notices = (*result.notices, *_question_encoder(bundle_dir, read_index_info(bundle_dir), device, wanted))
        return replace(result, seconds=_since(started), notices=notices)


@dataclass(frozen=True)
class Warmed:
    """What `warm_index` opened, held for the indexes that follow in this process (`watch --index`)."""

    store: ChunkStore  # the recorded collection, its vector index loaded
    embedder: Embedder  # the document embedder, run once
    chunks: int  # the chunks the collection held


def warm_index(
    bundle_dir: Path | str,
    *,
    embedder_name: str = DEFAULT_EMBEDDER,
    device: str = "cpu",
    chroma_path: Path | str | None = None,
    precision: Precision | None = None,
) -> Warmed | None:
    """Open now what the next `index_bundle` of this bundle with these options would open at its first edit: the
    saved chunk table kept in memory (`Kept`), the document embedder loaded and run once, the Chroma client and the
    recorded collection opened, its metadata read and its vector index loaded by one query. `watch --index` calls
    it after its first index, so that its first edit costs what the next ones do (opening Chroma's index of 70k
    chunks took some 7 s at the first edit). Reads only (Chroma is queried, nothing is written or exported); None
    where there is nothing to warm: no local index of this embedder whose saved table matches Chroma, or vectors of
    another precision (the next index embeds them all again anyway)."""
    from retriever.export import default_precision, index_embedder

    wanted = precision or default_precision(embedder_name)
    with bundle_lock(bundle_dir, "indexing"):
        saved = _saved_index(bundle_dir, embedder_name, chroma_path)
        if saved is None or (device == "cpu" and _precision_of(bundle_dir) != wanted):
            return None
        _KEPT.keep(table_path(bundle_dir, saved.info.collection), (saved.table, saved.meta))
        client = open_client(bundle_dir, path=chroma_path)
        embedder, _ = index_embedder(bundle_dir, embedder_name, device, wanted)
        probe = embedder.embed_documents(["a note edited under watch"])
        store = ChunkStore(client, saved.info.collection)
        if saved.table.ids:
            store.metadata_of(saved.table.ids[:1])
            store.query(probe[0], 1)
        return Warmed(store, embedder, store.count())


def _precision_of(bundle_dir: Path | str) -> Precision | None:
    """The precision of the bundle's current export (what its stored vectors were embedded at, on a CPU)."""
    from retriever.encoder import encoder_dir, read_settings

    settings = read_settings(encoder_dir(bundle_dir))
    return settings.precision if settings is not None else None


def _out_of_space(path: Path) -> bool:
    """Whether the file system holding ``path`` is (nearly) full: chromadb sometimes reports a full disk with no
    word of it ("Error in compaction: Failed to apply logs to the metadata segment")."""
    free = free_space(path)
    return free is not None and free < OUT_OF_SPACE


def _question_encoder(bundle_dir: Path | str, info: IndexInfo, device: str, precision: Precision) -> tuple[str, ...]:
    """Write the question encoder (`retriever.export`) unless a current one is there; the model loads only then
    (once: `get_embedder` caches it, so after embedding it is the model that embedded the documents)."""
    from retriever.export import ensure_encoder

    spec = info.embedder_spec
    try:
        notice = ensure_encoder(bundle_dir, info.embedder, spec, lambda: get_embedder(spec, device=device), precision)
    except OSError as error:  # the index is written; only the encoder is not
        notice = f"no question encoder written ({error}): search and ask will load FlagEmbedding"
    return (notice,) if notice else ()


def _check_writable(bundle_dir: Path | str) -> None:
    """Indexing writes beside the bundle's docs (.vault2okf/): a read-only bundle is said so, in one line."""
    state = state_dir(bundle_dir)
    where = state if state.is_dir() else Path(bundle_dir)
    if not os.access(where, os.W_OK):
        raise RetrieverError(
            f"{bundle_dir} is read-only ({where} cannot be written): index a writable copy of the bundle; "
            "search, ask, chat, links, mcp and eval work on a read-only bundle that was indexed before"
        )


def _index(
    bundle_dir: Path | str,
    note_hashes: dict[str, str],
    embedder_spec: str,
    chroma_path: Path | str | None,
    chroma_url: str | None,
    progress: bool,
    device: str,
    batch_size: int,
    precision: Precision,
    saved: Saved | None = None,
    heads: dict[str, str] | None = None,
    keys: dict[str, str] | None = None,
) -> IndexResult:
    from retriever.export import index_embedder

    started = time.perf_counter()
    client = open_client(bundle_dir, path=chroma_path, url=chroma_url)  # a bad URL or server fails before the model
    before = _precision_of(bundle_dir)
    embedder, notice = index_embedder(bundle_dir, embedder_spec, device, precision)
    name = _reuse_collection(bundle_dir, embedder.name) or collection_name(bundle_id(bundle_dir), embedder.name)
    if before not in (None, precision) and device == "cpu":  # vectors of another precision: start the collection anew
        with contextlib.suppress(Exception):  # chromadb's NotFoundError (no such collection) has no public base
            client.delete_collection(name)
        saved = None
    if saved is not None and saved.info.collection != name:
        saved = None
    store = ChunkStore(client, name)
    edit = _edit(saved, note_hashes, store) if saved is not None else None
    stored = store.stored_metadata() if edit is None else edit.stored
    keep = store.unchanged_notes(note_hashes, stored) if edit is None else edit.keep
    chunks = chunk_concepts(load_concepts(bundle_dir, [note for note in note_hashes if note not in keep]))
    stats = store.sync(
        chunks,
        embedder,
        batch_size=batch_size,
        progress=progress,
        keep_notes=keep,
        note_hashes=note_hashes,
        stored=stored,
    )
    if edit is None:
        kept = sum(1 for meta in stored.values() if meta.get("note_id") in keep)
    else:  # ``stored`` holds only the edited notes' chunks: the kept ones are counted in the saved table
        kept = edit.kept_chunks
        stats = replace(stats, unchanged=stats.unchanged + kept)
    total = len(chunks) + kept
    info = _info(embedder, name, chroma_path, chroma_url, len(note_hashes), total)
    if not chroma_url:
        _save_table(bundle_dir, info, store, note_hashes, edit, heads, keys)
    _write_info(bundle_dir, info)
    seconds = _since(started)
    notices = (notice,) if notice else ()
    return IndexResult(
        name, len(note_hashes), total, stats.added, stats.removed, stats.unchanged, seconds, embedder.name, notices
    )


@dataclass(frozen=True)
class Saved:
    """The recorded index with its saved table and the table's meta, while Chroma holds exactly what the table
    was copied from (`_saved_index`)."""

    info: IndexInfo
    table: ChunkTable
    meta: dict[str, Any]


@dataclass(frozen=True)
class Edit:
    """What an index after an edit does, worked out from the saved table instead of every chunk's metadata in
    Chroma: the notes it keeps (their hash is the one the table was saved with), the stored metadata of the other
    notes' chunks (edited, or gone from the bundle), and the saved table to patch."""

    saved: Saved
    keep: set[str]
    changed: frozenset[str]  # notes whose chunks are replaced: edited, new or gone
    stored: dict[str, dict[str, Any]]
    kept_chunks: int


def _edit(saved: Saved, note_hashes: dict[str, str], store: ChunkStore) -> Edit:
    """The edit since ``saved``: a note is kept when the table was saved with its current hash (the table is saved
    only after a complete index, so each such note is completely stored)."""
    recorded = saved.meta.get("note_hashes")
    recorded = recorded if isinstance(recorded, dict) else {}
    keep = {note for note, digest in note_hashes.items() if recorded.get(note) == digest}
    rows_of = saved.table.rows_of
    changed = frozenset(note for note in (*note_hashes, *rows_of) if note not in keep)
    stored = store.metadata_of([saved.table.ids[row] for note in changed for row in rows_of.get(note, ())])
    kept_chunks = sum(len(rows_of.get(note, ())) for note in keep)
    return Edit(saved, keep, changed, stored, kept_chunks)


def _known(saved: Saved | None) -> dict[str, tuple[str, str]] | None:
    """Each note's key and hash as the saved table recorded them (`okf.concept_hashes` hashes only the others)."""
    if saved is None:
        return None
    keys, hashes = saved.meta.get("note_keys"), saved.meta.get("note_hashes")
    if not isinstance(keys, dict) or not isinstance(hashes, dict):
        return None
    return {note: (key, hashes[note]) for note, key in keys.items() if note in hashes}


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)


def table_path(bundle_dir: Path | str, collection: str) -> Path:
    return state_dir(bundle_dir) / f"table-{collection}.npz"


def lexical_path(bundle_dir: Path | str, collection: str) -> Path:
    """The BM25 indexes of the saved table (`memory.Lexical.save`), stamped like it."""
    return state_dir(bundle_dir) / f"lexical-{collection}.npz"


def _chroma_dir(bundle_dir: Path | str, chroma_path: Path | str | None) -> Path:
    return Path(chroma_path).resolve() if chroma_path else default_chroma_path(bundle_dir).resolve()


IN_BUNDLE = "<bundle>/.vault2okf/chroma"  # a saved table's Chroma folder when it is the bundle's own


def _chroma_key(bundle_dir: Path | str, chroma_path: Path | str | None) -> str:
    """The Chroma folder as a saved table records it: the bundle's own by that name, so a bundle that is moved,
    copied or mounted elsewhere (read-only, say) still reads its saved table; any other by its path."""
    return IN_BUNDLE if not chroma_path else str(_chroma_dir(bundle_dir, chroma_path))


COMPACT_ROWS = 64  # the saved table is written whole when the chunks changed since it exceed 1 in this many ...
COMPACT_MIN = 256  # ... and this many
COMPACT_LOG = 8  # or its log exceeds 1 in this many of its bytes


def _save_table(
    bundle_dir: Path | str,
    info: IndexInfo,
    store: ChunkStore,
    note_hashes: dict[str, str],
    edit: Edit | None = None,
    heads: dict[str, str] | None = None,
    keys: dict[str, str] | None = None,
) -> None:
    """Save the collection as it is now, stamped with its fingerprint, taken before the copy and checked after it
    (a write in between leaves no table: the next `index` writes one). After an ``edit``, the saved table is patched
    with the edited notes' chunks and the edit appended to its log (`memory.TableLog`), its BM25 indexes left as
    they are (those of the table's base: a search scores the changed documents apart, `bm25.Parted`), until the
    changes since the base are many (``COMPACT_*``): then both are written whole, the BM25 indexes made from the
    base's with the changed documents read again."""
    chroma_dir = _chroma_dir(bundle_dir, info.chroma_path)
    before = chroma_fingerprint(chroma_dir, info.collection)
    if edit is not None and before is not None:
        table = edit.saved.table.patched(edit.changed, store.note_rows(sorted(edit.changed)))
        if chroma_fingerprint(chroma_dir, info.collection) != before or len(table.ids) != info.chunks:
            _remove_table(bundle_dir, info)  # a write in between: no table (the next `index` writes one)
            return
        if edit.saved.table.base is not None:
            table.stamp, table.base = before, edit.saved.table.base.since(edit.changed)
            if _append(bundle_dir, info, edit, table, note_hashes, heads, keys):
                return
            earlier = _earlier_base(bundle_dir, info, table.base.generation) if heads is not None else None
            _write_base(bundle_dir, info, table, before, note_hashes, heads, keys, earlier)
            return
    _remove_table(bundle_dir, info)  # a table of an older state must never outlive it, nor its BM25 indexes
    if before is None:
        return
    table = ChunkTable.from_store(store)
    if chroma_fingerprint(chroma_dir, info.collection) != before or len(table.ids) != info.chunks:
        return
    _write_base(bundle_dir, info, table, before, note_hashes, heads, keys, None)


def _remove_table(bundle_dir: Path | str, info: IndexInfo) -> None:
    path = table_path(bundle_dir, info.collection)
    path.unlink(missing_ok=True)
    log_path(path).unlink(missing_ok=True)
    lexical_path(bundle_dir, info.collection).unlink(missing_ok=True)


def _append(
    bundle_dir: Path | str,
    info: IndexInfo,
    edit: Edit,
    table: ChunkTable,
    note_hashes: dict[str, str],
    heads: dict[str, str] | None,
    keys: dict[str, str] | None,
) -> bool:
    """Append ``edit`` to the saved table's log, unless the changes since its base are many or its BM25 indexes are
    not the base's (False: write it whole)."""
    base, meta = table.base, edit.saved.meta
    assert base is not None
    changed_rows = sum(len(table.rows_of.get(note, ())) for note in base.changed)
    log_size, base_size = int(meta.get("log_size", 0)), int(meta.get("base_size", 0))
    if changed_rows > max(COMPACT_MIN, len(table.ids) // COMPACT_ROWS) or log_size * COMPACT_LOG > base_size:
        return False
    lexical = lexical_path(bundle_dir, info.collection)
    if heads is not None and not Lexical.saved_in(lexical, base.generation):
        return False
    path = table_path(bundle_dir, info.collection)
    log = TableLog(log_path(path), base.generation)
    log.size = log_size
    recorded = meta.get("note_keys")
    known: dict[str, str] = recorded if isinstance(recorded, dict) else {}
    moved = {note: key for note, key in (keys or {}).items() if known.get(note) != key}
    head = {
        "fingerprint": table.stamp, "info": asdict(info), "note_keys": moved,
        "note_hashes": {note: note_hashes[note] for note in edit.changed if note in note_hashes},
    }  # fmt: skip
    seq = int(meta.get("log_records", 0)) + 1
    log.append(head, table, edit.changed, seq)
    kept = {
        **meta, "fingerprint": table.stamp, "info": asdict(info), "note_hashes": note_hashes,
        "note_keys": keys or {}, "log_size": log.size, "log_records": seq,
    }  # fmt: skip
    _KEPT.keep(path, (table, kept))
    return True


def _earlier_base(bundle_dir: Path | str, info: IndexInfo, generation: str) -> BaseIndexes | None:
    """The BM25 indexes saved for base ``generation``: as this process wrote them, else None (`Lexical` reads the
    file)."""
    kept = _KEPT.get(lexical_path(bundle_dir, info.collection))
    return kept if isinstance(kept, BaseIndexes) and kept.generation == generation else None


def _write_base(
    bundle_dir: Path | str,
    info: IndexInfo,
    table: ChunkTable,
    fingerprint: str,
    note_hashes: dict[str, str],
    heads: dict[str, str] | None,
    keys: dict[str, str] | None,
    earlier: BaseIndexes | None,
) -> None:
    """Write ``table`` whole as a new base (a new generation: its log starts empty) and the BM25 indexes of it
    (made from those of its old base when ``table.base`` names one whose indexes are saved, else built)."""
    path = table_path(bundle_dir, info.collection)
    lexical = lexical_path(bundle_dir, info.collection)
    kinds = None
    if heads is not None and table.base is not None:
        kinds = Lexical(table, None, lexical, heads=heads, base=earlier).compacted()
    generation = uuid.uuid4().hex
    table.stamp, table.base = fingerprint, Base(generation, table.note_ids)
    meta = {
        "fingerprint": fingerprint, "chroma_dir": _chroma_key(bundle_dir, info.chroma_path), "info": asdict(info),
        "note_hashes": note_hashes, "note_keys": keys or {}, "generation": generation,
    }  # fmt: skip
    lexical.unlink(missing_ok=True)  # the old base's: never beside the new one
    table.save(path, meta)
    log_path(path).unlink(missing_ok=True)  # of the old base (a reader ignores it: another generation)
    _KEPT.keep(path, (table, {**meta, "base_size": path.stat().st_size, "log_size": 0, "log_records": 0}))
    if heads is None:  # (a hand-made okf.duckdb without titles and aliases) the first search saves them
        return
    fresh = Lexical(table, None, heads=heads)
    if kinds is not None:
        fresh.__dict__.update(kinds)
    saved = fresh.save(lexical)
    if saved is not None:
        _KEPT.keep(lexical, saved)


def _refresh_lexical(
    bundle_dir: Path | str, saved: Saved, heads: dict[str, str] | None, keys: dict[str, str] | None
) -> None:
    """An index with nothing to embed: unless the saved BM25 indexes are those of the table's base (written by an
    older version, or lost), the table is written again with them while the bundle can be written (a search would
    build them from every note). Titles or aliases edited alone need nothing: a search scores those notes apart."""
    base = saved.table.base
    path = lexical_path(bundle_dir, saved.info.collection)
    if heads is None or base is None or saved.table.stamp is None or not os.access(path.parent, os.W_OK):
        return
    if Lexical.saved_in(path, base.generation):
        return
    hashes = saved.meta.get("note_hashes")
    if not isinstance(hashes, dict):
        return
    with contextlib.suppress(OSError):  # a read-only bundle: the search builds them
        _write_base(bundle_dir, saved.info, saved.table, saved.table.stamp, hashes, heads, keys, None)


def _kept_table(path: Path) -> tuple[ChunkTable, dict[str, Any]] | None:
    kept = _KEPT.get(path)
    if isinstance(kept, tuple) and isinstance(kept[0], ChunkTable) and isinstance(kept[1], dict):
        return kept[0], kept[1]
    return None


class Kept:
    """What this process last wrote of a bundle's index (the saved table, the BM25 indexes), by the identity of the
    file it went to (device, inode, size, modification time): `watch --index` indexes after every edit and would
    otherwise read back, and prove, the files it wrote a moment before (a 13,000-note table is some 60 MB). A file
    written since, by anyone, is another identity: read again. The newest ``KEEP`` files are kept."""

    KEEP = 4

    def __init__(self) -> None:
        self._kept: dict[Path, tuple[tuple[int, ...], object]] = {}

    def keep(self, path: Path, value: object) -> None:
        identity = _identity(path)
        self._kept.pop(path, None)
        if identity is not None:
            self._kept[path] = (identity, value)
        while len(self._kept) > self.KEEP:
            del self._kept[next(iter(self._kept))]

    def get(self, path: Path) -> object | None:
        found = self._kept.get(path)
        return found[1] if found is not None and found[0] == _identity(path) else None


def _identity(path: Path) -> tuple[int, ...] | None:
    """The file's identity, and its log's (`memory.TableLog`) when it has one."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    try:
        log = os.stat(log_path(path))
        logged: tuple[int, ...] = (log.st_ino, log.st_size, log.st_mtime_ns)
    except OSError:
        logged = ()
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, *logged)


_KEPT = Kept()


def _cached_table(
    bundle_dir: Path | str, info: IndexInfo, notices: list[str] | None = None, *, kept: bool = False
) -> tuple[ChunkTable, dict[str, Any]] | None:
    """The saved table of the recorded index while Chroma still holds exactly what it was copied from. A damaged
    one (edited, cut, a special file: `retriever.cachefile`) is a line in ``notices`` and read as missing. With
    ``kept`` (`index` alone, which never hands it on), the table as this process wrote it when the file is still
    the one it wrote (`Kept`)."""
    if info.chroma_url:
        return None
    path = table_path(bundle_dir, info.collection)
    try:
        loaded = _kept_table(path) if kept else None
        if loaded is None:
            loaded = ChunkTable.load(path, size_limit(Path(bundle_dir)))
    except CacheDamaged as damage:
        if notices is not None:
            notices.append(f"the saved chunk table was damaged ({damage}): read from Chroma and saved again")
        return None
    if loaded is None:
        return None
    chroma_dir = _chroma_dir(bundle_dir, info.chroma_path)
    table, meta = loaded
    saved = meta.get("info", {})
    same_index = (saved.get("collection"), saved.get("embedder_spec")) == (info.collection, info.embedder_spec)
    recorded = meta.get("chroma_dir")  # tables saved before IN_BUNDLE recorded the absolute path
    if not same_index or recorded not in (_chroma_key(bundle_dir, info.chroma_path), str(chroma_dir)):
        return None
    if meta.get("fingerprint") != chroma_fingerprint(chroma_dir, info.collection):
        return None
    return table, meta


def _saved_index(bundle_dir: Path | str, spec: str, chroma_path: Path | str | None) -> Saved | None:
    """The recorded index with its saved table when it was built by this embedder into this Chroma folder and
    Chroma still holds what it held then: with the same note hashes, nothing to embed, remove or refresh; after an
    edit, what to patch."""
    try:
        info = read_index_info(bundle_dir)
    except RetrieverError:
        return None
    wanted_path = str(Path(chroma_path).resolve()) if chroma_path else None
    if info.chroma_url or info.chroma_path != wanted_path or info.embedder != name_of_embedder(spec):
        return None
    if (info.max_tokens, info.min_tokens) != (MAX_TOKENS, MIN_TOKENS):
        return None
    cached = _cached_table(bundle_dir, info, kept=True)
    if cached is None or cached[1].get("chroma_dir") != _chroma_key(bundle_dir, info.chroma_path):
        return None  # none, or saved before IN_BUNDLE: saved again, so the bundle can move
    return Saved(info, *cached)


def _batch_from_env() -> int:
    value = os.environ.get(BATCH_ENV, "64")
    if not value.isdigit() or int(value) < 1:
        raise RetrieverError(f"{BATCH_ENV}={value!r} is not a positive whole number of chunks; unset it or use 64.")
    return int(value)


def note_hash(title: str, body: str) -> str:
    """What a note's chunks are made from: its title and body (`okf.concept_hashes` works it out in DuckDB)."""
    return hashlib.sha256(f"{title}\0{body}".encode()).hexdigest()


def _reuse_collection(bundle_dir: Path | str, embedder_name: str) -> str | None:
    """The collection a previous index of this bundle used with this embedder, so a moved bundle keeps its index."""
    try:
        info = read_index_info(bundle_dir)
    except RetrieverError:
        return None
    return info.collection if info.embedder == embedder_name else None


def load_concepts(bundle_dir: Path | str, ids: Collection[str] | None = None) -> list[tuple[str, str, str]]:
    """(id, title, body) of every concept (with ``ids``, of those), ordered by id (read-only, schema checked:
    `retriever.okf`)."""
    return [(c.id, c.title, c.body) for c in concept_texts(Path(bundle_dir), ids)]


def chunk_concepts(concepts: list[tuple[str, str, str]]) -> list[Chunk]:
    from retriever.chunk import chunk_note  # markdown-it: index work, not a search's

    return [
        chunk
        for cid, title, body in concepts
        for chunk in chunk_note(cid, title, body, max_tokens=MAX_TOKENS, min_tokens=MIN_TOKENS)
    ]


def _info(
    embedder: Embedder,
    name: str,
    chroma_path: Path | str | None,
    chroma_url: str | None,
    notes: int,
    chunks: int,
) -> IndexInfo:
    path = str(Path(chroma_path).resolve()) if chroma_path else None
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return IndexInfo(embedder.name, embedder.spec, name, path, chroma_url, MAX_TOKENS, MIN_TOKENS, notes, chunks, now)


def _write_info(bundle_dir: Path | str, info: IndexInfo) -> None:
    path = index_info_path(bundle_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f"{path.name}.part-{os.getpid()}")
    part.write_text(json.dumps(asdict(info), indent=2) + "\n", encoding="utf-8")
    os.replace(part, path)  # a reader, or a run killed here, sees the old file or the new one, never half of one


def read_index_info(bundle_dir: Path | str) -> IndexInfo:
    """What the last `vault2okf index` recorded; RetrieverError when the bundle was never indexed."""
    return index_info.read(bundle_dir, error=RetrieverError)


def open_table(
    bundle_dir: Path | str, *, chroma_url: str | None = None, notices: list[str] | None = None
) -> tuple[IndexInfo, ChunkTable, ChunkStore | None]:
    """The recorded index's chunk table: the saved copy while it matches Chroma (no store then, and chromadb is
    never imported), else read from the Chroma collection (and that store). A damaged saved copy is a line in
    ``notices``, and the table read from Chroma is saved again (`resave_table`)."""
    info = read_index_info(bundle_dir)
    damaged: list[str] = []
    if not chroma_url or chroma_url == info.chroma_url:
        cached = _cached_table(bundle_dir, info, damaged)
        if notices is not None:
            notices.extend(damaged)
        if cached is not None:
            return info, cached[0], None
    try:
        client = open_client(bundle_dir, path=info.chroma_path, url=chroma_url or info.chroma_url)
        store = ChunkStore(client, info.collection)
    except Exception as error:  # chromadb's InternalError: Chroma writes its database even to read it
        if "readonly" not in str(error).lower().replace("-", "").replace(" ", ""):
            raise
        raise RetrieverError(
            f"{bundle_dir} is read-only and its saved chunk table is missing or stale, so its Chroma index would "
            f"have to be opened for writing: run `vault2okf index {bundle_dir}` once on a writable copy"
        ) from None
    if info.chunks and not store.count():
        raise RetrieverError(f"Collection {info.collection} is empty: run `vault2okf index {bundle_dir}` again.")
    table = ChunkTable.from_store(store)
    if damaged or older_npz(table_path(bundle_dir, info.collection)):  # damaged, or of an older vault2okf
        resave_table(bundle_dir, info, store, table)
    return info, table, store


def resave_table(bundle_dir: Path | str, info: IndexInfo, store: ChunkStore, table: ChunkTable) -> None:
    """Save again the table a damaged copy stood for, read from Chroma: stamped as `index` stamps it, with the
    note hashes Chroma's chunks carry (what they were embedded from), while the collection holds exactly what
    the last complete `index` recorded and no `index` runs. Nothing when the bundle cannot be written."""
    running = holder(bundle_dir)
    if len(table.ids) != info.chunks or (running and running[1] == "indexing"):
        return
    hashes = {meta.get("note_id"): meta.get("note_hash") for meta in store.stored_metadata().values()}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in hashes.items()):
        return
    try:
        _save_table(bundle_dir, info, store, hashes)  # type: ignore[arg-type]
    except OSError:
        return


def index_notices(bundle_dir: Path | str, info: IndexInfo, table: ChunkTable, store: ChunkStore | None) -> list[str]:
    """What a search should say about an index read from Chroma (its saved copy did not match): that an `index`
    is rewriting it now, or that it does not hold what its last complete run recorded (a run was killed)."""
    if store is None:
        return []  # the saved table: exactly what the last complete run stored
    running = holder(bundle_dir)
    if running and running[1] == "indexing":
        return [
            f"vault2okf index is updating this bundle's index (pid {running[0]}): these results come from the "
            "index as it stands now, part old and part new; search again when it finishes"
        ]
    if len(table.ids) != info.chunks:
        return [
            f"the index holds {len(table.ids)} chunks where its last complete run stored {info.chunks} (an index "
            f"was interrupted): run `vault2okf index {bundle_dir}` to complete it"
        ]
    return []


def open_index(
    bundle_dir: Path | str, *, chroma_url: str | None = None, device: str = "cpu"
) -> tuple[IndexInfo, ChunkStore, Embedder]:
    """The recorded index's store and the embedder it was built with, ready to query."""
    info = read_index_info(bundle_dir)
    client = open_client(bundle_dir, path=info.chroma_path, url=chroma_url or info.chroma_url)
    store = ChunkStore(client, info.collection)
    if info.chunks and not store.count():
        raise RetrieverError(f"Collection {info.collection} is empty: run `vault2okf index {bundle_dir}` again.")
    return info, store, get_embedder(info.embedder_spec, device=device)
