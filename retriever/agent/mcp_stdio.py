"""`vault2okf mcp` over stdio, with a reply to every request line the server cannot decode.

The MCP SDK's stdio transport hands a line it cannot parse (a lone surrogate escape such as ``"\\ud800"``, JSON
nested 100,000 deep, bad syntax) to the server as an exception, and the server drops it: the client that sent it
waits forever. Here the server's read stream is wrapped: each such exception becomes a JSON-RPC error reply on
the same write stream as every other reply — ``-32700`` (parse error, ``"id": null``) when the line is not JSON
this server can read, ``-32600`` (invalid request, with the request's id) when its id can still be read (a lone
surrogate: JSON's grammar allows the escape, but it is no character, so the request cannot be decoded).
A notification (no id) that is invalid gets no reply, as JSON-RPC says.
"""

from __future__ import annotations

import json
import re
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
MISSING = object()
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


async def run_stdio(server: Any) -> None:
    """Serve ``server`` (the SDK's MCPServer) over stdio, as its own `run_stdio_async` does, answering lines it
    cannot decode."""
    from mcp.server.stdio import stdio_server

    lowlevel = server._lowlevel_server
    async with stdio_server() as (read_stream, write_stream):
        answered = Answered(read_stream, write_stream)
        await lowlevel.run(answered, write_stream, lowlevel.create_initialization_options())


def error_reply(error: Exception) -> Any:
    """The JSON-RPC error for a line the SDK could not parse into a message (None: a notification, no reply)."""
    from mcp_types import ErrorData, JSONRPCError

    line = _input_of(error)
    request_id = _request_id(line) if isinstance(line, str) else _id_in(line)
    if request_id is None:
        return None
    if request_id is MISSING:
        reason = _reason(error, line)
        return JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message=f"Parse error: {reason}"))
    reason = _reason(error, line)
    return JSONRPCError(
        jsonrpc="2.0", id=request_id, error=ErrorData(code=INVALID_REQUEST, message=f"Invalid request: {reason}")
    )


def _input_of(error: Exception) -> Any:
    """The raw line (a str) when the JSON did not parse, the parsed object when it did but is no message."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
        except (IndexError, TypeError, ValueError):
            return None
        return first.get("input")
    return None


def _request_id(line: str) -> Any:
    """The id of a request line pydantic's parser refused, read by Python's (which takes lone surrogates):
    MISSING when the line is no JSON at all (nesting too deep, bad syntax), None for a notification."""
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return MISSING
    return _id_in(data)


def _id_in(data: Any) -> Any:
    if not isinstance(data, dict):
        return MISSING
    request_id = data.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None if "id" not in data else MISSING
    return request_id if not _has_surrogate(str(request_id)) else MISSING


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


def _reason(error: Exception, line: Any) -> str:
    """What was wrong, in words, ASCII only (the line itself may hold what cannot be encoded)."""
    message = ""
    errors = getattr(error, "errors", None)
    if callable(errors):
        try:
            message = "; ".join(str(e.get("msg", "")) for e in errors()[:3])
        except (TypeError, ValueError):
            message = ""
    if isinstance(line, str) and (_has_surrogate(line) or SURROGATE_ESCAPE.search(line)):
        message = "a lone surrogate escape (such as \\ud800) is not a character, so the request cannot be decoded"
    message = message or type(error).__name__
    return message.encode("ascii", "backslashreplace").decode("ascii")[:300]


class Answered:
    """The SDK's read stream, with each parse failure answered on ``write`` and left out of what is read."""

    def __init__(self, inner: Any, write: Any) -> None:
        self.inner, self.write = inner, write

    @property
    def last_context(self) -> Any:
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> Any:
        from mcp.shared.message import SessionMessage

        while True:
            item = await self.inner.receive()
            if not isinstance(item, Exception):
                return item
            reply = error_reply(item)
            if reply is not None:
                await self.write.send(SessionMessage(reply))

    def __aiter__(self) -> Answered:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Answered:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
