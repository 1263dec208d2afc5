"""The read-only SQL sandbox of the tools: the bundle's ``okf.duckdb`` in a DuckDB instance of its own, attached
``READ_ONLY``, then locked down (no file read or written, no ATTACH, no extensions, no setting changed back).

``Sandbox.select`` runs the tools' own queries, on a connection per thread; ``Sandbox.run`` runs a model's in a
worker process (``sqlworker``): one statement whose parsed type is SELECT, every value capped inside DuckDB
(``capped``), at most ``sql_rows`` + 1 rows, stopped after ``sql_seconds`` and at ``sql_memory_mb``.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import duckdb

from retriever.agent.tools.results import Limits, ToolError, clip
from retriever.agent.tools.sqlworker import QueryCost, SqlWorkers
from retriever.errors import RetrieverError

CONNECTION_CONFIG: dict[str, Any] = {
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "temp_directory": "",  # never spill to disk
    "memory_limit": "1GB",
}
LOCKDOWN = (
    "SET enable_external_access = false",  # from here on: no file read or written, no COPY, ATTACH or INSTALL
    "SET lock_configuration = true",  # and no query can SET it back
)
LIST_ITEMS = 50  # of a list value
_SCALAR_LIST = re.compile(r"^[A-Z_ ]+(?:\(\d+(?:, ?\d+)?\))?\[\]$")  # INTEGER[], DECIMAL(9,2)[], not nested


class Sandbox:
    """The bundle's database, read-only and locked down; thread-safe. The tools' own queries run on a connection
    per thread (cursors of one DuckDB instance: none waits for another); a model's run in worker processes
    (``sqlworker``), where the time and memory caps hold."""

    def __init__(self, path: Path, limits: Limits) -> None:
        self.limits = limits
        self._con = connect(path)
        self._local = threading.local()
        self._workers = SqlWorkers(path, limits)

    def select(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """The rows of one of the tools' own queries."""
        return self._cursor().execute(sql, params or []).fetchall()

    def run(self, query: str) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
        """Columns, their DuckDB types and at most ``sql_rows`` + 1 rows of a model's one SELECT (``run_select``),
        in a worker process: stopped at ``sql_seconds`` (killed if it does not stop) and at ``sql_memory_mb``."""
        if len(query) > self.limits.query_chars:
            raise ToolError(f"the query is {len(query)} characters; the most is {self.limits.query_chars}")
        return self._workers.run(query)

    def last_cost(self) -> QueryCost | None:
        """What this thread's last ``run`` cost its worker (CPU seconds, peak memory)."""
        return self._workers.last_cost()

    def close(self) -> None:
        self._workers.close()
        self._con.close()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._con.cursor()  # a connection of its own to the same locked-down instance
            cursor.execute("USE okf")
            self._local.cursor = cursor
        return cursor


def run_select(con: duckdb.DuckDBPyConnection, query: str, lim: Limits) -> tuple[list[str], list[str], list[Any]]:
    """Columns, their DuckDB types and at most ``sql_rows`` + 1 rows of a model's one SELECT, every value capped
    inside DuckDB (under its memory limit and the timer), so what becomes Python is at most ``sql_rows`` x columns
    x ``cell_chars``: ``SELECT range(20000000)`` is one row. Run by a worker (``sqlworker``) on its connection."""
    statement = one_select(con, query, lim)
    timer = threading.Timer(lim.sql_seconds, con.interrupt)
    timer.start()
    try:
        relation = con.sql(statement)
        if relation is None:
            raise ToolError("the statement returned no rows: write a SELECT")
        columns, types = list(relation.columns), [str(t) for t in relation.types]
        cells = ", ".join(capped(f"c{i}", t, lim.cell_chars) for i, t in enumerate(types))
        names = ", ".join(f"c{i}" for i in range(len(columns)))
        inner = statement.rstrip().rstrip(";")  # on lines of its own: a trailing -- comment ends there
        limited = f"SELECT {cells} FROM (\n{inner}\n) AS t({names}) LIMIT {lim.sql_rows + 1}"
        rows = con.sql(limited).fetchall()
    except duckdb.InterruptException:
        raise ToolError(
            f"the query ran past {lim.sql_seconds:g} s and was stopped: add a WHERE or LIMIT, or join on ids"
        ) from None
    except duckdb.OutOfMemoryException:
        raise ToolError(
            f"the query needed more than the {lim.sql_memory_mb} MB a query may use and was stopped: build smaller "
            "lists, add a WHERE or LIMIT"
        ) from None
    except duckdb.Error as e:
        raise ToolError(sql_error(e)) from None
    finally:
        timer.cancel()
    return columns, types, rows


