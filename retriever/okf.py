"""The consumer's one way to read a bundle: ``okf.duckdb`` opened read-only, its schema version checked.

The producer (``vault2okf/db.py``) writes ``meta.schema_version``; the retriever reads the file, never the
producer's code (imports go one way), so the version it understands is written down here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
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


def concept_hashes(bundle: Path) -> tuple[dict[str, str], Names | None]:
    """Every concept's note hash by id, and its title and aliases as the note graph holds them (``graph_rows``)
    without its links: None for a database without them (a hand-made one)."""
    import duckdb

    with read_bundle(bundle) as con:
        hashes = dict(con.execute(f"SELECT id, {_NOTE_HASH} FROM concepts ORDER BY id").fetchall())
        try:
            rows = con.execute("SELECT id, title, aliases FROM concepts").fetchall()
        except duckdb.Error:
            return hashes, None
    return hashes, {cid: (title, tuple(aliases)) for cid, title, aliases in rows}


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
