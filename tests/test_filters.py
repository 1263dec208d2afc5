"""Search filters (``retriever/filters.py``): the rules on their own, then on a part of the shared daggerheart vault
(types from frontmatter and folders, nested tags, `created`/`date` frontmatter and file dates) converted and indexed
with MiniLM, each filter's notes worked out from ``okf.duckdb``'s ``concepts`` table in SQL, apart from the filter
code: the graph, the vector stage (dense and hybrid), the hop, the CLI and the search tool."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

from retriever.errors import RetrieverError
from retriever.filters import NoteFilter, note_date
from retriever.graph import GRAPH_CACHE, Concept, load_graph
from retriever.retrieve import DEFAULT_SPEC, Budget, Retriever, SearchSpec

ROOT = Path(__file__).resolve().parents[1]
VAULT = ROOT.parent / "shared" / "vaults" / "daggerheart"
# about 230 chunks of the vault's 1,850 (indexing the whole vault takes minutes on two busy cores): campaign notes,
# a character's journal (linked to one another: the hop has neighbours), NPCs, locations, a session plan, root notes
JOURNAL = """entry-01-young-scout entry-02-first-vision entry-03-mentor-trust entry-04-first-kill entry-05-the-outbreak
entry-06-into-the-wild entry-07-the-hunt-begins entry-08-price-of-power entry-09-revelation entry-10-necessary-monster
entry-11-last-light-revelations entry-12-blood-blades-and-the-weight-of-right-choices journal-index"""
SUBSET = (
    "00-CAMPAIGN/campaign-overview.md",
    "00-CAMPAIGN/house-rules.md",
    "00-CAMPAIGN/session-tracker.md",
    *(f"01-CHARACTERS/gareth-character/journals/{name}.md" for name in JOURNAL.split()),
    "01-CHARACTERS/luie-character/character-notes.md",
    "01-CHARACTERS/mark-character/character-notes.md",
    "02-SESSIONS/session-planning.md",
    "03-WORLD/story-threads.md",
    "03-WORLD/npcs/README.md",
    "03-WORLD/npcs/davrith-investigator.md",
    "03-WORLD/npcs/holya-townmaster.md",
    "03-WORLD/npcs/bright-claw.md",
    "03-WORLD/locations/last-light.md",
    "03-WORLD/locations/mires-end.md",
    "03-WORLD/locations/the-soggy-boot.md",
    "LICENSE.MD",
    "README.md",
)

# Each concept's date in SQL, apart from `note_date`: the timestamp's date when a frontmatter date key reads as a
# date (convert took the timestamp from it), else the session date, else the timestamp's (the file's) date.
DATED = """
WITH d AS (
    SELECT id, lower(type) AS type, list_transform(tags, lambda t: lower(t)) AS tags, vault_path,
        coalesce(
            CASE WHEN list_bool_or(list_transform(
                ['date', 'created', 'updated', 'modified', 'timestamp', 'sessiondate', 'session_date'],
                lambda k: try_cast(trim(json_extract_string(frontmatter, '$.' || k)) AS TIMESTAMP) IS NOT NULL))
            THEN timestamp[1:10] END,
            session_date, timestamp[1:10]) AS day
    FROM concepts)