def one_select(con: duckdb.DuckDBPyConnection, query: str, lim: Limits) -> str:
    """The one SELECT statement ``query`` holds; ToolError for anything else."""
    if len(query) > lim.query_chars:
        raise ToolError(f"the query is {len(query)} characters; the most is {lim.query_chars}")
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as e:
        raise ToolError(sql_error(e)) from None
    if not statements:
        raise ToolError("the query is empty: write one SELECT statement")
    if len(statements) > 1:
        raise ToolError(f"the query holds {len(statements)} statements; send exactly one SELECT")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise ToolError(
            f"only SELECT (or WITH ... SELECT) is allowed, not {kind.name}: the database is read-only; "
            "call schema for tables and columns"
        )
    return statements[0].query


def connect(path: Path, *, worker_memory_mb: int | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB instance of its own with the bundle's file attached read-only, then locked down.

    An instance of its own, so its settings never meet the process's other (default) connections to the file:
    DuckDB refuses a second connection to one file with a different configuration. A worker's (``sqlworker``)
    runs one thread, with half its memory cap as DuckDB's own limit and no temp space at all.
    """
    config = dict(CONNECTION_CONFIG)
    if worker_memory_mb is not None:
        config.update(threads=1, memory_limit=f"{max(worker_memory_mb // 2, 64)}MB", max_temp_directory_size="0B")
    con = duckdb.connect(":memory:", config=config)
    try:
        con.execute("ATTACH ? AS okf (READ_ONLY)", [str(path)])
        con.execute("USE okf")
        for statement in LOCKDOWN:
            con.execute(statement)
    except duckdb.Error as e:
        con.close()
        raise RetrieverError(f"{path} cannot be opened read-only ({e}): convert the bundle again") from e
    return con


def capped(column: str, kind: str, limit: int) -> str:
    """SQL for ``column`` of DuckDB type ``kind`` cut to what ``cell`` shows of it: a string to ``limit`` + 1
    characters, a list to its first 50 items; any other nested value as its text, cut the same way."""
    if kind == "VARCHAR":
        return f"left({column}, {limit + 1})"
    if _SCALAR_LIST.match(kind):
        first = f"list_slice({column}, 1, {LIST_ITEMS})"
        return f"list_transform({first}, lambda x: left(x, {limit + 1}))" if kind == "VARCHAR[]" else first
    nested = ("[" in kind or "(" in kind) and not kind.startswith(("DECIMAL", "ENUM"))  # LIST, STRUCT, MAP, UNION
    if nested or kind in ("JSON", "BLOB"):
        return f"left(CAST({column} AS VARCHAR), {limit + 1})"
    return column


def cell(value: Any, limit: int) -> Any:
    """A value as JSON shows it: strings cut to ``limit``, lists and maps to their first 50 items."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [cell(v, limit) for v in value[:LIST_ITEMS]]
    if isinstance(value, dict):
        return {str(k): cell(v, limit) for k, v in list(value.items())[:LIST_ITEMS]}
    return clip(str(value), limit)


def sql_error(e: Exception) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if isinstance(e, duckdb.PermissionException):
        return f"{first}: only the tables concepts, links, mentions and meta can be read"
    if isinstance(e, duckdb.ParserException):
        return f"SQL syntax error: {first}"
    if isinstance(e, duckdb.CatalogException | duckdb.BinderException):
        return f"{first}; call schema for tables and columns"
    if "read-only" in first:
        return f"{first}: the database is read-only, only SELECT is allowed"
    return first
