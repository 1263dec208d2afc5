"""The one tool layer over a bundle: ``search``, ``read_note``, ``neighbours``, read-only ``sql``, ``schema``.

Used as it is by every face that lets a model call tools (``vault2okf mcp``, ``ask --agent``): each tool returns
a JSON-ready dict no longer than ``Limits.max_chars`` once serialised, or raises ``ToolError`` with a message the
model can act on (what went wrong and what to call instead), never a traceback. ``BundleTools.call`` runs a tool
by name and returns a ``ToolResult`` (text, error flag, size, milliseconds) for a trace.

Only ``search`` needs embeddings: the retriever (Chroma, the embedder) is opened on the first search, once.
``sql`` runs on a DuckDB connection opened ``read_only`` with external access off and the configuration locked
(no files read or written, no ATTACH, no extensions), one statement of type SELECT only, with row and time caps.
"""

from __future__ import annotations

import difflib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import duckdb
from markdown_it import MarkdownIt

from retriever.chunk import BLOCK_ANCHOR
from retriever.errors import RetrieverError
from retriever.okf import check_bundle, read_bundle
from retriever.retrieve import DEFAULT_SPEC, Mode, Retriever, SearchSpec


class ToolError(RetrieverError):
    """A tool call that cannot be answered; the message says why and what to do instead."""


@dataclass(frozen=True)
class Limits:
    """Caps on what one tool call may return or cost."""

    max_chars: int = 6000  # serialised JSON of one result (~1,500 tokens)
    snippet_chars: int = 300  # of each search hit
    max_k: int = 20  # search
    sql_rows: int = 50
    sql_seconds: float = 5.0
    cell_chars: int = 400  # of one SQL value
    query_chars: int = 10_000  # of one SQL statement
    context_chars: int = 300  # of one linking sentence
    max_neighbours: int = 40  # per direction


@dataclass(frozen=True)
class ToolResult:
    """One call as a trace records it: ``text`` is what the model reads (JSON, or ``Error: ...``)."""

    tool: str
    arguments: dict[str, Any]
    text: str
    is_error: bool
    ms: float
    notes: tuple[str, ...] = ()  # ids of the notes the result showed the model, in order (for "notes read")

    @property
    def chars(self) -> int:
        return len(self.text)


# What each tool takes, in JSON Schema: the MCP server and the agent loop describe the tools from this.
TOOL_SPECS: dict[str, dict[str, Any]] = {
    "search": {
        "description": "Find notes about a question or phrase: vector search over the notes plus a capped walk "
        "over their links. Returns note ids, titles, the heading and a snippet of the matching section. "
        "Then read_note(id) for the whole note.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "maxLength": 300, "description": "What to look for, in words."},
                "mode": {"type": "string", "enum": ["vector", "graph", "union"], "default": "union"},
                "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": 10},
            },
            "required": ["query"],
        },
    },
    "read_note": {
        "description": "Read one note (concept doc) by id, e.g. 'Sessions/Session 3'; with heading, only that "
        "section. Returns its type, title, description, section headings and text.",
        "parameters": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "maxLength": 300, "description": "Note id from search, neighbours or sql."},
                "heading": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "A section heading of the note (optional).",
                },
            },
            "required": ["id"],
        },
    },
    "neighbours": {
        "description": "The notes one link away: out-links (notes this note links to) and backlinks (notes that "
        "link to it), each with the sentence holding the link; the previous and next session for a session note.",
        "parameters": {
            "type": "object",
            "properties": {"id": {"type": "string", "maxLength": 300, "description": "Note id."}},
            "required": ["id"],
        },
    },
    "sql": {
        "description": "Run one read-only DuckDB SELECT (or WITH ... SELECT) over the tables concepts and links; "
        "call schema first for columns, property keys and worked queries. Rows and time are capped.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "maxLength": 1000, "description": "One SELECT statement."}},
            "required": ["query"],
        },
    },
    "schema": {
        "description": "Tables and columns of okf.duckdb with their meaning, note types with their property "
        "keys, link directions, and worked queries with their first rows.",
        "parameters": {"type": "object", "properties": {}},
    },
}

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
    "meta": {"key": "schema_version, okf_version, vault", "value": "its value"},
}

