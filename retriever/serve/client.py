"""The client the CLI uses to go through a running ``vault2okf serve`` (standard library only: ``urllib``), so a
``search`` or ``ask`` that finds a server costs an interpreter start and one request, not a model load.

``find(bundle)`` gives the server holding the bundle, or None (none, a stale address, another answerer);
``post`` sends a JSON request, ``events`` reads an ``/ask`` stream. A server that refuses the connection, stops or
breaks the stream mid-request raises ``ServerGone``: the caller falls back to running in process.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from retriever.serve.state import Address, read_address

TIMEOUT = 600.0  # seconds to wait for a reply once connected (the server has its own, shorter, limit)


class ServerGone(Exception):
    """The server could not be reached, or stopped answering mid-request."""


class ServerRefused(Exception):
    """The server answered with an error (a 4xx or 5xx JSON ``{"error": ...}``): its message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def find(bundle: Path) -> Address | None:
    """The address of the server running now for ``bundle`` (None: none, or a stale address)."""
    return read_address(Path(bundle))


def _request(address: Address, path: str, body: Any, accept: str) -> Any:
    headers = {"Content-Type": "application/json", "Accept": accept}
    if address.token:
        headers["Authorization"] = f"Bearer {address.token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(address.url + path, data=data, headers=headers, method="POST" if data else "GET")
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT)  # noqa: S310 - our own loopback address
    except urllib.error.HTTPError as e:
        try:
            message = json.loads(e.read() or b"{}").get("error") or f"HTTP {e.code}"
        except (ValueError, AttributeError, OSError):
            message = f"HTTP {e.code}"
        if e.code >= 500 and e.code != 504:
            raise ServerGone(message) from None
        raise ServerRefused(e.code, message) from None
    except (OSError, urllib.error.URLError) as e:
        raise ServerGone(str(e)) from None


def post(address: Address, path: str, body: Any) -> dict[str, Any]:
    """The JSON answer of ``POST path`` with ``body``."""
    with _request(address, path, body, "application/json") as response:
        try:
            return dict(json.loads(response.read()))
        except (OSError, ValueError) as e:
            raise ServerGone(f"the reply broke off ({e})") from None


def events(address: Address, path: str, body: Any) -> Iterator[tuple[str, Any]]:
    """The server-sent events of ``POST path``: ``(event, data)``, until ``done`` or ``error``; ServerGone when
    the stream ends before either."""
    with _request(address, path, body, "text/event-stream") as response:
        event, data = "message", ""
        try:
            for raw in response:
                line = raw.decode("utf-8").rstrip("\r\n")
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    data += line[6:]
                elif not line and data:
                    yield event, json.loads(data)
                    if event in ("done", "error"):
                        return
                    event, data = "message", ""
        except (OSError, ValueError) as e:
            raise ServerGone(f"the stream broke off ({e})") from None
    raise ServerGone("the stream ended before the answer")
