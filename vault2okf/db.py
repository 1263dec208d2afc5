"""``okf.duckdb``: concepts and links, with a numbered, versioned schema (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import duckdb

from vault2okf.errors import Vault2OkfError

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
        CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR);
        CREATE TABLE concepts (
            id VARCHAR PRIMARY KEY, vault_path VARCHAR NOT NULL, doc_path VARCHAR NOT NULL,
            type VARCHAR NOT NULL, title VARCHAR NOT NULL, description VARCHAR NOT NULL,
            tags VARCHAR[] NOT NULL, aliases VARCHAR[] NOT NULL, timestamp VARCHAR NOT NULL,
            session_date VARCHAR, session_number INTEGER, body VARCHAR NOT NULL,
            content_hash VARCHAR NOT NULL, frontmatter VARCHAR NOT NULL, frontmatter_error VARCHAR
        );
        CREATE TABLE links (
            source_id VARCHAR NOT NULL, target_id VARCHAR, raw VARCHAR NOT NULL, target VARCHAR NOT NULL,
            kind VARCHAR NOT NULL, anchor VARCHAR, line INTEGER NOT NULL, status VARCHAR NOT NULL,
            context VARCHAR NOT NULL, in_frontmatter BOOLEAN NOT NULL
        );
        """,
    ),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


@dataclass(frozen=True)
class ConceptRow:
    """One row of ``concepts`` (docs/ARCHITECTURE.md has what each column means)."""

    id: str
    vault_path: str
    doc_path: str
    type: str
    title: str
    description: str
    tags: tuple[str, ...]
    aliases: tuple[str, ...]
    timestamp: str
    session_date: str | None
    session_number: int | None
    body: str
    content_hash: str
    frontmatter: str  # JSON text
    frontmatter_error: str | None


@dataclass(frozen=True)
class LinkRow:
    """One row of ``links``: a link as written in ``source_id``, and what it resolved to."""

    source_id: str
    target_id: str | None
    raw: str
    target: str
    kind: str  # link | embed
    anchor: str | None
    line: int
    status: str
    context: str
    in_frontmatter: bool


CONCEPT_COLUMNS = tuple(f.name for f in fields(ConceptRow))
LINK_COLUMNS = tuple(f.name for f in fields(LinkRow))


@dataclass(frozen=True)
class Tables:
    concepts: Sequence[ConceptRow]
    links: Sequence[LinkRow]


def migrate(con: duckdb.DuckDBPyConnection) -> None:
    """Apply every migration newer than the file's ``schema_version``."""
    has_meta = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'").fetchone()
    current = 0
    if has_meta and has_meta[0]:
        row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        current = int(row[0]) if row else 0
    for version, sql in MIGRATIONS:
        if version > current:
            con.execute(sql)
            con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(version)])


def write_database(path: Path, tables: Tables, meta: dict[str, str]) -> None:
    """Create ``path`` (which must not exist) holding the bundle's concepts and links."""
    con = duckdb.connect(str(path))
    try:
        migrate(con)
        for key, value in sorted(meta.items()):
            con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])
        _insert(con, "concepts", CONCEPT_COLUMNS, tables.concepts)
        _insert(con, "links", LINK_COLUMNS, tables.links)
    finally:
        con.close()


def carry_database(path: Path, old: Path, tables: Tables, carried: Sequence[str], meta: dict[str, str]) -> None:
    """Create ``path`` as ``write_database`` would, where the rows of the notes ``carried`` (vault paths) are
    copied from the database ``old`` instead of coming from Python: ``tables`` holds the other notes' rows.
    The result has the same rows in the same order as a full write: concepts by vault path, a note's links in
    the order they were written (their order in ``old``, which was written that way)."""
    con = duckdb.connect(str(path))
    try:
        migrate(con)
        for key, value in sorted(meta.items()):
            con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])
        con.execute(f"ATTACH {_quoted(str(old))} AS old (READ_ONLY)")
        con.execute("CREATE TEMP TABLE carried AS SELECT unnest($1::VARCHAR[]) AS vault_path", [list(carried)])
        con.execute("CREATE TEMP TABLE new_concepts AS SELECT * FROM concepts LIMIT 0")
        con.execute("CREATE TEMP TABLE new_links AS SELECT *, ''::VARCHAR AS vp, 0::BIGINT AS ord FROM links LIMIT 0")
        _insert(con, "new_concepts", CONCEPT_COLUMNS, tables.concepts)
        vault_path = {row.id: row.vault_path for row in tables.concepts}
        ordinal: Counter[str] = Counter()  # a link's place among its note's links
        places = []
        for row in tables.links:
            places.append(ordinal[row.source_id])
            ordinal[row.source_id] += 1
        links = _columns(LINK_COLUMNS, tables.links)
        _insert_columns(con, "new_links", (*LINK_COLUMNS, "vp", "ord"),
                        [*links, [vault_path[r.source_id] for r in tables.links], places])  # fmt: skip
        con.execute(
            "INSERT INTO concepts SELECT * FROM (SELECT c.* FROM old.concepts c WHERE c.vault_path IN "
            "(SELECT vault_path FROM carried) UNION ALL SELECT * FROM new_concepts) ORDER BY vault_path"
        )
        con.execute(
            f"INSERT INTO links SELECT {', '.join(LINK_COLUMNS)} FROM ("
            "SELECT l.*, c.vault_path AS vp, l.rowid AS ord FROM old.links l JOIN old.concepts c ON l.source_id = c.id "
            "WHERE c.vault_path IN (SELECT vault_path FROM carried) UNION ALL SELECT * FROM new_links) ORDER BY vp, ord"
        )
        con.execute("DETACH old")
    finally:
        con.close()


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _insert(con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str], rows: Sequence[Any]) -> None:
    """All rows in one statement: one list per column, unnested side by side."""
    if rows:
        _insert_columns(con, table, columns, _columns(columns, rows))


def _columns(columns: Sequence[str], rows: Sequence[Any]) -> list[list[Any]]:
    return [[_value(getattr(row, col)) for row in rows] for col in columns]


def _insert_columns(
    con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str], column_lists: Sequence[list[Any]]
) -> None:
    """One list per column, unnested side by side."""
    if not column_lists or not column_lists[0]:
        return
    placeholders = ", ".join(f"unnest(${i + 1})" for i in range(len(columns)))
    con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {placeholders}", list(column_lists))


def _value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value  # VARCHAR[] columns take lists


def connect(bundle: Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """Open a bundle's ``okf.duckdb``, checking its schema version."""
    path = bundle / "okf.duckdb"
    if not path.is_file():
        raise Vault2OkfError(f"no okf.duckdb in {bundle}: run `vault2okf convert VAULT -o {bundle}` first")
    con = duckdb.connect(str(path), read_only=read_only)
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None or int(row[0]) > SCHEMA_VERSION:
        con.close()
        raise Vault2OkfError(f"{path} has schema {row and row[0]}; this vault2okf reads up to {SCHEMA_VERSION}")
    return con
