"""``vault2okf mcp BUNDLE [BUNDLE ...]``: a read-only MCP server (stdio) over one or more bundles.

It adds nothing of its own to the tool layer (``retriever.agent.tools``): each tool is registered from its one
declaration (``retriever.agent.tools.TOOLS``) with a ``bundle`` argument (needed only when more than one bundle is
served), plus ``list_bundles`` and ``link_health``, declared the same way. ``SKILL.md``, the link-health report
and every concept doc are resources, read from the bundle's files. Nothing it serves writes: the database is
opened read-only and locked down, resources are read as files, and no tool takes a path.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from retriever.agent.tools import TOOLS, BundleTools, Limits, Tool, ToolError, declare
from retriever.agent.tools.context import stamp as tool_stamp
from retriever.agent.tools.results import dumps
from retriever.errors import RetrieverError
from vault2okf.protocol import bundle_names, database

INSTRUCTIONS = (
    "Read-only tools over Obsidian vaults converted to Open Knowledge Format bundles. Start with schema or "
    "search; read_note reads a note, neighbours follows its links both ways, sql runs one SELECT. Every fact in "
    "an answer must come from a tool result in this conversation; if the tools do not return it, say you could "
    "not find it in the vault. Never fill in or complete a list from your own knowledge. Cite note ids."
)
BUNDLE_ARG = "Bundle name from list_bundles; needed only when the server serves more than one."


class Library:
    """The served bundles by name: the folder name, made unique with -2, -3 …; one path is served once."""

    def __init__(self, bundles: Sequence[Path], *, chroma_url: str | None = None, limits: Limits | None = None):
        self.tools = {name: BundleTools(path, chroma_url=chroma_url, limits=limits)
                      for name, path in bundle_names(bundles).items()}  # fmt: skip

    def get(self, name: str | None) -> BundleTools:
        if name is None or name == "":
            if len(self.tools) == 1:
                return next(iter(self.tools.values()))
            raise ToolError(f"several bundles are served: pass bundle, one of {', '.join(self.tools)}")
        if name not in self.tools:
            raise ToolError(f"no bundle {name!r}: the bundles are {', '.join(self.tools)} (list_bundles)")
        return self.tools[name]

    def list_bundles(self) -> dict[str, Any]:
        return {"bundles": [_describe(name, tools) for name, tools in self.tools.items()]}

    def link_health(self, name: str | None) -> dict[str, Any]:
        tools = self.get(name)
        path = tools.bundle / "link-health.json"
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ToolError(f"no readable link-health report in {tools.bundle} ({e}): convert it again") from e
        fields = {"broken": ("suggestions", "fix"), "ambiguous": ("candidates", "chosen"), "alias_only": ("note",),
                  "missing_attachments": ()}  # fmt: skip
        payload: dict[str, Any] = {"totals": report.get("totals", {})}
        for key, extra in fields.items():
            payload[key] = [_short(e, "target", "count", "at", *extra) for e in report.get(key, [])]
        payload["hubs"] = report.get("hubs", [])[:10]
        payload["orphans"] = report.get("orphans", [])[:30]
        lists = ("orphans", "hubs", "missing_attachments", "alias_only", "ambiguous", "broken")
        return tools.fit(payload, "read the resource link-health.md or link-health.json for all of it", *lists)


def _short(entry: dict[str, Any], *keys: str) -> dict[str, Any]:
    out = {k: entry[k] for k in keys if k in entry}
    if isinstance(out.get("at"), list) and len(out["at"]) > 3:
        out["at"] = [*out["at"][:3], f"... {len(entry['at']) - 3} more"]
    return out


def _describe(name: str, tools: BundleTools) -> dict[str, Any]:
    from retriever.index import read_index_info

    types = tools.select("SELECT type, count(*) FROM concepts GROUP BY type ORDER BY 2 DESC, 1")
    vault = tools.select("SELECT value FROM meta WHERE key = 'vault'")
    try:
        indexed: str | None = read_index_info(tools.bundle).embedder
    except RetrieverError:
        indexed = None
    return {
        "name": name,
        "vault": vault[0][0] if vault else None,
        "notes": sum(n for _, n in types),
        "types": dict(types),
        "search": f"indexed with {indexed}" if indexed else "not indexed: search is unavailable",
    }


def link_health(library: Library, bundle: str | None = None) -> dict[str, Any]:
    """The bundle's link-health report: totals, broken and ambiguous links with where they are and suggested
    fixes, alias-only links, missing attachments, hubs, orphans."""
    return library.link_health(bundle)


def list_bundles(library: Library) -> dict[str, Any]:
    """The served bundles: name, vault, notes per type, search status."""
    return library.list_bundles()


LIBRARY_TOOLS = (declare(link_health), declare(list_bundles))  # the server's own, over all bundles
BUNDLE = inspect.Parameter("bundle", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=str | None)


def build_server(library: Library) -> Any:
    """The MCP server: the tool layer's tools with a ``bundle`` argument, and the bundles' files as resources."""
    server = _server_class()("vault2okf", instructions=INSTRUCTIONS, log_level="WARNING")
    server.library = library
    for tool in TOOLS.values():

        def run(args: dict[str, Any], name: str = tool.name) -> dict[str, Any]:
            return library.get(args.pop("bundle", None)).run(name, args)

        _add_tool(server, tool, run, BUNDLE)
    for tool in LIBRARY_TOOLS:

        def run_on_library(args: dict[str, Any], fn: Callable[..., dict[str, Any]] = tool.fn) -> dict[str, Any]:
            return fn(library, **args)

        _add_tool(server, tool, run_on_library)
    server.refresh()  # the bundles' files as resources, listed again after each convert
    return server


def _add_tool(
    server: Any, tool: Tool, run: Callable[[dict[str, Any]], dict[str, Any]], *extra: inspect.Parameter
) -> None:
    """``tool`` as the MCP SDK registers a function: its declared arguments (then ``extra``) as a plain
    signature, from which the SDK derives the schema and checks a call; the result as JSON text, a library
    error as the SDK's tool error. A tool that takes ``bundle`` says what it is."""
    from mcp.server.mcpserver.exceptions import ToolError as McpToolError

    def served(**arguments: Any) -> str:
        try:
            return dumps(run({k: v for k, v in arguments.items() if v is not None}))
        except RetrieverError as e:
            raise McpToolError(str(e)) from None

    signature = tool.signature(*extra)
    served.__name__ = served.__qualname__ = tool.name
    served.__signature__ = signature  # type: ignore[attr-defined]
    served.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()} | {"return": str}
    description = f"{tool.description} {BUNDLE_ARG}" if "bundle" in signature.parameters else tool.description
    server.add_tool(served, description=description, annotations=_read_only_hint())


