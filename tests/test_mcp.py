"""`vault2okf mcp` as a subprocess on a shared-vault bundle, driven by the MCP SDK's real stdio client."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from retriever.index import index_bundle
from vault2okf.convert import convert

VAULT = Path(__file__).resolve().parents[2] / "shared" / "vaults" / "children-of-ash"
VAULT2OKF = str(Path(sys.executable).parent / "vault2okf")
ENV = {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mcp") / "children-of-ash"
    convert(VAULT, out)
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def session(args: list[str], errlog: Path, body: Callable[[Any], Awaitable[None]]) -> None:
    """Start `vault2okf mcp ARGS` and run ``body(client_session)`` against it."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main() -> None:
        params = StdioServerParameters(command=VAULT2OKF, args=["mcp", *args], env=ENV)
        with errlog.open("w") as err:
            async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                await body(client)

    anyio.run(main)


def payload(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


@pytest.mark.slow
def test_a_client_lists_searches_reads_follows_and_queries(bundle: Path, tmp_path: Path, minilm) -> None:  # noqa: ANN001
    index_bundle(bundle, embedder_name="minilm", progress=False)
    before = digest(bundle / "okf.duckdb")
    times: dict[str, float] = {}

    async def body(client: Any) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"search", "read_note", "neighbours", "sql", "schema", "quote", "link_health",
                              "list_bundles"}  # fmt: skip
        assert tools["search"].input_schema["required"] == ["query"]
        assert tools["sql"].annotations.read_only_hint is True

        start = time.perf_counter()
        found = payload(await client.call_tool("search", {"query": "Who commands the Ashfall PMC?"}))
        times["first search"] = time.perf_counter() - start
        ids = [h["id"] for h in found["hits"]]
        assert "NPCs/Vann Solis" in ids or "Factions/PMC/Ashfall" in ids
        assert all(h["title"] and "snippet" in h and "heading" in h for h in found["hits"])

        note = payload(await client.call_tool("read_note", {"id": "NPCs/Vann Solis"}))
        assert note["type"] == "NPC" and "Commander" in note["text"]

        # quote: the extractive answer behind a tool; each quote verbatim in the note it names, as the search reads
        # it (a markdown link as its label)
        quoted = payload(await client.call_tool("quote", {"question": "What is Vann Solis's role in the Ashfall PMC?"}))
        assert quoted["not_found"] is False and 1 <= len(quoted["quotes"]) <= 3
        assert quoted["support"] in ("strong", "weak") and all(q["support"] and q["reason"] for q in quoted["quotes"])
        for q in quoted["quotes"]:
            text = payload(await client.call_tool("read_note", {"id": q["id"]}))["text"]
            assert q["quote"] and q["quote"] in re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text), q
        nothing = payload(await client.call_tool("quote", {"question": "Zorblax umbral tesseract?"}))
        assert nothing["not_found"] is True and nothing["quotes"] == [] and nothing["support"] == "none"

        near = payload(await client.call_tool("neighbours", {"id": "NPCs/Vann Solis"}))
        assert "Factions/PMC/Ashfall" in [n["id"] for n in near["out_links"]]
        assert near["backlinks"] and all(n["contexts"] for n in near["backlinks"])

        rows = payload(await client.call_tool("sql", {"query": "SELECT type, count(*) AS n FROM concepts GROUP BY 1"}))
        assert sum(r[1] for r in rows["rows"]) == 38

        for statement in (
            "DELETE FROM concepts",
            "SELECT 1; DROP TABLE links",
            f"ATTACH '{tmp_path / 'x.duckdb'}' AS x",
            f"COPY concepts TO '{tmp_path / 'leak.csv'}'",
            "PRAGMA table_info('links')",
            "WITH d AS (DELETE FROM links RETURNING *) SELECT count(*) FROM d",
        ):
            refused = await client.call_tool("sql", {"query": statement})
            assert refused.is_error, statement
            text = refused.content[0].text
            assert ("SELECT" in text or "read-only" in text) and "Traceback" not in text, text

        bundles = payload(await client.call_tool("list_bundles", {}))["bundles"]
        assert [b["name"] for b in bundles] == ["children-of-ash"] and bundles[0]["notes"] == 38
        health = payload(await client.call_tool("link_health", {}))
        assert health["totals"]["notes"] == 38 and health["broken"]

        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        skill = "okf://children-of-ash/SKILL.md"
        assert skill in resources and len(resources) == 2 + 38
        text = (await client.read_resource(skill)).contents[0].text
        assert "## SQL recipes" in text
        doc = "okf://children-of-ash/concepts/NPCs/Vann%20Solis.md"
        assert "type: NPC" in (await client.read_resource(doc)).contents[0].text

    session([str(bundle)], tmp_path / "stderr.txt", body)
    assert digest(bundle / "okf.duckdb") == before
    assert not (tmp_path / "x.duckdb").exists() and not (tmp_path / "leak.csv").exists()
    print(f"first search over MCP (embedder loaded lazily): {times['first search']:.1f}s")


