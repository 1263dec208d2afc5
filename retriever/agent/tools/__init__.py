"""The one tool layer over a bundle: ``search``, ``read_note``, ``neighbours``, read-only ``sql``, ``schema``.

Used as it is by every face that lets a model call tools (``vault2okf mcp``, ``ask --agent``): each tool is one
typed function in a module of its own (``search.py``, ``read_note.py``, ...), declared once by its signature
(``declare.py``), which gives the JSON Schema every face shows a model and the check every call passes. A tool
returns a JSON-ready payload no longer than ``Limits.max_chars`` once serialised, with the notes it showed, or
raises ``ToolError`` with a message the model can act on (what went wrong and what to call instead), never a
traceback. ``BundleTools.call`` runs a tool by name and returns a ``ToolResult`` (text, error flag, size,
milliseconds, the notes shown) for a trace.

Only ``search`` needs embeddings: the retriever (Chroma, the embedder) is opened on the first search, once.
``sql`` runs in the sandbox (``sandbox.py``): a DuckDB connection opened ``read_only`` with external access off
and the configuration locked (no files read or written, no ATTACH, no extensions), one statement of type SELECT
only, with row and time caps. Note names are resolved in ``notes.py``.
"""

from retriever.agent.tools.bundle import BundleTools
from retriever.agent.tools.declare import Arg, Tool, declare
from retriever.agent.tools.registry import TOOL_SPECS, TOOLS, iter_specs, tool_call_schema
from retriever.agent.tools.results import Limits, Shown, ToolError, ToolResult

__all__ = [
    "TOOLS",
    "TOOL_SPECS",
    "Arg",
    "BundleTools",
    "Limits",
    "Shown",
    "Tool",
    "ToolError",
    "ToolResult",
    "declare",
    "iter_specs",
    "tool_call_schema",
]