SELECT id FROM d WHERE {where}
"""
# name -> (filter, its notes as SQL says); several values of one key: any; several keys: all
CASES: dict[str, tuple[NoteFilter, str]] = {
    "type": (NoteFilter(types=("location",)), "type = 'location'"),
    "two types": (NoteFilter(types=("NPC", "Location")), "type IN ('npc', 'location')"),
    "tag and the tags under it": (
        NoteFilter(tags=("#character",)),
        "len(list_filter(tags, lambda t: t = 'character' OR starts_with(t, 'character/'))) > 0",
    ),
    "nested tag": (NoteFilter(tags=("location/mires-end",)), "list_contains(tags, 'location/mires-end')"),
    "two tags": (
        NoteFilter(tags=("journal-entry", "npc")),
        "len(list_filter(tags, lambda t: t IN ('journal-entry', 'npc') OR starts_with(t, 'npc/'))) > 0",
    ),
    "folder": (NoteFilter(folders=("03-WORLD",)), "starts_with(vault_path, '03-WORLD/')"),
    "subfolder": (
        NoteFilter(folders=("/01-CHARACTERS/gareth-character/journals/",)),
        "starts_with(vault_path, '01-CHARACTERS/gareth-character/journals/')",
    ),
    "since": (NoteFilter(since=dt.date(2025, 7, 25)), "day >= '2025-07-25'"),
    "until": (NoteFilter(until=dt.date(2025, 7, 19)), "day <= '2025-07-19'"),
    "since and until": (
        NoteFilter(since=dt.date(2025, 7, 19), until=dt.date(2025, 8, 1)),
        "day BETWEEN '2025-07-19' AND '2025-08-01'",
    ),
    "type and since": (
        NoteFilter(types=("location",), since=dt.date(2025, 8, 1)), "type = 'location' AND day >= '2025-08-01'"
    ),
    "folder, tag and until": (
        NoteFilter(folders=("01-CHARACTERS",), tags=("banjo-backstory",), until=dt.date(2025, 7, 25)),
        "starts_with(vault_path, '01-CHARACTERS/') AND list_contains(tags, 'banjo-backstory') AND day <= '2025-07-25'",
    ),
}  # fmt: skip
ROWS = "SELECT id FROM concepts WHERE {where}"
QUESTION = "What happened at Mire's End and who leads the town?"


def concept(path: str, type_: str = "Note", tags: tuple[str, ...] = (), date: str | None = None) -> Concept:
    note = path.removesuffix(".md")
    return Concept(note, note, path, f"concepts/{path}", type_, (), None, None, tags, date)


# --- the rules, without a bundle ---


def test_json_round_trip_and_tidying() -> None:
    f = NoteFilter.from_json(
        {"type": "NPC", "tag": ["#npc", "location/mire-end", "npc"], "folder": "./03-WORLD/", "since": "2025-07-19",
         "until": None}
    )  # fmt: skip
    assert f == NoteFilter(("NPC",), ("npc", "location/mire-end"), ("03-WORLD",), dt.date(2025, 7, 19))
    assert f.to_json() == {"type": ["NPC"], "tag": ["npc", "location/mire-end"], "folder": ["03-WORLD"],
                           "since": "2025-07-19"}  # fmt: skip
    assert NoteFilter.from_json(f.to_json()) == f
    assert hash(NoteFilter.from_json({"tag": "#npc"})) == hash(NoteFilter(tags=("npc",)))
    assert NoteFilter.from_json(None).empty and NoteFilter.from_json({}).empty and NoteFilter().to_json() == {}
    assert not f.empty


@pytest.mark.parametrize(
    ("obj", "says"),
    [
        ({"tags": "npc"}, "unknown filter key(s) 'tags': use type, tag, folder, since, until"),
        ({"since": "2025-13-01"}, "filter since: '2025-13-01' is not a date; write it as YYYY-MM-DD"),
        ({"until": "25/07/2025"}, "filter until: '25/07/2025' is not a date"),
        ({"since": 20250725}, "filter since: 20250725 is not a date"),
        ({"type": 3}, "filter type: a string or a list of strings, not 3"),
        ({"tag": ["npc", None]}, "filter tag: a string or a list of strings"),
        ({"tag": "#"}, "filter tag: an empty value"),
        ({"folder": "/"}, "filter folder: an empty value"),
        ({"since": "2025-08-01", "until": "2025-07-01"}, "since 2025-08-01 is after until 2025-07-01"),
        (["npc"], "a filter is an object with the keys type, tag, folder, since, until, not ['npc']"),
    ],
)
def test_malformed_json_says_what_is_wrong(obj: Any, says: str) -> None:
    with pytest.raises(RetrieverError) as e:
        NoteFilter.from_json(obj)
    assert says in str(e.value)


def test_the_rules_on_single_notes() -> None:
    tagged = concept("Projects/alpha.md", "Project", ("Project/Alpha", "status/open"), "2024-03-31")
    assert NoteFilter(tags=("#project",)).allows(tagged)  # a nested tag, any case, the # optional
    assert NoteFilter(tags=("project/alpha",)).allows(tagged)
    assert not NoteFilter(tags=("proj",)).allows(tagged)  # whole tag parts only
    assert not NoteFilter(tags=("project/alpha/x",)).allows(tagged)
    assert NoteFilter(types=("PROJECT",)).allows(tagged)
    assert NoteFilter(types=("note", "project")).allows(tagged)  # any value of one key
    assert not NoteFilter(types=("project",), tags=("status/closed",)).allows(tagged)  # all keys
    for folder, passes in (("Sessions", True), ("Sessions/2024", True), ("Sess", False), ("Sessions-old", False)):
        assert NoteFilter(folders=(folder,)).allows(concept("Sessions/2024/x.md")) is passes, folder
    assert not NoteFilter(folders=("Sessions",)).allows(concept("Sessions-old/x.md"))
    assert not NoteFilter(folders=("x.md",)).allows(concept("x.md"))  # a folder, not the note itself
    day = dt.date(2024, 3, 31)
    assert NoteFilter(since=day, until=day).allows(tagged)  # inclusive at both ends
    assert not NoteFilter(since=day + dt.timedelta(days=1)).allows(tagged)
    assert not NoteFilter(until=day - dt.timedelta(days=1)).allows(tagged)
    assert not NoteFilter(since=dt.date(1, 1, 1)).allows(concept("undated.md"))  # no date: never passes a date
    assert NoteFilter(types=("note",)).allows(concept("undated.md"))  # ... but passes the other keys
    assert NoteFilter().allows(None) and not NoteFilter(types=("note",)).allows(None)


def test_the_note_date_prefers_the_frontmatter_then_the_session_then_the_file() -> None:
    stamp = "2025-07-18T00:00:00+00:00"
    assert note_date(stamp, "2025-07-01", json.dumps({"created": "2025-07-18"})) == "2025-07-18"
    assert note_date("2025-07-18T23:30:00-05:00", None, json.dumps({"date": "2025-07-18 23:30:00-05:00"})) == (
        "2025-07-18"  # the date as written, not moved to UTC
    )
    # no frontmatter date (a template's placeholder is none): the session date, else the file's date
    assert note_date("2026-12-04T10:00:00+00:00", "2025-07-01", json.dumps({"date": "YYYY-MM-DD"})) == "2025-07-01"
    assert note_date("2026-12-04T10:00:00+00:00", None, "{}") == "2026-12-04"
    assert note_date("garbage", None, "{}") is None
    assert note_date(None, None, None) is None


# --- on a converted and indexed part of the daggerheart vault ---


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from retriever.index import index_bundle
    from vault2okf.convert import convert

    root = tmp_path_factory.mktemp("filters")
    for path in SUBSET:
        (root / "vault" / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(VAULT / path, root / "vault" / path)
    convert(root / "vault", root / "bundle")
    index_bundle(root / "bundle", embedder_name="minilm", progress=False)
    return root / "bundle"


@pytest.fixture(scope="module")
def retriever(bundle: Path) -> Retriever:
    return Retriever.open(bundle)


def expected(bundle: Path, where: str, sql: str = DATED) -> set[str]:
    with duckdb.connect(str(bundle / "okf.duckdb"), read_only=True) as con:
        return {row[0] for row in con.execute(sql.format(where=where)).fetchall()}


def passing(retriever: Retriever, ids: set[str]) -> set[str]:
    """Of ``ids``, the notes that have chunks in the index (what a search can return)."""
    return ids & set(retriever.table.rows_of)


@pytest.mark.slow
def test_the_cases_are_worth_testing(bundle: Path) -> None:
    every = expected(bundle, "true")
    assert len(every) == len(SUBSET) and expected(bundle, "day IS NULL") == set()
    for name, (_, where) in CASES.items():
        assert 0 < len(expected(bundle, where)) < len(every), name  # each keeps some notes and drops some
    nested = expected(bundle, CASES["tag and the tags under it"][1])
    assert nested - expected(bundle, "list_contains(tags, 'character')")  # notes with only a tag under it
    frontmatter = expected(bundle, "json_extract_string(frontmatter, '$.created') IS NOT NULL", ROWS)
    assert frontmatter and every - frontmatter  # dated by frontmatter, and by file


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_each_filter_lets_through_the_notes_sql_finds(bundle: Path, name: str) -> None:
    f, where = CASES[name]
    want = expected(bundle, where)
    assert {n for n, c in load_graph(bundle).concepts.items() if f.allows(c)} == want
    assert {n for n, c in load_graph(bundle).concepts.items() if f.allows(c)} == want  # from the graph cache too


@pytest.mark.slow
def test_an_old_graph_cache_is_rebuilt_not_misread(bundle: Path) -> None:
    from dataclasses import astuple

    from retriever.graph import GRAPH_MAGIC

    graph = load_graph(bundle)
    cache = bundle / ".vault2okf" / GRAPH_CACHE
    assert cache.read_bytes().startswith(GRAPH_MAGIC)
    # as the code before tags and dates wrote it: plain JSON, eight columns per concept
    old = {"key": [1, 3, 0, 0, 0, ""], "concepts": [list(astuple(c))[:8] for c in graph.concepts.values()],
           "neighbours": graph.neighbours}  # fmt: skip
    cache.write_text(json.dumps(old), "utf-8")
    graph = load_graph(bundle)
    assert sum(bool(c.tags) for c in graph.concepts.values()) > len(SUBSET) // 2
    assert all(c.date for c in graph.concepts.values())
    assert cache.read_bytes().startswith(GRAPH_MAGIC)  # rewritten in this format


def nearest_notes(retriever: Retriever, question: str, notes: set[str], k: int, chunks: int = 0) -> list[str]:
    """What the vector stage with ``dedup`` takes from ``notes`` alone (the same stage on a vault of only them),
    worked out here with numpy: the distinct notes of their 3k chunks nearest the question (or of ``chunks``), the
    first ``k`` of them, in the order their chunks come."""
    table = retriever.table
    rows = [r for r, note in enumerate(table.note_ids) if note in notes]
    sims = table.vectors[rows] @ retriever.embed(question)
    nearest = sorted(range(len(rows)), key=lambda i: (-sims[i], rows[i]))[: chunks or 3 * k]
    return list(dict.fromkeys(table.note_ids[rows[i]] for i in nearest))[:k]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_the_vector_stage_finds_k_notes_that_pass(retriever: Retriever, bundle: Path, name: str) -> None:
    f, where = CASES[name]
    want = passing(retriever, expected(bundle, where))
    k = 4
    dense = retriever.search(QUESTION, SearchSpec("vector", k, dedup=True, budget=Budget(), filters=f))
    assert dense.hits and [h.note_id for h in dense.hits] == nearest_notes(retriever, QUESTION, want, k)
    chunks = retriever.search(QUESTION, SearchSpec("vector", k, budget=Budget(), filters=f))  # k chunks, not notes
    assert [h.note_id for h in chunks.hits] == nearest_notes(retriever, QUESTION, want, k, chunks=k)
    hybrid = retriever.search(QUESTION, SearchSpec("vector", k, "hybrid", dedup=True, budget=Budget(), filters=f))
    assert hybrid.hits and {h.note_id for h in hybrid.hits} <= want


@pytest.mark.slow
def test_a_filter_keeps_k_notes_where_filtering_afterwards_would_not(retriever: Retriever, bundle: Path) -> None:
    f, where = CASES["subfolder"]  # the journal; the question is about a town, so few journal chunks are nearest
    want = passing(retriever, expected(bundle, where))
    plain = retriever.search(QUESTION, SearchSpec("vector", 4, dedup=True, budget=Budget()))
    assert len({h.note_id for h in plain.hits} & want) < 4  # what filtering the hits afterwards would leave
    filtered = retriever.search(QUESTION, SearchSpec("vector", 4, dedup=True, budget=Budget(), filters=f))
    assert len(filtered.hits) == 4 and {h.note_id for h in filtered.hits} <= want


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_every_stage_of_every_mode_keeps_to_the_filter(retriever: Retriever, bundle: Path, name: str) -> None:
    f, where = CASES[name]
    want = expected(bundle, where)
    specs = [
        replace(DEFAULT_SPEC, filters=f),
        SearchSpec("graph", filters=f, mentions=True, named=True, threads=True, budget=Budget()),
        SearchSpec("union", 3, ranker="dense", budget=Budget(), filters=f),
    ]
    for spec in specs:
        hits = retriever.search(QUESTION, spec).hits
        assert hits and {h.note_id for h in hits} <= want, (spec, [h.note_id for h in hits])


def neighbours(bundle: Path, notes: set[str]) -> set[str]:
    """The notes linked to or from ``notes``, as the ``links`` table has them."""
    listed = ", ".join(f"'{n}'" for n in notes)
    sql = (
        f"SELECT CASE WHEN source_id IN ({listed}) THEN target_id ELSE source_id END FROM links "
        f"WHERE target_id IS NOT NULL AND source_id <> target_id "
        f"AND (source_id IN ({listed}) OR target_id IN ({listed}))"
    )
    with duckdb.connect(str(bundle / "okf.duckdb"), read_only=True) as con:
        return {row[0] for row in con.execute(sql).fetchall()} - notes


@pytest.mark.slow
def test_the_hop_offers_only_notes_that_pass(retriever: Retriever, bundle: Path) -> None:
    question = "the young scout's first vision"
    f = NoteFilter(tags=("journal-entry",))  # the entries, not the journal's index that links them all
    want = expected(bundle, "list_contains(tags, 'journal-entry')")
    spec = SearchSpec("union", 2, ranker="dense", dedup=True, sessions=False, budget=Budget(notes=20))
    plain = retriever.search(question, spec).hits
    assert {h.note_id for h in plain if h.via == "hop"} - want  # without the filter the hop reaches other notes
    hits = retriever.search(question, replace(spec, filters=f)).hits
    seeds = {h.note_id for h in hits if h.via == "vector"}
    hop = {h.note_id for h in hits if h.via == "hop"}
    assert seeds <= want and hop and hop == neighbours(bundle, seeds) & want  # every passing neighbour, no other
    capped = retriever.search(question, replace(spec, filters=f, budget=Budget(notes=len(seeds) + 1))).hits
    assert len(capped) == len(seeds) + 1  # the budget is what it was: the hop adds one note here


@pytest.mark.slow
def test_no_filter_is_the_search_of_before(retriever: Retriever, bundle: Path) -> None:
    """An empty filter takes the unfiltered path (no mask is made); a filter every note passes takes the masked
    one and finds the same notes with the same scores."""
    assert expected(bundle, "day < '1900-01-01' OR day IS NULL") == set()
    everyone = NoteFilter(since=dt.date(1900, 1, 1))
    fresh = Retriever.open(bundle)
    specs = (DEFAULT_SPEC, SearchSpec("vector", 5), SearchSpec("graph", ranker="dense", threads=True))
    plain = [fresh.search(QUESTION, spec) for spec in specs]
    assert fresh._passing == {}
    for spec, before in zip(specs, plain, strict=True):
        assert before.hits == fresh.search(QUESTION, replace(spec, filters=NoteFilter())).hits
        masked = fresh.search(QUESTION, replace(spec, filters=everyone))
        assert (before.hits, before.left_out) == (masked.hits, masked.left_out)
    assert list(fresh._passing) == [everyone]  # worked out once, kept for the next search


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([sys.executable, "-m", "vault2okf", *args], capture_output=True, text=True, env=env)


@pytest.mark.slow
def test_the_cli_filters_and_an_empty_filter_changes_no_byte(bundle: Path) -> None:
    def hits(*options: str) -> dict[str, Any]:
        run = cli("search", str(bundle), QUESTION, "--json", *options)
        assert run.returncode == 0, run.stderr
        payload = json.loads(run.stdout)
        payload.pop("timings_ms")
        return payload

    plain = hits()
    assert json.dumps(plain) == json.dumps(hits("--since", "1900-01-01"))  # every note passes: byte for byte
    found = hits("--type", "Location", "--type", "npc", "--since", "2025-07-25")
    want = expected(bundle, "type IN ('location', 'npc') AND day >= '2025-07-25'")
    assert found["hits"] and {h["note_id"] for h in found["hits"]} <= want
    tagged = hits("--tag", "#location", "--folder", "03-WORLD/locations", "--until", "2025-07-19")
    want = expected(bundle, "starts_with(vault_path, '03-WORLD/locations/') AND day <= '2025-07-19' AND "
                    "len(list_filter(tags, lambda t: t = 'location' OR starts_with(t, 'location/'))) > 0")  # fmt: skip
    assert tagged["hits"] and {h["note_id"] for h in tagged["hits"]} <= want


CHILD = """
import json, sys
from typer.testing import CliRunner
from vault2okf.cli import app
out = {}
for name, args in json.loads(sys.argv[1]).items():
    r = CliRunner().invoke(app, args)
    out[name] = {"code": r.exit_code, "output": r.output, "heavy": [m for m in ("FlagEmbedding", "torch",
                 "llama_cpp", "chromadb", "onnxruntime") if m in sys.modules]}
