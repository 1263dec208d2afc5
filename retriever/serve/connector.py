"""MCP over streamable HTTP: the tools `vault2okf mcp` serves, with ``search`` and ``fetch`` in the shape ChatGPT
connectors require (``search`` returns ``results: [{id, title, url}]`` beside its hits; ``fetch(id)`` returns
``{id, title, text, url, metadata}``), over the served bundles' snapshots (no second retriever)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from retriever.agent import mcp_server
from retriever.agent.tools import TOOLS, Arg, ToolError, declare
from retriever.serve.library import Library, NotFound

SEP = "::"  # bundle::note id, when more than one bundle is served


def build_mcp(library: Library, base_url: str) -> Any:
    """The MCP server (the SDK's) over ``library``'s bundles, with the connector's ``search`` and ``fetch``."""
    tools = mcp_server.Library([])
    tools.tools = {name: served.tools for name, served in library.bundles.items()}
    server = mcp_server.build_server(tools)
    several = len(library.bundles) > 1

    def doc_id(bundle: str, note: str) -> str:
        return f"{bundle}{SEP}{note}" if several else note

    def url(bundle: str, note: str) -> str:
        return f"{base_url}/#bundle={quote(bundle, safe='')}&note={quote(note, safe='')}"

    def search(args: dict[str, Any]) -> dict[str, Any]:
        served = library.get(args.pop("bundle", None))
        payload = served.tools.run("search", args)
        results = [{"id": doc_id(served.name, h["id"]), "title": h["title"], "url": url(served.name, h["id"])}
                   for h in payload["hits"]]  # fmt: skip
        return {"results": results, **payload}

    def fetch(library_: Any, id: Annotated[str, Arg("A result id from search.", max_length=600)]) -> dict[str, Any]:  # noqa: A002
        """Fetch one search result's whole document by its id: its title, text, URL and metadata."""
        bundle, _, note = id.rpartition(SEP) if SEP in id else ("", "", id)
        served = library.get(bundle or None)
        try:
            shown = served.tools.run("read_note", {"id": note})
        except ToolError as e:
            raise NotFound(str(e)) from None
        metadata = {k: shown.get(k) for k in ("type", "doc_path", "tags", "aliases", "session_date") if shown.get(k)}
        return {"id": doc_id(served.name, shown["id"]), "title": shown["title"], "text": shown["text"],
                "url": url(served.name, shown["id"]), "metadata": {"bundle": served.name, **metadata}}  # fmt: skip

    server.remove_tool("search")
    mcp_server._add_tool(server, TOOLS["search"], search, mcp_server.BUNDLE)
    declared = declare(fetch)
    mcp_server._add_tool(server, declared, lambda args: fetch(None, **args))
    return server
