"""``okf.duckdb``: concepts, links, unlinked mentions, graph analytics and the sessions view, with a numbered,
versioned schema (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vault2okf.errors import Vault2OkfError
from vault2okf.protocol import database, not_a_folder

if TYPE_CHECKING:
    import duckdb

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
    (
        2,
        """
        CREATE TABLE mentions (
            source_id VARCHAR NOT NULL, target_id VARCHAR NOT NULL, text VARCHAR NOT NULL, line INTEGER NOT NULL,
            heading VARCHAR, count INTEGER NOT NULL
        );
        """,
    ),
    (
        3,
        """
        CREATE TABLE analytics (
            id VARCHAR NOT NULL, pagerank DOUBLE NOT NULL, rank INTEGER NOT NULL, centrality VARCHAR NOT NULL,
            community VARCHAR NOT NULL, in_degree INTEGER NOT NULL, out_degree INTEGER NOT NULL,
            hub BOOLEAN NOT NULL, orphan BOOLEAN NOT NULL
        );
        CREATE VIEW sessions AS
        SELECT id, series, row_number() OVER w AS position, session_date, session_number, lag(id) OVER w AS previous_id,
            lead(id) OVER w AS next_id
        FROM (
            SELECT *, CASE WHEN contains(vault_path, '/') THEN regexp_replace(vault_path, '/[^/]*$', '') ELSE ''
                END AS series
            FROM concepts WHERE session_date IS NOT NULL OR session_number IS NOT NULL
        )
        WINDOW w AS (PARTITION BY series ORDER BY coalesce(session_date, ''), coalesce(session_number, -1), id)
        ORDER BY series, position;
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


@dataclass(frozen=True)
class MentionRow:
    """One row of ``mentions``: ``source_id`` names ``target_id`` ``count`` times without linking it."""

    source_id: str
    target_id: str
    text: str  # the words as written the first time
    line: int  # 1-based line of the first time in the source file
    heading: str | None  # the heading above that line
    count: int


@dataclass(frozen=True)
class AnalyticsRow:
    """One row of ``analytics``: a note's place in the link graph (``vault2okf/analytics.py`` has the rules)."""

    id: str
    pagerank: float
    rank: int  # 1 = the highest PageRank
    centrality: str  # top 1% | top 5% | top 10% | top 25% | top 50% | bottom 50%
    community: str  # id of the community's most central note
    in_degree: int
    out_degree: int
    hub: bool
    orphan: bool


CONCEPT_COLUMNS = tuple(f.name for f in fields(ConceptRow))
LINK_COLUMNS = tuple(f.name for f in fields(LinkRow))
MENTION_COLUMNS = tuple(f.name for f in fields(MentionRow))
ANALYTICS_COLUMNS = tuple(f.name for f in fields(AnalyticsRow))


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


class _Database:
    """What ``DatabaseWriter`` and ``DatabasePatcher`` share: the connection, opened on the first rows."""

    con: duckdb.DuckDBPyConnection | None

    def abort(self) -> None:
        """Close the connection, the file unfinished (the caller removes it)."""
        if self.con is not None:
            self.con.close()
            self.con = None


class DatabaseWriter(_Database):
    """``okf.duckdb`` written a batch of rows at a time (so a big vault's rows are never all in memory): the
    concepts by vault path, then each note's links in the order they were written (docs/ARCHITECTURE.md,
    "okf.duckdb schema"). With ``old``, the rows of the notes ``carried`` (vault paths) are copied from that
    database instead of coming from Python, and ``close`` puts them in their places: the result has the same
    rows in the same order as a full write (a note's links keep their order in ``old``, which was written that
    way). It connects on the first rows, not before (``convert`` forks its workers first)."""

    def __init__(self, path: Path, meta: dict[str, str], old: Path | None = None, carried: Sequence[str] = ()) -> None:
        self.path, self.meta, self.old, self.carried = path, meta, old, list(carried)
        self.con: duckdb.DuckDBPyConnection | None = None
        self.vault_path: dict[str, str] = {}  # concept id -> vault path of the rows from Python (carrying)
        self.ordinal: Counter[str] = Counter()  # a link's place among its note's links (carrying)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self.con is None:
            import duckdb  # here, not at the top: a convert that finds nothing changed needs no database

            con = self.con = duckdb.connect(str(self.path))
            migrate(con)
            for key, value in sorted(self.meta.items()):
                con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])
            if self.old is not None:
                con.execute(f"ATTACH {_quoted(str(self.old))} AS old (READ_ONLY)")
                con.execute("CREATE TEMP TABLE carried AS SELECT unnest($1::VARCHAR[]) AS vault_path", [self.carried])
                con.execute("CREATE TEMP TABLE new_concepts AS SELECT * FROM concepts LIMIT 0")
                con.execute(
                    "CREATE TEMP TABLE new_links AS SELECT *, ''::VARCHAR AS vp, 0::BIGINT AS ord FROM links LIMIT 0"
                )
        return self.con

    def concepts(self, rows: Sequence[ConceptRow]) -> None:
        """The next concepts rows, by vault path."""
        if not rows:
            return
        con = self._connect()
        if self.old is None:
            _insert(con, "concepts", CONCEPT_COLUMNS, rows)
            return
        _insert(con, "new_concepts", CONCEPT_COLUMNS, rows)
        self.vault_path.update((row.id, row.vault_path) for row in rows)

    def links(self, rows: Sequence[LinkRow]) -> None:
        """The next links rows (after every concepts row), each note's in the order they were written."""
        if not rows:
            return
        con = self._connect()
        if self.old is None:
            _insert(con, "links", LINK_COLUMNS, rows)
            return
        places = []
        for row in rows:
            places.append(self.ordinal[row.source_id])
            self.ordinal[row.source_id] += 1
        columns = [*_columns(LINK_COLUMNS, rows), [self.vault_path[r.source_id] for r in rows], places]
        _insert_columns(con, "new_links", (*LINK_COLUMNS, "vp", "ord"), columns)

    def mentions(self, rows: Sequence[MentionRow]) -> None:
        """Every mentions row, in their order (found again each run: none is carried)."""
        if rows:
            _insert(self._connect(), "mentions", MENTION_COLUMNS, rows)

    def analytics(self, rows: Sequence[AnalyticsRow]) -> None:
        """Every analytics row, in the concepts' order (computed again each run over the whole graph)."""
        if rows:
            _insert(self._connect(), "analytics", ANALYTICS_COLUMNS, rows)

    def close(self) -> None:
        """Finish the file (the carried rows put in their places) and close it."""
        con = self._connect()
        try:
            if self.old is not None:
                con.execute(
                    "INSERT INTO concepts SELECT * FROM (SELECT c.* FROM old.concepts c WHERE c.vault_path IN "
                    "(SELECT vault_path FROM carried) UNION ALL SELECT * FROM new_concepts) ORDER BY vault_path"
                )
                con.execute(
                    f"INSERT INTO links SELECT {', '.join(LINK_COLUMNS)} FROM ("
                    "SELECT l.*, c.vault_path AS vp, l.rowid AS ord FROM old.links l JOIN old.concepts c "
                    "ON l.source_id = c.id WHERE c.vault_path IN (SELECT vault_path FROM carried) "
                    "UNION ALL SELECT * FROM new_links) ORDER BY vp, ord"
                )
                con.execute("DETACH old")
        finally:
            self.abort()