def _read_only_hint() -> Any:
    from mcp_types import ToolAnnotations

    return ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


def _server_class() -> Any:
    """The SDK's server, with resources that follow the bundles: a `convert` while it serves (a note renamed,
    added or removed) is seen at the next list or read, and a file gone since the list is "not found", in words."""
    from mcp.server.mcpserver import MCPServer

    class BundleServer(MCPServer):  # type: ignore[misc]
        library: Library
        stamps: dict[str, tuple[int, int, int] | None]

        def refresh(self) -> None:
            stamps = getattr(self, "stamps", {})
            for name, tools in self.library.tools.items():
                stamp = tool_stamp(database(tools.bundle))
                if name in stamps and stamps[name] == stamp:
                    continue
                stamps[name] = stamp
                prefix = resource_uri(name, "")
                held = self._resource_manager._resources  # the SDK keeps them by URI; it has no remove
                for uri in [u for u in held if u.startswith(prefix)]:
                    del held[uri]
                _add_resources(self, name, tools)
            self.stamps = stamps

        async def list_resources(self) -> Any:
            self.refresh()
            return await super().list_resources()

        async def read_resource(self, uri: Any, context: Any = None) -> Any:
            self.refresh()
            return await super().read_resource(uri, context)

        async def run_stdio_async(self) -> None:  # a line it cannot decode gets a JSON-RPC error, not silence
            from retriever.agent.mcp_stdio import run_stdio

            await run_stdio(self)

    return BundleServer


def _add_resources(server: Any, name: str, tools: BundleTools) -> None:
    root = tools.bundle.resolve()
    files = [("SKILL.md", "How to use this bundle (Agent Skills)"), ("link-health.md", "Link-health report")]
    for rel, description in files:
        if (root / rel).is_file():
            server.add_resource(_file(name, rel, root, f"{name}/{rel}", description))
    for cid, doc_path, title, description in _concept_rows(root):
        if (root / doc_path).is_file():
            server.add_resource(_file(name, doc_path, root, f"{name}/{cid}", f"{title}: {description}"))


def _concept_rows(root: Path) -> list[tuple[Any, ...]]:
    """The concepts of the bundle's database as it is now (the tools' connection holds the file it opened)."""
    from retriever.agent.tools.sandbox import connect

    try:
        con = connect(database(root))
    except RetrieverError:
        return []  # between a convert's swaps, or damaged: nothing to list until the next refresh
    try:
        return con.execute("SELECT id, doc_path, title, description FROM concepts ORDER BY id").fetchall()
    finally:
        con.close()


@functools.cache
def _file_class() -> Any:
    """The SDK's file resource, whose read of a file a convert removed is "not found", in words."""
    from mcp.server.mcpserver.exceptions import ResourceNotFoundError
    from mcp.server.mcpserver.resources import FileResource

    class BundleFile(FileResource):  # type: ignore[misc]
        async def read(self) -> str | bytes:
            try:
                return await super().read()
            except OSError as e:
                raise ResourceNotFoundError(
                    f"{self.uri} is no longer in the bundle (renamed or removed by a convert): list the resources again"
                ) from e

    return BundleFile


def _file(bundle: str, rel: str, root: Path, label: str, description: str) -> Any:
    return _file_class()(
        uri=resource_uri(bundle, rel),
        name=label,
        description=description[:300],
        mime_type="text/markdown",
        path=root / rel,
    )


def resource_uri(bundle: str, rel: str) -> str:
    """The URI a served file has: ``okf://<bundle>/<bundle-relative path>``, percent-encoded."""
    return f"okf://{quote(bundle, safe='')}/{quote(rel)}"


def open_library(bundles: Sequence[Path], *, chroma_url: str | None = None) -> Library:
    """The bundles to serve, each checked; the MCP SDK must be installed."""
    try:
        import mcp  # noqa: F401
    except ImportError as e:
        raise RetrieverError("the MCP server needs the 'serve' extra: pip install 'vault2okf[serve]'") from e
    return Library(bundles, chroma_url=chroma_url)


def unindexed(library: Library) -> list[str]:
    """What to say of each served bundle that has no index: search is unavailable there."""
    return [
        f"{name} has no index: run `vault2okf index {tools.bundle}` for search"
        for name, tools in library.tools.items()
        if _describe(name, tools)["search"].startswith("not indexed")
    ]
