"""The tools by name, each declared once by its typed function, and the JSON Schemas derived from them: what each
tool takes (``TOOL_SPECS``, for a model's tool list) and one well-formed call (``tool_call_schema``, for a grammar)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from retriever.agent.tools.declare import Tool, declare
from retriever.agent.tools.neighbours import neighbours
from retriever.agent.tools.quote import quote
from retriever.agent.tools.read_note import read_note
from retriever.agent.tools.schema import schema
from retriever.agent.tools.search import search
from retriever.agent.tools.sql import sql

TOOLS: dict[str, Tool] = {
    tool.name: tool for tool in (declare(fn) for fn in (search, read_note, neighbours, sql, schema, quote))
}
# Served to a client (`vault2okf mcp`), not offered to our own agent loop: the loop is the model answering itself.
CLIENT_ONLY = frozenset({"quote"})
# What each tool the agent loop may call takes, in JSON Schema: the loop describes the tools from this.
TOOL_SPECS: dict[str, dict[str, Any]] = {
    name: {"description": tool.description, "parameters": tool.parameters}
    for name, tool in TOOLS.items()
    if name not in CLIENT_ONLY
}


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