# concepts columns a patch never sets: the key, and the lists (DuckDB updates a list column by deleting the row
# and inserting it again, at the end of the table): ``Run`` patches only notes whose tags and aliases are the same
_KEPT_COLUMNS = frozenset({"id", "tags", "aliases"})


class DatabasePatcher(_Database):
    """``okf.duckdb`` for a convert that made again the docs of a few notes of the same vault (the same notes, in
    the same order, each made one with as many links as before): the old file copied, the made notes' concepts
    and links rows updated in place (an update keeps a row where it was, so every table reads in the order a
    full write gives), the mentions and analytics tables, which are made again each run, written anew. The same
    interface as ``DatabaseWriter``; ``Run`` chooses it only where those conditions hold."""

    def __init__(self, path: Path, old: Path) -> None:
        self.path, self.old = path, old
        self.con: duckdb.DuckDBPyConnection | None = None
        self.ordinal: Counter[str] = Counter()  # a link's place among its note's links
        self.rowids: dict[str, list[int]] = {}  # concept id -> its links' rowids, in order

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self.con is None:
            import shutil

            import duckdb

            shutil.copyfile(self.old, self.path)
            self.con = duckdb.connect(str(self.path))
        return self.con

    def concepts(self, rows: Sequence[ConceptRow]) -> None:
        if not rows:
            return
        con = self._connect()
        columns = [c for c in CONCEPT_COLUMNS if c not in _KEPT_COLUMNS]
        sql = f"UPDATE concepts SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?"
        con.executemany(sql, [[*(_value(getattr(r, c)) for c in columns), r.id] for r in rows])

    def links(self, rows: Sequence[LinkRow]) -> None:
        if not rows:
            return
        con = self._connect()
        columns = [c for c in LINK_COLUMNS if c != "source_id"]
        params = []
        for row in rows:
            ids = self.rowids.get(row.source_id)
            if ids is None:
                found = con.execute("SELECT rowid FROM links WHERE source_id = ? ORDER BY rowid", [row.source_id])
                ids = self.rowids[row.source_id] = [r[0] for r in found.fetchall()]
            place = self.ordinal[row.source_id]
            self.ordinal[row.source_id] += 1
            if place >= len(ids):
                raise Vault2OkfError(f"{self.old}: fewer links rows for {row.source_id} than the note has")
            params.append([*(_value(getattr(row, c)) for c in columns), ids[place]])
        con.executemany(f"UPDATE links SET {', '.join(f'{c} = ?' for c in columns)} WHERE rowid = ?", params)

    def mentions(self, rows: Sequence[MentionRow]) -> None:
        self._replace("mentions", MENTION_COLUMNS, rows)

    def analytics(self, rows: Sequence[AnalyticsRow]) -> None:
        self._replace("analytics", ANALYTICS_COLUMNS, rows)

    def _replace(self, table: str, columns: Sequence[str], rows: Sequence[Any]) -> None:
        con = self._connect()
        con.execute(f"DELETE FROM {table}")
        _insert(con, table, columns, rows)

    def close(self) -> None:
        con = self._connect()
        try:
            for source_id, ids in self.rowids.items():
                if self.ordinal[source_id] != len(ids):
                    raise Vault2OkfError(f"{self.old}: more links rows for {source_id} than the note has")
            con.execute("CHECKPOINT")
        finally:
            self.abort()


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
    path = database(bundle)
    if not_a_folder(bundle):
        raise Vault2OkfError(not_a_folder(bundle))
    if not path.is_file():
        raise Vault2OkfError(f"no okf.duckdb in {bundle}: run `vault2okf convert VAULT -o {bundle}` first")
    import duckdb

    con = duckdb.connect(str(path), read_only=read_only)
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None or int(row[0]) > SCHEMA_VERSION:
        con.close()
        raise Vault2OkfError(f"{path} has schema {row and row[0]}; this vault2okf reads up to {SCHEMA_VERSION}")
    return con
