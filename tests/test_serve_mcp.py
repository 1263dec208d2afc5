"""MCP over streamable HTTP at `/mcp` of `vault2okf serve`, driven by the MCP SDK's own streamable-HTTP client:
the tools `vault2okf mcp` serves, plus `search` and `fetch` in the shape ChatGPT connectors require."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from serve_checks import VAULT, serving

pytestmark = pytest.mark.slow


def session(url: str, body: Callable[[Any], Awaitable[None]], headers: dict[str, str] | None = None) -> None:
    """An MCP client session over streamable HTTP at ``url``, running ``body(client)``."""
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def main() -> None:
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            await body(client)

    anyio.run(main)


def payload(result: Any) -> Any:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def test_the_sdk_client_searches_fetches_and_reads_over_http(coa_bundle: Path, tmp_path: Path) -> None:
    with serving([coa_bundle], "--llm", "extract", errlog=tmp_path / "err.txt") as server:
        seen: dict[str, Any] = {}

        async def body(client: Any) -> None:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"search", "fetch", "read_note", "neighbours", "sql", "schema", "quote",
                                  "link_health", "list_bundles"}  # fmt: skip
            assert tools["search"].input_schema["required"] == ["query"]
            assert tools["fetch"].input_schema["required"] == ["id"]
            found = payload(await client.call_tool("search", {"query": "Who commands the Ashfall PMC?"}))
            seen["found"] = found
            assert found["results"] and all(set(r) == {"id", "title", "url"} for r in found["results"])
            assert [r["id"] for r in found["results"]] == [h["id"] for h in found["hits"]]
            first = found["results"][0]
            doc = payload(await client.call_tool("fetch", {"id": first["id"]}))
            seen["doc"] = doc
            assert doc["id"] == first["id"] and doc["title"] == first["title"] and doc["url"] == first["url"]
            assert doc["text"] and doc["metadata"]["bundle"] == "children-of-ash"
            missing = await client.call_tool("fetch", {"id": "No Such Note"})
            assert missing.is_error and "no note" in missing.content[0].text
            note = payload(await client.call_tool("read_note", {"id": "NPCs/Vann Solis"}))
            assert "Commander" in note["text"]
            rows = payload(await client.call_tool("sql", {"query": "SELECT count(*) AS n FROM concepts"}))
            assert rows["rows"] == [[38]]

        session(server.url + "/mcp", body)
        # the search is the HTTP API's search: the same notes, in the same order, as /search with that k
        api = server.post("/search", {"question": "Who commands the Ashfall PMC?"})
        assert [r["id"] for r in seen["found"]["results"]] == [h["note_id"] for h in api["hits"]][
            : len(seen["found"]["results"])
        ]
        # the url opens the note in the web page
        assert seen["doc"]["url"].startswith(server.url + "/#bundle=children-of-ash&note=")


def test_mcp_over_http_needs_the_token_and_two_bundles_name_their_ids(coa_bundle: Path, tmp_path: Path) -> None:
    from vault2okf.convert import convert

    other = tmp_path / "again" / coa_bundle.name  # the same folder name: served as children-of-ash-2 (no index)
    convert(VAULT, other)
    with serving([coa_bundle, other], "--llm", "extract", "--token", "t0k", errlog=tmp_path / "err.txt") as server:
        status, _, error = server.request("/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert status == 401 and error == {"error": "missing or wrong token"}

        async def body(client: Any) -> None:
            bundles = payload(await client.call_tool("list_bundles", {}))["bundles"]
            assert [b["name"] for b in bundles] == ["children-of-ash", "children-of-ash-2"]
            found = payload(await client.call_tool("search", {"query": "Ashfall", "bundle": "children-of-ash"}))
            assert all(r["id"].startswith("children-of-ash::") for r in found["results"])
            doc = payload(await client.call_tool("fetch", {"id": found["results"][0]["id"]}))
            assert doc["id"] == found["results"][0]["id"]
            unindexed = await client.call_tool("search", {"query": "Ashfall", "bundle": "children-of-ash-2"})
            assert unindexed.is_error and "search is unavailable" in unindexed.content[0].text

        session(server.url + "/mcp", body, headers={"Authorization": "Bearer t0k"})
        health = server.get("/health", headers={"Authorization": "Bearer t0k"})
        assert [b["index"] for b in health["bundles"]] == ["ready", "missing"]


def test_server_is_unchanged_by_serving(coa_bundle: Path, tmp_path: Path) -> None:
    """Nothing the server does writes into the bundle but its address (removed when it stops)."""
    import hashlib

    def digest() -> dict[str, str]:
        return {str(p.relative_to(coa_bundle)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(coa_bundle.rglob("*")) if p.is_file() and ".vault2okf" not in p.parts}  # fmt: skip

    before = digest()
    with serving([coa_bundle], "--llm", "extract", errlog=tmp_path / "err.txt") as server:
        server.post("/ask", {"question": "Who is Vann Solis?"})
        assert server.get("/health")["bundles"][0]["index"] == "ready"
    assert digest() == before
