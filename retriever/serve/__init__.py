"""``vault2okf serve``: one warm local service over one or more bundles (docs/API.md is its contract).

- ``library.py``: the served bundles, each a ``Served`` whose ``current()`` snapshot (retriever, generation) is
  swapped whole when a ``convert`` or ``index`` replaces the bundle: a request uses one snapshot throughout;
- ``views.py``: what the endpoints answer, as JSON-ready payloads (search hits, notes, link health, health);
- ``app.py``: the Starlette app: the routes, the safety middleware (Host/Origin, token, caps, JSON errors),
  server-sent events for ``/ask``, MCP over streamable HTTP at ``/mcp``, the web page at ``/``;
- ``state.py`` and ``client.py``: the address a running server leaves in a bundle's ``.vault2okf/`` and the
  stdlib client the CLI uses to go through it (both import nothing but the standard library).
"""

from retriever.errors import RetrieverError


class ServeError(RetrieverError):
    """The server cannot start or serve as asked (an unsafe address, no bundle, a bad request)."""


__all__ = ["ServeError"]