LINK_DIRECTION = (
    "links go FROM source_id TO target_id. Out-links of X: WHERE source_id = X; backlinks of X (notes that "
    "mention X): WHERE target_id = X. Join concepts on target_id or source_id for titles and types."
)
SQL_TIPS = (
    "Parenthesise JSON extraction in a comparison: (frontmatter::JSON->>'status') = 'dead', never "
    "frontmatter::JSON->>'status' = 'dead'. Compare ids exactly ('NPCs/Vann Solis'); use ILIKE on title to find "
    "one. Lists: list_contains(tags, 'npc'). Sessions in order: ORDER BY session_date, session_number."
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
        "SELECT c.id, c.session_number, c.session_date, count(l.target_id) AS out_links FROM concepts c "
        "LEFT JOIN links l ON l.source_id = c.id AND l.target_id IS NOT NULL "
        "WHERE c.session_number IS NOT NULL OR c.session_date IS NOT NULL "
        "GROUP BY ALL ORDER BY c.session_date NULLS LAST, c.session_number LIMIT 5",
    ),
)
PROPERTY_KEYS_SQL = (
    "SELECT type, count(*) AS notes, "
    "list_sort(list_distinct(flatten(list(json_keys(frontmatter::JSON))))) AS property_keys "
    "FROM concepts GROUP BY type ORDER BY notes DESC, type"
)

_BLOCKS = MarkdownIt("commonmark").disable("inline")
_SPACE = re.compile(r"\s+")
_WIKILINK = re.compile(r"!?\[\[([^\]|#\n]*)(?:#[^\]|\n]*)?(?:\\?\|([^\]\n]*))?\]\]")  # [[T#h|label]] -> label or T
_LINK = re.compile(r"!?\[([^[\]\n]*)\]\((?:[^()\n]|\([^()\n]*\))*\)")  # [label](target) -> label


