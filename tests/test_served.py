"""The plain `search` that `vault2okf.cli.served` sends to a running server before typer parses the command line
(tests/test_serve_cli.py runs it against a server): which command lines are plain."""

from __future__ import annotations

import json
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from retriever.serve.client import ServerGone, ServerRefused, post
from retriever.serve.state import Address
from vault2okf.cli.served import Outcome, _plain_search, served_search


@pytest.mark.parametrize(
    ("argv", "plain"),
    [
        (["search", "B", "who?"], ("B", "who?", False)),
        (["search", "B", "who?", "--json"], ("B", "who?", True)),
        (["search", "--json", "B", "who?"], ("B", "who?", True)),
        (["search", "B", "who?", "--json", "--json"], None),
        (["search", "B", "who?", "--k", "3"], None),
        (["search", "B", "who?", "--no-server"], None),
        (["search", "B", "-who?"], None),
        (["search", "B", "   "], None),
        (["search", "B", "bad \udcff byte"], None),
        (["search", "B"], None),
        (["ask", "B", "who?"], None),
        (["--verbose", "search", "B", "who?"], None),
        ([], None),
    ],
)
def test_only_a_plain_search_goes_before_typer(argv: list[str], plain: tuple[str, str, bool] | None) -> None:
    assert _plain_search(argv) == plain


def test_a_bundle_no_server_holds_runs_as_always(tmp_path: Path) -> None:
    assert served_search(["search", str(tmp_path), "who?"]) is Outcome.TYPED


@contextmanager
def replying(reply: bytes) -> Iterator[tuple[Address, list[bytes]]]:
    """A loopback listener that reads one request, answers ``reply`` and closes; yields its address and the
    requests it read."""
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            data = conn.recv(65536)
            while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < _length(data):
                data += conn.recv(65536)
            got.append(data)
            conn.sendall(reply)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield Address("127.0.0.1", listener.getsockname()[1], 0, {}, token="t0k"), got
    finally:
        thread.join(5)
        listener.close()


def _length(request: bytes) -> int:
    head = request.partition(b"\r\n\r\n")[0].decode().lower()
    return int(head.split("content-length:")[1].split("\r\n")[0]) if "content-length:" in head else 0


def _reply(status: str, body: bytes, *headers: str) -> bytes:
    return (f"HTTP/1.1 {status}\r\n" + "".join(f"{h}\r\n" for h in headers) + "\r\n").encode() + body


def test_post_sends_one_json_request_and_reads_the_reply() -> None:
    body = json.dumps({"hits": [], "mode": "union"}).encode()
    with replying(_reply("200 OK", body, f"content-length: {len(body)}", "content-type: application/json")) as (
        address,
        got,
    ):
        assert post(address, "/search", {"question": "wer?"}) == {"hits": [], "mode": "union"}
    head, _, sent = got[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /search HTTP/1.1\r\n") and f"Host: 127.0.0.1:{address.port}".encode() in head
    assert b"Authorization: Bearer t0k" in head and json.loads(sent) == {"question": "wer?"}


def test_post_joins_a_chunked_reply() -> None:
    chunked = b'5\r\n{"a":\r\n3;x=y\r\n 1}\r\n0\r\n\r\n'
    with replying(_reply("200 OK", chunked, "Transfer-Encoding: chunked")) as (address, _):
        assert post(address, "/search", {}) == {"a": 1}


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (_reply("400 Bad Request", b'{"error": "no such bundle"}', "content-length: 27"), ServerRefused, "no such"),
        (_reply("504 Gateway Timeout", b"{}", "content-length: 2"), ServerRefused, "HTTP 504"),
        (_reply("500 Internal Server Error", b'{"error": "boom"}', "content-length: 17"), ServerGone, "boom"),
        (_reply("200 OK", b'{"hits": [', "content-length: 40"), ServerGone, "broke off (10 of 40"),
        (_reply("200 OK", b"3\r\n{}}\r\n", "transfer-encoding: chunked"), ServerGone, "broke off (chunked)"),
        (b"HTTP/1.1 200 OK\r\ncontent-le", ServerGone, "broke off"),
        (b"", ServerGone, "closed without a reply"),
    ],
)
def test_post_says_what_went_wrong(reply: bytes, error: type[Exception], message: str) -> None:
    with replying(reply) as (address, _), pytest.raises(error, match=re.escape(message)):
        post(address, "/search", {"question": "q"})


def test_post_to_a_closed_port_is_a_gone_server() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with pytest.raises(ServerGone):
        post(Address("127.0.0.1", port, 0, {}), "/search", {})
