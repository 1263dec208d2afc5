"""``okf.duckdb``: concepts and links, with a numbered, versioned schema (docs/ARCHITECTURE.md)."""

from __future__ import annotations

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


def _insert(con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str], rows: Sequence[Any]) -> None:
    """All rows in one statement: one list per column, unnested side by side."""
    if not rows:
        return
    placeholders = ", ".join(f"unnest(${i + 1})" for i in range(len(columns)))
    column_lists = [[_value(getattr(row, col)) for row in rows] for col in columns]
    con.execute(f"INSERT INTO {table} ({', '.join(columns)}) SELECT {placeholders}", column_lists)


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