class BundleTools:
    """The tools over one bundle; thread-safe (a server may run calls side by side)."""

    def __init__(
        self,
        bundle: Path,
        *,
        chroma_url: str | None = None,
        limits: Limits | None = None,
        spec: SearchSpec | None = None,
        retriever: Retriever | None = None,
    ) -> None:
        """``spec`` is the search the model's ``mode`` and ``k`` adjust (budget, ranker, seeds: the CLI's options);
        ``retriever``, one already open on this bundle (``ask --agent`` reuses its own), else one opens lazily."""
        with read_bundle(bundle):  # exists, has okf.duckdb, a schema this code reads
            pass
        self.bundle = Path(bundle)
        self.limits = limits or Limits()
        self.chroma_url = chroma_url
        self.spec = spec or DEFAULT_SPEC  # what `vault2okf search` does with no options
        self._con = open_readonly(check_bundle(bundle))
        self._db_lock = threading.Lock()
        self._retriever_lock = threading.Lock()
        self._retriever: Retriever | None = retriever
        self._graph: Any = None
        self._ids: dict[str, str] | None = None

    # -- the tools ---------------------------------------------------------------------------------------------

    def search(self, query: str, mode: str = "union", k: int = 10) -> dict[str, Any]:
        if not str(query).strip():
            raise ToolError("query is empty: say in words what to look for")
        if len(query) > self.limits.query_chars:
            raise ToolError(
                f"the query is {len(query)} characters; the most is {self.limits.query_chars}: say it shorter"
            )
        if not 1 <= int(k) <= self.limits.max_k:
            raise ToolError(f"k must be between 1 and {self.limits.max_k}, not {k}")
        if mode not in ("vector", "graph", "union"):
            raise ToolError(f"unknown mode {mode!r}: use 'vector', 'graph' or 'union'")
        spec = replace(self.spec, mode=Mode(mode), k=int(k))
        retrieval = self.retriever().search(str(query), spec)
        hits = [self._hit(h) for h in retrieval.hits]
        payload = {"query": query, "mode": mode, "k": k, "hits": hits}
        return self.fit(payload, "ask with a smaller k", "hits")

    def read_note(self, id: str, heading: str | None = None) -> dict[str, Any]:  # noqa: A002 - the tool's word
        note_id = self._resolve(id)
        if heading is None and "#" in id:  # 'Note#Heading', as links write it (Obsidian allows no '#' in names)
            heading = unquote(id.split("#", 1)[1]).replace("-", " ") or None
        row = self.select(
            "SELECT id, type, title, description, doc_path, tags, aliases, session_date, session_number, "
            "frontmatter FROM concepts WHERE id = ?",
            [note_id],
        )[0]
        text = _doc_body(self._doc_file(row[4]))
        sections = _sections(text)
        headings = [title for title, _, _ in sections if title]
        payload: dict[str, Any] = {
            "id": row[0], "type": row[1], "title": row[2], "description": row[3], "doc_path": row[4],
            "tags": row[5], "aliases": row[6], "session_date": row[7], "session_number": row[8],
            "properties": json.loads(row[9] or "{}"), "headings": headings,
        }  # fmt: skip
        if heading:
            text = self._section(sections, heading, note_id, headings)
            payload["heading"] = heading
        payload["text"] = text
        hint = "read one section with heading=... (see headings)" if headings else "use sql on concepts.body"
        return self._fit_text(payload, hint)

    def neighbours(self, id: str) -> dict[str, Any]:  # noqa: A002 - the tool's word
        note_id = self._resolve(id)
        out = self.select(
            "SELECT l.target_id, t.title, t.type, l.context, l.kind, l.status, l.raw FROM links l "
            "LEFT JOIN concepts t ON t.id = l.target_id WHERE l.source_id = ? ORDER BY l.line, l.target_id",
            [note_id],
        )
        back = self.select(
            "SELECT l.source_id, s.title, s.type, l.context, l.kind, l.status, l.raw FROM links l "
            "JOIN concepts s ON s.id = l.source_id WHERE l.target_id = ? AND l.source_id <> ? "
            "ORDER BY l.source_id, l.line",
            [note_id, note_id],
        )
        graph = self.graph()
        sessions = graph.adjacent_sessions(note_id)
        payload: dict[str, Any] = {
            "id": note_id,
            "out_links": self._link_list(out),
            "backlinks": self._link_list(back),
            "adjacent_sessions": [{"id": s, "title": graph.concepts[s].title} for s in sessions],
        }
        payload["counts"] = {"out_links": len(payload["out_links"]), "backlinks": len(payload["backlinks"])}
        return self.fit(payload, "query links with sql for the rest", "backlinks", "out_links")

    def sql(self, query: str) -> dict[str, Any]:
        statement = self._one_select(str(query))
        lim = self.limits
        timer = threading.Timer(lim.sql_seconds, self._con.interrupt)
        with self._db_lock:
            timer.start()
            try:
                relation = self._con.sql(statement)
                if relation is None:
                    raise ToolError("the statement returned no rows: write a SELECT")
                columns, types = list(relation.columns), [str(t) for t in relation.types]
                # Rows and every value capped inside DuckDB (under its memory limit and the timer), so what
                # becomes Python is at most sql_rows x columns x cell_chars: `SELECT range(20000000)` is one row.
                cells = ", ".join(_capped(f"c{i}", t, lim.cell_chars) for i, t in enumerate(types))
                names = ", ".join(f"c{i}" for i in range(len(columns)))
                inner = statement.rstrip().rstrip(";")  # on lines of its own: a trailing -- comment ends there
                capped = f"SELECT {cells} FROM (\n{inner}\n) AS t({names}) LIMIT {lim.sql_rows + 1}"
                rows = self._con.sql(capped).fetchall()
            except duckdb.InterruptException:
                raise ToolError(
                    f"the query ran past {lim.sql_seconds:g} s and was stopped: add a WHERE or LIMIT, or join on ids"
                ) from None
            except duckdb.Error as e:
                raise ToolError(_sql_error(e)) from None
            finally:
                timer.cancel()
        payload: dict[str, Any] = {
            "columns": columns,
            "types": types,
            "rows": [[_cell(v, lim.cell_chars) for v in row] for row in rows[: lim.sql_rows]],
        }
        if len(rows) > lim.sql_rows:
            payload["truncated"] = f"more than {lim.sql_rows} rows: showing the first {lim.sql_rows}; add a LIMIT"
        return self.fit(payload, "select fewer columns or rows", "rows")

    def schema(self) -> dict[str, Any]:
        tables = {}
        for table, meanings in COLUMNS.items():
            described = self.select(f"DESCRIBE {table}")
            tables[table] = [{"column": r[0], "type": r[1], "meaning": meanings.get(r[0], "")} for r in described]
        types = [{"type": t, "notes": n, "property_keys": keys[:30]} for t, n, keys in self.select(PROPERTY_KEYS_SQL)]
        statuses = dict(self.select("SELECT status, count(*) FROM links GROUP BY status ORDER BY 2 DESC"))
        examples = []
        for purpose, sql in EXAMPLES:
            result = self.sql(sql)
            examples.append({"purpose": purpose, "sql": sql, "columns": result["columns"], "rows": result["rows"][:3]})
        payload = {
            "tables": tables,
            "types": types,
            "link_direction": LINK_DIRECTION,
            "link_status_counts": statuses,
            "tips": SQL_TIPS,
            "examples": examples,
        }
        return self.fit(self._shrink_schema(payload), "query property keys with sql (see examples)", "types")

    def _shrink_schema(self, payload: dict[str, Any]) -> dict[str, Any]:
        """Under a small cap, give up the example rows, then the column meanings, then the examples."""
        steps: list[tuple[str, Callable[[], object]]] = [
            ("example rows", lambda: [e.pop("rows") for e in payload["examples"]]),
            ("column meanings", lambda: payload.update(tables=_compact_tables(payload["tables"]))),
            ("examples", lambda: payload.pop("examples")),
        ]
        dropped = []
        for what, step in steps:
            if _size(payload) <= self.limits.max_chars:
                break
            step()
            dropped.append(what)
        if dropped:
            payload["truncated"] = f"left out to fit {self.limits.max_chars} chars: {', '.join(dropped)}"
        return payload

    # -- running by name ---------------------------------------------------------------------------------------

    def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolResult:
        """Run ``tool`` with ``arguments``; an error of any kind the model caused becomes ``Error: ...`` text."""
        args = dict(arguments or {})
        start = time.perf_counter()
        notes: tuple[str, ...] = ()
        try:
            payload = self.run(tool, args)
            text, is_error = json.dumps(payload, ensure_ascii=False, default=str), False
            notes = self.notes_in(tool, payload)
        except RetrieverError as e:
            text, is_error = f"Error: {e}", True
        return ToolResult(tool, args, text, is_error, round((time.perf_counter() - start) * 1000, 2), notes)

    def notes_in(self, tool: str, payload: Mapping[str, Any]) -> tuple[str, ...]:
        """The ids of the notes a result shows: hits, the note read, its neighbours, ids among SQL values."""
        if tool == "search":
            found = [h["id"] for h in payload["hits"]]
        elif tool == "read_note":
            found = [payload["id"]]
        elif tool == "neighbours":
            linked = [*payload["out_links"], *payload["backlinks"], *payload["adjacent_sessions"]]
            found = [payload["id"], *(n["id"] for n in linked if n.get("id"))]
        elif tool == "sql":
            known = set(self._id_index().values())
            found = [v for row in payload["rows"] for v in row if isinstance(v, str) and v in known]
        else:
            found = []
        return tuple(dict.fromkeys(found))

    def vault_paths(self, ids: Iterable[str]) -> dict[str, str]:
        """Concept id -> vault path (what golden sets name), for the ids that exist."""
        wanted = list(dict.fromkeys(ids))
        rows = self.select("SELECT id, vault_path FROM concepts WHERE list_contains(?, id)", [wanted])
        return dict(rows)

    def run(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        spec = TOOL_SPECS.get(tool)
        if spec is None:
            raise ToolError(f"unknown tool {tool!r}: the tools are {', '.join(TOOL_SPECS)}")
        allowed = spec["parameters"]["properties"]
        unknown = sorted(set(args) - set(allowed))
        missing = [p for p in spec["parameters"].get("required", []) if p not in args]
        if unknown or missing:
            takes = ", ".join(allowed) or "no arguments"
            wrong = f"unknown argument(s) {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"
            raise ToolError(f"{tool}: {wrong}; it takes {takes}")
        for name, value in args.items():
            if allowed[name]["type"] == "integer" and not (isinstance(value, int) and not isinstance(value, bool)):
                raise ToolError(f"{tool}: {name} must be a whole number, not {value!r}")
            if allowed[name]["type"] == "string" and not isinstance(value, str):
                raise ToolError(f"{tool}: {name} must be a string, not {value!r}")
            _check_bounds(tool, name, value, allowed[name])
        method: Callable[..., dict[str, Any]] = getattr(self, tool)
        return method(**args)

    # -- what the tools share ----------------------------------------------------------------------------------

    def retriever(self) -> Retriever:
        """The opened retriever (Chroma + embedder), loaded on the first search only."""
        with self._retriever_lock:
            if self._retriever is None:
                try:
                    self._retriever = Retriever.open(self.bundle, chroma_url=self.chroma_url, graph=self.graph())
                except RetrieverError as e:
                    raise ToolError(f"search is unavailable: {e}; read_note, neighbours and sql still work") from e
                self._retriever.prepare()
            return self._retriever

    def graph(self) -> Any:
        if self._graph is None:
            from retriever.graph import load_graph

            self._graph = load_graph(self.bundle)
        return self._graph

    def close(self) -> None:
        with self._db_lock:
            self._con.close()

    def select(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        with self._db_lock:
            return self._con.execute(sql, params or []).fetchall()

    def _one_select(self, query: str) -> str:
        lim = self.limits
        if len(query) > lim.query_chars:
            raise ToolError(f"the query is {len(query)} characters; the most is {lim.query_chars}")
        try:
            with self._db_lock:  # the connection serves one call at a time, parsing included
                statements = self._con.extract_statements(query)
        except duckdb.Error as e:
            raise ToolError(_sql_error(e)) from None
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

    def _resolve(self, note: str) -> str:
        """The concept id ``note`` names: an id, a doc or vault path (percent-encoded or not) or a unique title."""
        ids = self._id_index()
        raw = str(note).strip()
        wanted = unquote(raw).replace("\\", "/").split("#", 1)[0]
        wanted = re.sub(r"^(\.\.?/)+|^/+", "", wanted)
        wanted = wanted.removeprefix("concepts/").removesuffix(".md")
        for key in (raw, wanted):
            if key in ids.values():
                return key
        found = ids.get(wanted.casefold())
        if found:
            return found
        close = difflib.get_close_matches(wanted.casefold(), list(ids), n=5, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(ids[c]) for c in close)}?" if close else "; use search to find ids"
        raise ToolError(f"no note {raw!r} in this bundle{hint}")

    def _id_index(self) -> dict[str, str]:
        """Case-folded id, and title or file name when only one note has it, -> id."""
        if self._ids is None:
            rows = self.select("SELECT id, title FROM concepts ORDER BY id")
            names: dict[str, list[str]] = {}
            for cid, title in rows:
                for name in {title.casefold(), cid.rsplit("/", 1)[-1].casefold()}:
                    names.setdefault(name, []).append(cid)
            index = {name: cids[0] for name, cids in names.items() if len(cids) == 1}
            index.update({cid.casefold(): cid for cid, _ in rows})
            self._ids = index
        return self._ids

    def _doc_file(self, doc_path: str) -> str:
        root = self.bundle.resolve()
        path = (root / doc_path).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise ToolError(f"the doc {doc_path} is missing from the bundle: re-convert it")
        return path.read_text(encoding="utf-8", errors="replace")

    def _section(self, sections: list[tuple[str, int, str]], heading: str, note: str, headings: list[str]) -> str:
        want = _fold_heading(heading)
        for title, _, text in sections:
            if title and _fold_heading(title) == want:
                return text
        for title, _, text in sections:
            if title and want in _fold_heading(title):
                return text
        raise ToolError(f"{note!r} has no heading {heading!r}; its headings are: {'; '.join(headings) or 'none'}")

    def _hit(self, hit: Any) -> dict[str, Any]:
        first, _, rest = hit.text.partition("\n")
        parts = first.split(" > ")
        heading = " > ".join(parts[1:]) if len(parts) > 1 and parts[0] == hit.title else ""
        snippet = _clip(
            _SPACE.sub(" ", rest if heading or parts[0] == hit.title else hit.text).strip(), self.limits.snippet_chars
        )
        out = {"id": hit.note_id, "title": hit.title, "heading": heading, "snippet": snippet}
        return {**out, "score": round(hit.score, 4), "via": str(hit.via)}

    def _link_list(self, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
        grouped: dict[str, dict[str, Any]] = {}
        for other, title, kind_of, context, kind, status, raw in rows:
            if other is None:  # a broken link or an attachment: what was written, and its status
                entry = grouped.setdefault(f"?{raw}", {"written": raw, "status": status, "contexts": []})
            else:
                entry = grouped.setdefault(other, {"id": other, "title": title, "type": kind_of, "contexts": []})
            if kind == "embed":
                entry["embed"] = True
            sentence = _clip(_labels(context), self.limits.context_chars)
            if sentence and sentence not in entry["contexts"] and len(entry["contexts"]) < 3:
                entry["contexts"].append(sentence)
        return list(grouped.values())[: self.limits.max_neighbours]

    def fit(self, payload: dict[str, Any], hint: str, *keys: str) -> dict[str, Any]:
        """Drop items from the end of the lists ``payload[key]``, key by key, until the JSON fits ``max_chars``."""
        cap = self.limits.max_chars
        notes = []
        for key in keys:
            if _size(payload) <= cap:
                break
            items = payload[key]
            total, payload[key] = len(items), []
            room = cap - _size(payload) - 200  # what the list may take, leaving room for the note
            kept, used = [], 0
            for item in items:
                used += len(_dumps(item)) + 2
                if used > room:
                    break
                kept.append(item)
            payload[key] = kept
            notes.append(f"{key}: showing {len(kept)} of {total}")
            payload["truncated"] = f"{'; '.join(notes)} to fit {cap} chars; {hint}"
        if _size(payload) > cap:
            raise ToolError(f"the result does not fit {cap} characters: {hint}")
        return payload

    def _fit_text(self, payload: dict[str, Any], hint: str) -> dict[str, Any]:
        text = payload["text"]
        room = self.limits.max_chars - _size({**payload, "text": ""}) - 200
        if room <= 0:
            raise ToolError(f"the note's fields alone pass {self.limits.max_chars} characters: {hint}")
        if len(_dumps(text)) > room + 2:
            cut = text[:room]
            while len(_dumps(cut)) > room and cut:
                cut = cut[: int(len(cut) * 0.9)]
            payload["text"] = cut
            payload["truncated"] = f"text cut at {len(cut)} of {len(text)} characters; {hint}"
        return payload


def open_readonly(path: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB instance of its own with the bundle's file attached read-only, then locked down.

    An instance of its own, so its settings never meet the process's other (default) connections to the file:
    DuckDB refuses a second connection to one file with a different configuration.
    """
    con = duckdb.connect(":memory:", config=dict(CONNECTION_CONFIG))
    try:
        con.execute("ATTACH ? AS okf (READ_ONLY)", [str(path)])
        con.execute("USE okf")
        for statement in LOCKDOWN:
            con.execute(statement)
    except duckdb.Error as e:
        con.close()
        raise RetrieverError(f"{path} cannot be opened read-only ({e}): convert the bundle again") from e
    return con


def _check_bounds(tool: str, name: str, value: Any, schema: Mapping[str, Any]) -> None:
    """The schema's maxLength, minimum and maximum, so every face refuses the same arguments."""
    if isinstance(value, str) and len(value) > schema.get("maxLength", len(value)):
        raise ToolError(f"{tool}: {name} is {len(value)} characters; the most is {schema['maxLength']}: say it shorter")
    if isinstance(value, int) and not schema.get("minimum", value) <= value <= schema.get("maximum", value):
        raise ToolError(
            f"{tool}: {name} must be between {schema.get('minimum')} and {schema.get('maximum')}, not {value}"
        )


def _compact_tables(tables: dict[str, list[dict[str, str]]]) -> dict[str, str]:
    return {table: ", ".join(f"{c['column']} {c['type']}" for c in columns) for table, columns in tables.items()}


def _doc_body(doc: str) -> str:
    """The doc without its YAML frontmatter (read_note gives the fields from the database) and its block
    anchors (markup for renderers, not text for a model)."""
    if doc.startswith("---\n"):
        end = doc.find("\n---\n", 4)
        if end != -1:
            doc = doc[end + 5 :].lstrip("\n")
    return BLOCK_ANCHOR.sub("", doc) if "<a id=" in doc else doc


def _sections(text: str) -> list[tuple[str, int, str]]:
    """(heading text, level, section text from its heading to the next heading of the same or higher level)."""
    lines = text.splitlines()
    heads = [
        (tok.map[0], int(tok.tag[1:]), _SPACE.sub(" ", tokens[i + 1].content).strip())
        for tokens in [_BLOCKS.parse(text)]
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.level == 0 and tok.map
    ]
    out = []
    for n, (line, level, title) in enumerate(heads):
        end = next((ln for ln, lv, _ in heads[n + 1 :] if lv <= level), len(lines))
        out.append((title, level, "\n".join(lines[line:end]).strip()))
    return out


def _fold_heading(heading: str) -> str:
    """A heading compared without case, punctuation or markup: 'Act 1, Session 0' = 'act-1-session-0'."""
    return _SPACE.sub(" ", re.sub(r"[^\w\s]|_", " ", unquote(heading).replace("-", " "))).strip().casefold()


def _sql_error(e: Exception) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if isinstance(e, duckdb.PermissionException):
        return f"{first}: only the tables concepts, links and meta can be read"
    if isinstance(e, duckdb.ParserException):
        return f"SQL syntax error: {first}"
    if isinstance(e, duckdb.CatalogException | duckdb.BinderException):
        return f"{first}; call schema for tables and columns"
    if "read-only" in first:
        return f"{first}: the database is read-only, only SELECT is allowed"
    return first


_SCALAR_LIST = re.compile(r"^[A-Z_ ]+(?:\(\d+(?:, ?\d+)?\))?\[\]$")  # INTEGER[], DECIMAL(9,2)[], not nested


def _capped(column: str, kind: str, limit: int) -> str:
    """SQL for ``column`` of DuckDB type ``kind`` cut to what ``_cell`` shows of it: a string to ``limit`` + 1
    characters, a list to its first 50 items; any other nested value as its text, cut the same way."""
    if kind == "VARCHAR":
        return f"left({column}, {limit + 1})"
    if _SCALAR_LIST.match(kind):
        first = f"list_slice({column}, 1, {_LIST_ITEMS})"
        return f"list_transform({first}, lambda x: left(x, {limit + 1}))" if kind == "VARCHAR[]" else first
    nested = ("[" in kind or "(" in kind) and not kind.startswith(("DECIMAL", "ENUM"))  # LIST, STRUCT, MAP, UNION
    if nested or kind in ("JSON", "BLOB"):
        return f"left(CAST({column} AS VARCHAR), {limit + 1})"
    return column


_LIST_ITEMS = 50


def _cell(value: Any, limit: int) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, list | tuple):
        return [_cell(v, limit) for v in value[:_LIST_ITEMS]]
    if isinstance(value, dict):
        return {str(k): _cell(v, limit) for k, v in list(value.items())[:_LIST_ITEMS]}
    return _clip(str(value), limit)


def _labels(text: str | None) -> str:
    """Markdown links reduced to their labels: the model reads ids from the fields, not from link targets."""
    text = _WIKILINK.sub(lambda m: m.group(2) or m.group(1), text or "")
    return _LINK.sub(r"\1", text)


def _clip(text: str | None, limit: int) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _size(payload: Mapping[str, Any]) -> int:
    return len(_dumps(payload))


def iter_specs() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(name, description, JSON Schema of the arguments) of every tool, for a model's tool list."""
    for name, spec in TOOL_SPECS.items():
        yield name, spec["description"], spec["parameters"]


def tool_call_schema(tools: Iterable[str] | None = None, *, ids: Sequence[str] | None = None) -> dict[str, Any]:
    """JSON Schema of one call ``{"tool": NAME, "arguments": {...}}`` of any of ``tools`` (default: all), so a
    grammar-constrained local model can only emit a well-formed call.

    With ``ids`` (the note ids the conversation has shown so far), ``read_note`` and ``neighbours`` may only name
    one of them and optional arguments are left out (the 270M Gemma filled ``heading`` with noise): a small model
    then cannot invent an id, a range or a heading.
    """
    names = list(tools) if tools is not None else list(TOOL_SPECS)
    options = []
    for name in names:
        params = TOOL_SPECS[name]["parameters"]
        properties = {key: _narrow(key, prop, ids) for key, prop in params["properties"].items()}
        if ids is not None:  # a small model fills optional free text with noise: read whole notes instead
            properties = {key: prop for key, prop in properties.items() if key in params.get("required", ())}
        arguments = {"type": "object", "properties": properties, "required": params.get("required", [])}
        options.append({
            "type": "object",
            "properties": {"tool": {"const": name}, "arguments": {**arguments, "additionalProperties": False}},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        })  # fmt: skip
    return {"anyOf": options}


def _narrow(key: str, prop: dict[str, Any], ids: Sequence[str] | None) -> dict[str, Any]:
    if ids is None:
        return prop
    if key == "id":
        return {"enum": list(dict.fromkeys(ids))} if ids else prop
    if prop.get("type") == "integer" and "maximum" in prop:
        return {"enum": list(range(prop.get("minimum", 0), prop["maximum"] + 1))}
    return prop
