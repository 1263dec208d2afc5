"""The client the CLI uses to go through a running ``vault2okf serve`` (standard library only), so a ``search`` or
``ask`` that finds a server costs an interpreter start and one request, not a model load.

``find(bundle)`` gives the server holding the bundle, or None (none, a stale address, another answerer);
``post`` sends a JSON request, ``events`` reads an ``/ask`` stream. A server that refuses the connection, stops or
breaks the stream mid-request raises ``ServerGone``: the caller falls back to running in process.

``post`` speaks HTTP/1.1 on a socket (one request, ``Connection: close``, the reply read to its end): ``urllib``
imports ``http.client``, ``email`` and ``ssl``, 0.03-0.07 s of a served search's whole command on two cores, for
one request to a loopback address. ``events`` (a stream read as it comes) imports ``urllib`` when it is called.
"""

from __future__ import annotations

import json
import socket
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
    import urllib.error
    import urllib.request

    headers = {"Content-Type": "application/json", "Accept": accept}
    if address.token:
        headers["Authorization"] = f"Bearer {address.token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(address.url + path, data=data, headers=headers, method="POST" if data else "GET")
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT)  # noqa: S310 - our own loopback address
    except urllib.error.HTTPError as e:
        try:
            payload = e.read()
        except OSError:
            payload = b""
        raise _failure(e.code, payload) from None
    except (OSError, urllib.error.URLError) as e:
        raise ServerGone(str(e)) from None


def _failure(status: int, payload: bytes) -> ServerGone | ServerRefused:
    """What an error reply means to the caller, with the server's message: ServerRefused for a 4xx (or 504),
    ServerGone for any other 5xx."""
    try:
        message = json.loads(payload or b"{}").get("error") or f"HTTP {status}"
    except (ValueError, AttributeError):
        message = f"HTTP {status}"
    return ServerGone(message) if status >= 500 and status != 504 else ServerRefused(status, message)


def post(address: Address, path: str, body: Any) -> dict[str, Any]:
    """The JSON answer of ``POST path`` with ``body``: ServerRefused for a 4xx (or 504) answer, with the server's
    message; ServerGone for a 5xx, a refused connection or a reply that breaks off."""
    status, payload = _exchange(address, path, json.dumps(body).encode())
    if status >= 400:
        raise _failure(status, payload)
    try:
        return dict(json.loads(payload))
    except (ValueError, TypeError) as e:
        raise ServerGone(f"the reply broke off ({e})") from None


def _exchange(address: Address, path: str, data: bytes) -> tuple[int, bytes]:
    """``POST path`` with the JSON ``data``: the reply's status and body (ServerGone when there is none)."""
    netloc = address.url.split("//", 1)[1]
    head = [f"POST {path} HTTP/1.1", f"Host: {netloc}", "Content-Type: application/json",
            "Accept: application/json", f"Content-Length: {len(data)}", "Connection: close"]  # fmt: skip
    if address.token:
        head.append(f"Authorization: Bearer {address.token}")
    request = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data
    try:
        with socket.create_connection((netloc.rsplit(":", 1)[0].strip("[]"), address.port), TIMEOUT) as conn:
            conn.sendall(request)
            reply = b"".join(iter(lambda: conn.recv(1 << 16), b""))
    except OSError as e:
        raise ServerGone(str(e)) from None
    return _parse_reply(reply)


def _parse_reply(reply: bytes) -> tuple[int, bytes]:
    """The status and body of an HTTP/1.1 reply read to its end (a body of ``Content-Length`` or chunked)."""
    head, blank, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if not blank or len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise ServerGone("the reply broke off" if reply else "the connection closed without a reply")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunked(body)
    elif headers.get("content-length", "").isdigit() and len(body) < int(headers["content-length"]):
        raise ServerGone(f"the reply broke off ({len(body)} of {headers['content-length']} bytes)")
    return int(parts[1]), body


def _unchunked(body: bytes) -> bytes:
    """A chunked body (RFC 9112 7.1) joined; ServerGone when it stops before its last chunk."""
    out: list[bytes] = []
    at = 0
    while True:
        end = body.find(b"\r\n", at)
        try:
            size = int(body[at:end].split(b";")[0], 16) if end >= 0 else -1
        except ValueError:
            size = -1
        if size < 0 or len(body) < end + 2 + size:
            raise ServerGone("the reply broke off (chunked)")
        if size == 0:
            return b"".join(out)
        out.append(body[end + 2 : end + 2 + size])
        at = end + 2 + size + 2


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
