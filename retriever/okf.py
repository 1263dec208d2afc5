"""The consumer's one way to read a bundle: ``okf.duckdb`` opened read-only, its schema version checked.

The producer (``vault2okf/db.py``) writes ``meta.schema_version``; the retriever reads the file, never the
producer's code (imports go one way), so the version it understands is written down here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retriever.errors import RetrieverError
from retriever.filters import note_date
from vault2okf.protocol import DATABASE, SCHEMA_VERSION, not_a_folder


@dataclass(frozen=True)
class ConceptText:
    """What a concept's chunks are made from."""

    id: str
    title: str
    body: str


def check_bundle(bundle: Path) -> Path:
    """The path of the bundle's ``okf.duckdb``; an error that says how to make one when there is none."""
    if not bundle.exists():
        raise RetrieverError(f"{bundle} does not exist: give a bundle written by `vault2okf convert VAULT -o BUNDLE`")
    if not_a_folder(bundle):
        raise RetrieverError(not_a_folder(bundle))
    path = bundle / DATABASE
    if not path.is_file():
        raise RetrieverError(f"no {DATABASE} in {bundle}: run `vault2okf convert VAULT -o {bundle}` first")
    return path


@contextmanager
def read_bundle(bundle: Path) -> Iterator[Any]:
    """A read-only DuckDB connection to the bundle, after checking that its schema is one this code reads."""
    import duckdb

    path = check_bundle(bundle)
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as e:
        raise RetrieverError(f"{path} cannot be opened ({e}): run `vault2okf convert VAULT -o {bundle}` again") from e
    try:
        _check_schema(con, bundle)
        yield con
    finally:
        con.close()


def _check_schema(con: Any, bundle: Path) -> None:
    import duckdb

    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except duckdb.Error:
        row = None
    version = int(row[0]) if row and str(row[0]).isdigit() else None
    if version == SCHEMA_VERSION:
        return
    if version is not None and version > SCHEMA_VERSION:
        raise RetrieverError(
            f"{bundle / DATABASE} has schema {version}, newer than the {SCHEMA_VERSION} this vault2okf reads: "
            "upgrade vault2okf"
        )
    raise RetrieverError(
        f"{bundle / DATABASE} has schema {version if version is not None else 'unknown'}, older than the "
        f"{SCHEMA_VERSION} this vault2okf reads: re-convert it with `vault2okf convert VAULT -o {bundle}`"
    )


# A concept's title as its chunks start (its file name when empty) and what `retriever.index.note_hash` hashes: the
# sha256 of that title, a NUL and the body, worked out by DuckDB (no note's text crosses into Python)
_TITLE = "CASE WHEN title = '' THEN regexp_extract(id, '[^/]*$') ELSE title END"
_NOTE_HASH = f"sha256({_TITLE} || chr(0) || body)"

Names = dict[str, tuple[str, tuple[str, ...]]]  # concept id -> (title, aliases), as the note graph holds them


def concept_texts(bundle: Path, ids: Collection[str] | None = None) -> list[ConceptText]:
    """Every concept's id, title (its file name when empty) and body, ordered by id; with ``ids``, those concepts'."""
    with read_bundle(bundle) as con:
        if ids is None:
            rows = con.execute("SELECT id, title, body FROM concepts ORDER BY id").fetchall()
        else:
            query = "SELECT id, title, body FROM concepts WHERE id IN (SELECT unnest(?::VARCHAR[])) ORDER BY id"
            rows = con.execute(query, [sorted(ids)]).fetchall()
    return [ConceptText(cid, title or cid.rsplit("/", 1)[-1], body or "") for cid, title, body in rows]


# What a concept's note hash is made from changes only with its key: the sha256 of its doc's bytes (the convert's
# ``content_hash``: the doc holds the title and the body) and the body's length in bytes (the doc ends the body
# with a newline it may lack)
_KEY = "content_hash || ':' || strlen(body)"
_MOST_BY_ID = 4  # hashing more than 1 in this many notes (and 64) by id costs more than hashing all


def concept_hashes(
    bundle: Path, known: Mapping[str, tuple[str, str]] | None = None
) -> tuple[dict[str, str], Names | None, dict[str, str]]:
    """Every concept's note hash by id; its title and aliases as the note graph holds them (``graph_rows``) without
    its links (None for a database without them: a hand-made one); and its key (``_KEY``; none in such a database).

    With ``known`` (id -> (key, note hash), as an earlier call found them), a concept whose key is the same keeps
    its hash, and only the others are hashed: an index after one edit hashes one note, not the vault."""
    import duckdb

    with read_bundle(bundle) as con:
        try:
            rows = con.execute(f"SELECT id, {_KEY}, title, aliases FROM concepts ORDER BY id").fetchall()
        except duckdb.Error:
            return _hashes_of(con, None), _names_of(con), {}
        keys = {cid: key for cid, key, _, _ in rows}
        known = known or {}
        todo = [cid for cid, key in keys.items() if cid not in known or known[cid][0] != key]
        fresh = _hashes_of(con, todo if len(todo) <= max(64, len(keys) // _MOST_BY_ID) else None)
    hashes = {cid: fresh[cid] if cid in fresh else known[cid][1] for cid in keys}
    return hashes, {cid: (title, tuple(aliases)) for cid, _, title, aliases in rows}, keys


def _hashes_of(con: Any, ids: list[str] | None) -> dict[str, str]:
    """The note hash of every concept (with ``ids``, of those)."""
    if ids is None:
        return dict(con.execute(f"SELECT id, {_NOTE_HASH} FROM concepts ORDER BY id").fetchall())
    if not ids:
        return {}
    query = f"SELECT id, {_NOTE_HASH} FROM concepts WHERE id IN (SELECT unnest(?::VARCHAR[]))"
    return dict(con.execute(query, [ids]).fetchall())


def _names_of(con: Any) -> Names | None:
    import duckdb

    try:
        rows = con.execute("SELECT id, title, aliases FROM concepts").fetchall()
    except duckdb.Error:
        return None
    return {cid: (title, tuple(aliases)) for cid, title, aliases in rows}


def graph_rows(bundle: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Concept rows for the note graph (``retriever.graph.Concept``'s fields: the last is the note's date, from
    ``note_date``), and every resolved link between two different notes with its sentence."""
    with read_bundle(bundle) as con:
        rows = con.execute(
            "SELECT id, title, vault_path, doc_path, type, aliases, session_number, session_date, tags, timestamp, "
            "frontmatter FROM concepts"
        ).fetchall()
        edges = con.execute(
            "SELECT l.source_id, l.target_id, l.context, s.title, t.title FROM links l "
            "JOIN concepts s ON s.id = l.source_id JOIN concepts t ON t.id = l.target_id "
            "WHERE l.target_id IS NOT NULL AND l.target_id <> l.source_id ORDER BY ALL"
        ).fetchall()
    concepts = [(*row[:9], note_date(row[9], row[7], row[10])) for row in rows]
    return concepts, edges


def analytics_rows(bundle: Path) -> list[tuple[str, float, str]]:
    """Each note's id, PageRank and community from ``analytics``; none when the table is missing."""
    import duckdb

    with read_bundle(bundle) as con:
        try:
            return con.execute("SELECT id, pagerank, community FROM analytics ORDER BY id").fetchall()
        except duckdb.CatalogException:
            return []