def test_two_bundles_need_a_bundle_name_and_nothing_loads_a_model(bundle: Path, tmp_path: Path) -> None:
    other = tmp_path / "again" / bundle.name  # same folder name: served as children-of-ash-2
    convert(VAULT, other)

    async def body(client: Any) -> None:
        names = [b["name"] for b in payload(await client.call_tool("list_bundles", {}))["bundles"]]
        assert names == ["children-of-ash", "children-of-ash-2"]
        missing = await client.call_tool("sql", {"query": "SELECT 1"})
        assert missing.is_error and "children-of-ash, children-of-ash-2" in missing.content[0].text
        one = payload(
            await client.call_tool("sql", {"query": "SELECT count(*) FROM links", "bundle": "children-of-ash-2"})
        )
        assert one["rows"][0][0] > 0
        schema = payload(await client.call_tool("schema", {"bundle": "children-of-ash"}))
        assert "FROM source_id TO target_id" in schema["link_direction"]
        unknown = await client.call_tool("read_note", {"id": "NPCs/Vann Solis", "bundle": "nope"})
        assert unknown.is_error and "list_bundles" in unknown.content[0].text
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"okf://children-of-ash/SKILL.md", "okf://children-of-ash-2/SKILL.md"} <= uris
        for outside in ("okf://children-of-ash/../../../etc/passwd", "okf://children-of-ash/okf.duckdb"):
            with pytest.raises(Exception, match="not found|Unknown resource"):  # only the listed files are served
                await client.read_resource(outside)

    session([str(bundle), str(other), str(bundle)], tmp_path / "stderr.txt", body)  # a path given twice: once


@pytest.mark.parametrize(
    ("args", "says"),
    [(["{missing}"], "does not exist"), (["{empty}"], "no okf.duckdb")],
)
def test_bad_bundles_are_one_error_line_before_serving(tmp_path: Path, args: list[str], says: str) -> None:
    (tmp_path / "empty").mkdir()
    argv = [a.format(missing=tmp_path / "missing", empty=tmp_path / "empty") for a in args]
    out = subprocess.run(
        [VAULT2OKF, "mcp", *argv], capture_output=True, text=True, env={**os.environ, **ENV}, stdin=subprocess.DEVNULL
    )
    assert out.returncode == 1
    assert out.stderr.startswith("Error: ") and says in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert out.stdout == ""


def test_link_health_fits_the_cap_and_says_where_the_rest_is(bundle: Path) -> None:
    from retriever.agent.mcp_server import Library
    from retriever.agent.tools import Limits

    full = Library([bundle]).link_health(None)
    assert full["broken"][0]["suggestions"] and "truncated" not in full
    small = Library([bundle], limits=Limits(max_chars=1000)).link_health(None)
    assert len(json.dumps(small, ensure_ascii=False)) <= 1000
    assert "link-health.md" in small["truncated"] and small["totals"] == full["totals"]


def test_resources_follow_a_convert_while_serving(tmp_path: Path) -> None:
    import shutil

    vault = tmp_path / "vault"
    shutil.copytree(VAULT, vault)
    out = tmp_path / "b" / "ash"
    convert(vault, out)
    old, new = "okf://ash/concepts/NPCs/Vann%20Solis.md", "okf://ash/concepts/NPCs/Vann%20Solis%20the%20Elder.md"

    async def body(client: Any) -> None:
        before = {str(r.uri) for r in (await client.list_resources()).resources}
        assert payload(await client.call_tool("sql", {"query": "SELECT count(*) FROM concepts"}))["rows"][0][0] > 0
        assert old in before and new not in before
        (vault / "NPCs" / "Vann Solis.md").rename(vault / "NPCs" / "Vann Solis the Elder.md")
        (vault / "NPCs" / "Brand New.md").write_text("A note written while the server runs.\n", "utf-8")
        convert(vault, out)
        query = {"query": "SELECT count(*) FROM concepts WHERE id = 'NPCs/Brand New'"}
        assert payload(await client.call_tool("sql", query))["rows"] == [[1]]  # the tools follow the convert too
        assert "written while" in payload(await client.call_tool("read_note", {"id": "Brand New"}))["text"]
        after = {str(r.uri) for r in (await client.list_resources()).resources}
        assert new in after and "okf://ash/concepts/NPCs/Brand%20New.md" in after and old not in after
        assert (
            "A note written while"
            in (await client.read_resource("okf://ash/concepts/NPCs/Brand%20New.md")).contents[0].text
        )
        (vault / "NPCs" / "Brand New.md").unlink()
        convert(vault, out)
        with pytest.raises(Exception, match="no longer in the bundle|Unknown resource"):
            await client.read_resource("okf://ash/concepts/NPCs/Brand%20New.md")

    session([str(out)], tmp_path / "stderr.txt", body)
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()
