"""Input that cannot be decoded gets one clear error (issue 39, items 7 and 8): bytes that are not UTF-8 in a
question (`search`, `ask`: `Error: ...`, exit 1; `chat`: the error, then the session goes on), and raw MCP
requests the server cannot decode (a lone surrogate escape, nesting 100,000 deep: a JSON-RPC error reply).

Real subprocesses throughout: the console command with a bytes argv, `chat` on a piped stdin, `vault2okf mcp`
written raw lines on its stdin and read with a deadline (a server that stays silent fails the test, not hangs it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bundle_checks import indexed_bundle

EXE = str(Path(sys.executable).with_name("vault2okf"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "LC_ALL": "C.UTF-8"}
NOTES = {"People/Mira.md": "Mira runs the harbour ferry at Greywater.", "Places/Greywater.md": "A fishing harbour."}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return indexed_bundle(tmp_path_factory.mktemp("undecodable"), NOTES)


@pytest.mark.parametrize("command", ["search", "ask"])
def test_a_question_with_bytes_that_are_not_utf8_is_one_error_line(bundle: Path, command: str) -> None:
    args: list[str | bytes] = [EXE, command, str(bundle), b"who runs the \xff\xfe ferry?"]
    if command == "ask":
        args += ["--llm", "extract"]
    done = subprocess.run(args, capture_output=True, text=True, env=ENV)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: the question is not valid UTF-8 text"), done.stderr
    assert "byte 0xff at character 14" in lines[0]


def test_chat_says_the_error_and_goes_on(bundle: Path) -> None:
    stdin = b"who runs the \xff ferry?\n/search harbour ferry\n/history\n"
    done = subprocess.run(
        [EXE, "chat", str(bundle), "--llm", "extract", "--k", "2"], input=stdin, capture_output=True, env=ENV
    )
    stderr, stdout = done.stderr.decode("utf-8", "replace"), done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0, stderr
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and "the line is not valid UTF-8 text (byte 0xff" in errors[0], stderr
    assert "People/Mira.md" in stdout  # the /search after the bad line ran
    assert "1. /search harbour ferry" in stdout  # the bad line was not kept in the history


# Item 8: `vault2okf mcp` answers every request line, even one it cannot decode.

HANG_GUARD_S = 120.0  # a reply that never comes fails the test after this, instead of hanging the run


class RawServer:
    """`vault2okf mcp BUNDLE` written raw lines on its stdin; each reply read with a deadline."""

    def __init__(self, bundle: Path, errlog: Path) -> None:
        self.err = errlog.open("wb")
        self.process = subprocess.Popen(
            [EXE, "mcp", str(bundle)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err, env=ENV
        )

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        self.process.stdin.flush()

    def reply(self) -> dict[str, object]:
        import json
        import select

        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], HANG_GUARD_S)
        assert ready, f"no reply within {HANG_GUARD_S:.0f} s: the server stayed silent"
        line = self.process.stdout.readline()
        assert line, "the server closed its output"
        return json.loads(line)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.err.close()


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from vault2okf.convert import convert

    root = tmp_path_factory.mktemp("mcp-raw")
    (root / "vault").mkdir()
    (root / "vault" / "Mira.md").write_text("Mira runs the ferry.\n", "utf-8")
    convert(root / "vault", root / "bundle")
    return root / "bundle"


def test_mcp_answers_lines_it_cannot_decode_with_json_rpc_errors(converted: Path, tmp_path: Path) -> None:
    import json

    server = RawServer(converted, tmp_path / "mcp.err")
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        server.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
        assert server.reply()["id"] == 1
        server.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        call = b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_note", '
        server.send(call + b'"arguments": {"note": "Mira\\ud800"}}}')  # a lone surrogate escape
        surrogate = server.reply()
        assert surrogate["id"] == 2 and surrogate["error"]["code"] == -32600, surrogate  # type: ignore[index]
        assert "lone surrogate" in surrogate["error"]["message"]  # type: ignore[index]
        server.send(b"[" * 100_000 + b"]" * 100_000)  # nesting 100,000 deep
        deep = server.reply()
        assert deep["id"] is None and deep["error"]["code"] == -32700, deep  # type: ignore[index]
        assert "recursion limit" in deep["error"]["message"]  # type: ignore[index]
        server.send(b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_bundles"}')
        assert server.reply()["error"]["code"] == -32700  # type: ignore[index]  # cut short: a parse error
        server.send(b'{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}')
        after = server.reply()
        assert after["id"] == 4 and "result" in after, after  # the server still serves
    finally:
        server.close()
