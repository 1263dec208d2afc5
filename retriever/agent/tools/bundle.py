"""``BundleTools``: the tools over one bundle, run by name (``call``: a ``ToolResult`` for a trace, every mistake
as ``Error: ...`` text) or as typed methods returning the JSON-ready payload."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from retriever.agent.tools.context import ToolContext
from retriever.agent.tools.registry import TOOLS
from retriever.agent.tools.results import Shown, ToolError, ToolResult, dumps
from retriever.errors import RetrieverError


class BundleTools(ToolContext):
    """The tools over one bundle; thread-safe (a server may run calls side by side)."""

    def search(self, query: str, mode: str = "union", k: int = 10) -> dict[str, Any]:
        return self.run("search", {"query": query, "mode": mode, "k": k})

    def read_note(self, id: str, heading: str | None = None) -> dict[str, Any]:  # noqa: A002 - the tool's word
        return self.run("read_note", {"id": id} if heading is None else {"id": id, "heading": heading})

    def neighbours(self, id: str) -> dict[str, Any]:  # noqa: A002 - the tool's word
        return self.run("neighbours", {"id": id})

    def sql(self, query: str) -> dict[str, Any]:
        return self.run("sql", {"query": query})

    def schema(self) -> dict[str, Any]:
        return self.run("schema", {})

    def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolResult:
        """Run ``tool`` with ``arguments``; an error of any kind the model caused becomes ``Error: ...`` text."""
        args = dict(arguments or {})
        start = time.perf_counter()
        try:
            shown = self.show(tool, args)
        except RetrieverError as e:
            shown, text, is_error = Shown({}), f"Error: {e}", True
        else:
            text, is_error = dumps(shown.payload), False
        ms = round((time.perf_counter() - start) * 1000, 2)
        return ToolResult(tool, args, text, is_error, ms, shown.notes, shown.headings)

    def run(self, tool: str, args: Mapping[str, Any]) -> dict[str, Any]:
        """The payload of ``tool`` run with ``args``, checked against its declaration."""
        return self.show(tool, args).payload

    def show(self, tool: str, args: Mapping[str, Any]) -> Shown:
        """``tool`` run with ``args``: its payload and the notes it showed."""
        declared = TOOLS.get(tool)
        if declared is None:
            raise ToolError(f"unknown tool {tool!r}: the tools are {', '.join(TOOLS)}")
        declared.check(args)
        self.follow()
        shown: Shown = declared.fn(self, **args)
        return shown

    def vault_paths(self, ids: Iterable[str]) -> dict[str, str]:
        """Concept id -> vault path (what golden sets name), for the ids that exist."""
        wanted = list(dict.fromkeys(ids))
        rows = self.select("SELECT id, vault_path FROM concepts WHERE list_contains(?, id)", [wanted])
        return dict(rows)
