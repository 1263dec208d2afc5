"""``schema``: the tables of ``okf.duckdb`` with what each column means, the note types with their property keys,
the link direction, and worked queries with their first rows: what a model needs to write ``sql``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from retriever.agent.tools.context import ToolContext
from retriever.agent.tools.results import Shown, size
from retriever.agent.tools.sql import sql

COLUMNS: dict[str, dict[str, str]] = {
    "concepts": {
        "id": "note id: vault path without .md ('Sessions/Session 3'); what every tool takes",
        "vault_path": "path in the vault with .md",
        "doc_path": "path of the concept doc in the bundle ('concepts/Sessions/Session 3.md')",
        "type": "note type, from its folder or frontmatter 'type' (see types)",
        "title": "title",
        "description": "one sentence: frontmatter description/summary or the first sentence of the body",
        "tags": "list of tags without '#': list_contains(tags, 'x')",
        "aliases": "list of other names of the note",
        "timestamp": "ISO 8601 date of the note",
        "session_date": "YYYY-MM-DD when the note is a dated session, else NULL",
        "session_number": "session number when the note is a numbered session, else NULL",
        "body": "the markdown body of the doc (links are relative paths to other docs)",
        "content_hash": "sha256 of the doc",
        "frontmatter": "JSON text of the note's own properties: (frontmatter::JSON->>'key')",
        "frontmatter_error": "YAML error when the frontmatter could not be parsed, else NULL",
    },
    "links": {
        "source_id": "id of the note the link is written in (the link points FROM here)",
        "target_id": "id of the note it points TO; NULL when broken or an attachment",
        "raw": "the link as written in the vault ([[Note|label]])",
        "target": "the target as written",
        "kind": "'link' or 'embed'",
        "anchor": "heading or ^block the link points at, else NULL",
        "line": "line of the link in the source note",
        "status": "resolved | ambiguous | alias | broken | self | attachment | missing_attachment | overridden | "
        "excluded | missing_block",
        "context": "plain text of the sentence, list item or table row holding the link",
        "in_frontmatter": "true when the link is a frontmatter value (previous: [[Session 4]])",
    },
    "mentions": {
        "source_id": "id of the note whose text names another note without linking it (unlinked mention)",
        "target_id": "id of the note it names (by file name, title or alias)",
        "text": "the words as written",
        "line": "line of the first such mention in the source note",
        "heading": "heading of the section holding it, else NULL",
        "count": "how many times the source names the target",
    },
    "analytics": {
        "id": "note id",
        "pagerank": "PageRank over the links (sums to 1): higher = more central",
        "rank": "1 = the highest pagerank",
        "centrality": "pagerank bucket: 'top 1%', 'top 5%', 'top 10%', 'top 25%', 'top 50%', 'bottom 50%'",
        "community": "id of the most central note of its community",
        "in_degree": "notes linking to it",
        "out_degree": "notes it links to",
        "hub": "about the top 1% by links in + out",
        "orphan": "no link in or out",
    },
    "sessions": {
        "id": "session note id (a VIEW of the concepts with a session date or number)",
        "series": "its folder",
        "position": "1, 2, ... by date, then number, within the series",
        "session_date": "YYYY-MM-DD or NULL",
        "session_number": "number or NULL",
        "previous_id": "the session before it in the series",
        "next_id": "the session after it",
    },
    "meta": {"key": "schema_version, okf_version, vault", "value": "its value"},
}

SECONDARY = ("mentions", "analytics", "sessions")  # the tables whose meanings go first when the payload is cut

LINK_DIRECTION = (
    "links go FROM source_id TO target_id. Out-links of X: WHERE source_id = X; backlinks of X (notes that "
    "mention X): WHERE target_id = X. Join concepts on target_id or source_id for titles and types."
)
SQL_TIPS = (
    "Parenthesise JSON extraction in a comparison: (frontmatter::JSON->>'status') = 'dead', never "
    "frontmatter::JSON->>'status' = 'dead'. Compare ids exactly ('NPCs/Vann Solis'); use ILIKE on title to find "
    "one. Lists: list_contains(tags, 'npc'). Sessions in order: FROM sessions ORDER BY series, position."
)
EXAMPLES = (
    (
        "Notes that mention the most-linked note, with the sentence that mentions it",
        "WITH hub AS (SELECT target_id FROM links WHERE target_id IS NOT NULL GROUP BY target_id "
        "ORDER BY count(*) DESC, target_id LIMIT 1) "
        "SELECT l.source_id, c.type, l.context FROM links l JOIN hub USING (target_id) "
        "JOIN concepts c ON c.id = l.source_id ORDER BY l.source_id, l.line LIMIT 5",
    ),
    (
        "Sessions in order, with how many notes each one links to",
        "SELECT s.series, s.position, s.id, s.session_date, count(l.target_id) AS out_links FROM sessions s "
        "LEFT JOIN links l ON l.source_id = s.id AND l.target_id IS NOT NULL "
        "GROUP BY ALL ORDER BY s.series, s.position LIMIT 5",
    ),
)
PROPERTY_KEYS_SQL = (
    "SELECT type, count(*) AS notes, "
    "list_sort(list_distinct(flatten(list(json_keys(frontmatter::JSON))))) AS property_keys "
    "FROM concepts GROUP BY type ORDER BY notes DESC, type"
)


def schema(ctx: ToolContext) -> Shown:
    """Tables and columns of okf.duckdb with their meaning, note types with their property keys, link directions,
    and worked queries with their first rows."""
    tables = {}
    for table, meanings in COLUMNS.items():
        described = ctx.select(f"DESCRIBE {table}")
        tables[table] = [{"column": r[0], "type": r[1], "meaning": meanings.get(r[0], "")} for r in described]
    types = [{"type": t, "notes": n, "property_keys": keys[:30]} for t, n, keys in ctx.select(PROPERTY_KEYS_SQL)]
    statuses = dict(ctx.select("SELECT status, count(*) FROM links GROUP BY status ORDER BY 2 DESC"))
    examples = []
    for purpose, query in EXAMPLES:
        result = sql(ctx, query).payload
        examples.append({"purpose": purpose, "sql": query, "columns": result["columns"], "rows": result["rows"][:3]})
    payload = {
        "tables": tables,
        "types": types,
        "link_direction": LINK_DIRECTION,
        "link_status_counts": statuses,
        "tips": SQL_TIPS,
        "examples": examples,
    }
    return Shown(
        ctx.fit(_shrink(payload, ctx.limits.max_chars), "query property keys with sql (see examples)", "types")
    )


def _shrink(payload: dict[str, Any], cap: int) -> dict[str, Any]:
    """Under a small cap, give up the meanings of the secondary tables, the example rows, every column meaning,
    the examples, then the column types."""
    steps: list[tuple[str, Callable[[], object]]] = [
        (
            "the meanings of " + ", ".join(SECONDARY),
            lambda: payload.update(tables=_compact_tables(payload["tables"], SECONDARY)),
        ),
        ("example rows", lambda: [e.pop("rows") for e in payload["examples"]]),
        ("column meanings", lambda: payload.update(tables=_compact_tables(payload["tables"]))),
        ("examples", lambda: payload.pop("examples")),
        ("column types", lambda: payload.update(tables=_column_names(payload["tables"]))),
    ]
    dropped = []
    for what, step in steps:
        if size(payload) <= cap:
            break
        step()
        dropped.append(what)
    if dropped:
        payload["truncated"] = f"left out to fit {cap} chars: {', '.join(dropped)}"
    return payload


def _compact_tables(tables: dict[str, Any], only: Sequence[str] | None = None) -> dict[str, Any]:
    """Each table (those in ``only``, if given) as one line of its columns and types, without meanings."""
    return {
        table: ", ".join(f"{c['column']} {c['type']}" for c in columns)
        if (only is None or table in only) and isinstance(columns, list)
        else columns
        for table, columns in tables.items()
    }


def _column_names(tables: dict[str, str]) -> dict[str, str]:
    """``_compact_tables``' text without the types: ``"id, title, ..."``."""
    return {table: ", ".join(c.split(" ", 1)[0] for c in columns.split(", ")) for table, columns in tables.items()}