print(json.dumps(out))
"""


@pytest.mark.slow
def test_bad_filter_options_are_usage_errors_before_anything_loads(bundle: Path) -> None:
    b, q = str(bundle), "Who leads Mire's End?"
    cases = {
        "month 13": (["search", b, q, "--since", "2025-13-01"], "Invalid value for '--since'"),
        "not ISO": (["ask", b, q, "--llm", "extract", "--until", "07/25/2025"], "Invalid value for '--until'"),
        "since after until": (["search", b, q, "--since", "2025-08-01", "--until", "2025-07-01"],
                              "since 2025-08-01 is after until 2025-07-01"),
        "empty tag": (["chat", b, "--tag", "#"], "filter tag: an empty value"),
        "empty folder": (["search", b, q, "--folder", "/"], "filter folder: an empty value"),
    }  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps({name: args for name, (args, _) in cases.items()})],
        capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    results = json.loads(run.stdout)
    for name, (_, says) in cases.items():
        result = results[name]
        assert result["code"] == 2, (name, result)
        assert says in " ".join(result["output"].split()), (name, result["output"])
        assert "Traceback" not in result["output"] and result["heavy"] == [], name
    for command in ("search", "ask", "chat"):
        text = cli(command, "--help").stdout
        assert all(option in text for option in ("--type", "--tag", "--folder", "--since", "--until")), command
        assert "left out" in " ".join(text.split()), command  # what happens to a note with no date


@pytest.mark.slow
def test_the_search_tool_takes_the_filters(bundle: Path) -> None:
    from retriever.agent.tools import TOOL_SPECS, BundleTools

    schema = TOOL_SPECS["search"]["parameters"]
    assert {"type", "tag", "folder", "since", "until"} <= set(schema["properties"]) and schema["required"] == ["query"]
    tools = BundleTools(bundle)
    args = {"query": QUESTION, "type": "location", "since": "2025-08-01", "tag": ""}  # blank: no tag filter
    result = tools.call("search", args)
    assert not result.is_error, result.text
    payload = json.loads(result.text)
    want = expected(bundle, "type = 'location' AND day >= '2025-08-01'")
    assert payload["hits"] and {h["id"] for h in payload["hits"]} <= want
    assert payload["filters"] == {"type": ["location"], "since": "2025-08-01"}
    bad = tools.call("search", {"query": QUESTION, "until": "last week"})
    assert bad.is_error and "until: 'last week' is not a date; write it as YYYY-MM-DD" in bad.text


@pytest.mark.slow
def test_the_session_filter_holds_in_the_tool_unless_the_call_says_otherwise(bundle: Path) -> None:
    from retriever.agent.tools import BundleTools

    tools = BundleTools(bundle, spec=replace(DEFAULT_SPEC, filters=NoteFilter(folders=("03-WORLD",))))
    world = expected(bundle, "starts_with(vault_path, '03-WORLD/')")
    hits = json.loads(tools.call("search", {"query": QUESTION}).text)["hits"]
    assert hits and {h["id"] for h in hits} <= world
    npcs = json.loads(tools.call("search", {"query": QUESTION, "type": "NPC"}).text)
    assert npcs["filters"] == {"type": ["NPC"], "folder": ["03-WORLD"]}
    assert {h["id"] for h in npcs["hits"]} <= world & expected(bundle, "type = 'npc'")


@pytest.mark.slow
def test_an_mcp_client_searches_with_filters(bundle: Path, tmp_path: Path) -> None:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    found: dict[str, Any] = {}

    async def main() -> None:
        params = StdioServerParameters(command=sys.executable, args=["-m", "vault2okf", "mcp", str(bundle)], env=env)
        with (tmp_path / "err.log").open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                listed = {t.name: t for t in (await client.list_tools()).tools}
                found["properties"] = set(listed["search"].input_schema["properties"])
                args = {"query": QUESTION, "folder": "03-WORLD/npcs", "until": "2025-08-01"}
                found["filtered"] = await client.call_tool("search", args)
                found["bad"] = await client.call_tool("search", {"query": QUESTION, "since": "2025-02-30"})

    anyio.run(main)
    assert {"type", "tag", "folder", "since", "until"} <= found["properties"]
    assert not found["filtered"].is_error, found["filtered"].content[0].text
    hits = json.loads(found["filtered"].content[0].text)["hits"]
    want = expected(bundle, "starts_with(vault_path, '03-WORLD/npcs/') AND day <= '2025-08-01'")
    assert hits and {h["id"] for h in hits} <= want
    assert found["bad"].is_error and "since: '2025-02-30' is not a date" in found["bad"].content[0].text
