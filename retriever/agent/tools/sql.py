"""``sql``: one read-only SELECT of the model's over ``okf.duckdb``, run in the sandbox, rows and values capped."""

from __future__ import annotations

from typing import Annotated, Any

from retriever.agent.tools.context import ToolContext
from retriever.agent.tools.declare import Arg
from retriever.agent.tools.results import Shown
from retriever.agent.tools.sandbox import cell


def sql(ctx: ToolContext, query: Annotated[str, Arg("One SELECT statement.", max_length=1000)]) -> Shown:
    """Run one read-only DuckDB SELECT (or WITH ... SELECT) over the tables concepts, links, mentions, analytics
    and the view sessions; call schema first for columns, property keys and worked queries. Rows and time are
    capped."""
    lim = ctx.limits
    columns, types, rows = ctx.db.run(str(query))
    payload: dict[str, Any] = {
        "columns": columns,
        "types": types,
        "rows": [[cell(v, lim.cell_chars) for v in row] for row in rows[: lim.sql_rows]],
    }
    if len(rows) > lim.sql_rows:
        payload["truncated"] = f"more than {lim.sql_rows} rows: showing the first {lim.sql_rows}; add a LIMIT"
    payload = ctx.fit(payload, "select fewer columns or rows", "rows")
    known = ctx.notes.ids()
    found = [v for row in payload["rows"] for v in row if isinstance(v, str) and v in known]
    return Shown(payload, tuple(dict.fromkeys(found)))
