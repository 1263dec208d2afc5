"""`vault2okf search` and `ask` riding on a running `vault2okf serve`: the same stdout, stderr and `--json` as in
process (timings aside), without loading a model; `--no-server` forces in process; a stale address is ignored;
a server that breaks off mid-request costs one `note:` line and the command runs in process."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_checks import Server, cli, serving, without_timings

from retriever.answer.backends import AnswerSpec

pytestmark = pytest.mark.slow
QUESTION = "What is the Virelian Civil War?"
MS = re.compile(r", [0-9.]+ ms$", re.M)


@pytest.fixture(scope="module")
def server(coa_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with serving([coa_bundle], "--llm", "extract", errlog=tmp_path_factory.mktemp("log") / "err.txt") as running:
        yield running


@pytest.mark.parametrize(
    "args",
    [
        ["search", "--json"],
        ["search", "--json", "--mode", "vector", "--k", "4"],
        ["search", "--json", "--max-notes", "3", "--ranker", "lexical", "--no-sessions"],
        ["search"],
        ["search", "--max-notes", "2"],
        ["search", "--json", "--type", "NPC", "--folder", "NPCs"],
        ["search", "--json", "--k", "2", "--explain", "Ashfall"],
        ["search", "--k", "2", "--runs", "--explain", "Factions/PMC/Ashfall.md"],
        ["ask", "--llm", "extract", "--json", "--folder", "Sessions"],
        ["ask", "--llm", "extract", "--json"],
        ["ask", "--llm", "extract"],
        ["ask", "--llm", "extract", "--mode", "graph"],
    ],
)
def test_through_the_server_prints_what_in_process_prints(server: Server, coa_bundle: Path, args: list[str]) -> None:
    command, *options = args
    through = cli(command, str(coa_bundle), QUESTION, *options)
    alone = cli(command, str(coa_bundle), QUESTION, *options, "--no-server")
    assert through.returncode == alone.returncode == 0, (through.stderr, alone.stderr)
    if "--json" in options:
        assert without_timings(json.loads(through.stdout)) == without_timings(json.loads(alone.stdout))
        assert _shape(through.stdout) == _shape(alone.stdout)  # byte for byte but the timings' digits
    else:
        assert MS.sub("", through.stdout) == MS.sub("", alone.stdout)
    assert through.stderr == alone.stderr


def _shape(text: str) -> str:
    return re.sub(r'("(?:[a-z_]+_ms|first_token)": )[0-9.]+', r"\1#", text)


def test_through_the_server_no_model_loads(server: Server, coa_bundle: Path) -> None:
    """The question is embedded by the server: the CLI never imports onnxruntime or FlagEmbedding."""
    for command in (["search"], ["ask", "--llm", "extract"]):
        through = _importtime(command[0], str(coa_bundle), QUESTION, *command[1:])
        alone = _importtime(command[0], str(coa_bundle), QUESTION, *command[1:], "--no-server")
        assert "onnxruntime" not in through and "onnxruntime" in alone


HEAVY = ("pydantic", "numpy", "torch", "chromadb", "duckdb", "onnxruntime")


def _imported(importtime: str, module: str) -> bool:
    return re.search(rf"\|\s+{re.escape(module)}(\.\S+)?$", importtime, re.M) is not None


def test_a_plain_search_reaches_the_server_before_typer_parses_it(server: Server, coa_bundle: Path) -> None:
    """`search B Q [--json]` goes to the server before typer loads (`vault2okf.cli.main`) and imports none of
    numpy, torch, chromadb, duckdb, typer or urllib (`client.post` speaks HTTP on a socket); the typed form (any
    option: here the default --k) gives the same result."""
    from retriever.spec import DEFAULT_SPEC

    for options in (["--json"], []):
        plain = _run_importtime("search", str(coa_bundle), QUESTION, *options)
        typed = _run_importtime("search", str(coa_bundle), QUESTION, *options, "--k", str(DEFAULT_SPEC.k))
        assert [m for m in HEAVY if _imported(plain.stderr, m)] == []
        assert [m for m in ("typer", "urllib.request", "http.client") if _imported(plain.stderr, m)] == []
        assert _imported(typed.stderr, "pydantic") and not _imported(typed.stderr, "onnxruntime")  # typer, served
        if options:
            assert without_timings(json.loads(plain.stdout)) == without_timings(json.loads(typed.stdout))
        else:
            assert MS.sub("", plain.stdout) == MS.sub("", typed.stdout)


def _importtime(*args: str) -> str:
    return _run_importtime(*args).stderr


def _run_importtime(*args: str) -> subprocess.CompletedProcess[str]:
    from serve_checks import ENV, ROOT

    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "vault2okf", *args], capture_output=True,
                          text=True, env=ENV, cwd=ROOT, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_a_stale_address_is_ignored(coa_bundle: Path, tmp_path: Path) -> None:
    state = coa_bundle / ".vault2okf" / "serve.json"
    with serving([coa_bundle], "--llm", "extract", errlog=tmp_path / "err.txt") as server:
        os.kill(server.process.pid, signal.SIGKILL)  # killed: it leaves its address behind
        server.process.wait()
        assert state.exists()
        stale = cli("search", str(coa_bundle), QUESTION, "--json")
    try:
        alone = cli("search", str(coa_bundle), QUESTION, "--json", "--no-server")
        assert stale.returncode == 0 and stale.stderr == alone.stderr == ""
        assert without_timings(json.loads(stale.stdout)) == without_timings(json.loads(alone.stdout))
    finally:
        state.unlink(missing_ok=True)


def test_a_server_breaking_off_mid_request_falls_back_with_one_note(coa_bundle: Path) -> None:
    """A server that accepts the request, then drops the connection (as a crash does)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def crash() -> None:
        while not stop.is_set():
            conn, _ = listener.accept()
            conn.recv(65536)  # the request, read; then gone without a reply
            conn.close()

    threading.Thread(target=crash, daemon=True).start()
    state = coa_bundle / ".vault2okf" / "serve.json"
    address = {
        "host": "127.0.0.1",
        "port": port,
        "pid": os.getpid(),
        "name": "children-of-ash",
        "generation": "",
        "notice": None,
        "token_file": None,
        "answer": AnswerSpec.of("extract").to_json(),
    }  # the record a `serve --llm extract` leaves
    state.write_text(json.dumps(address))
    try:
        for command in (["search", "--json"], ["ask", "--llm", "extract", "--json"], ["ask", "--llm", "extract"]):
            broken = cli(command[0], str(coa_bundle), QUESTION, *command[1:])
            alone = cli(command[0], str(coa_bundle), QUESTION, *command[1:], "--no-server")
            assert broken.returncode == 0, broken.stderr
            notes = [line for line in broken.stderr.splitlines() if line not in alone.stderr.splitlines()]
            assert len(notes) == 1 and notes[0].startswith(f"note: the server at http://127.0.0.1:{port} stopped")
            if "--json" in command:
                assert without_timings(json.loads(broken.stdout)) == without_timings(json.loads(alone.stdout))
            else:
                assert broken.stdout == alone.stdout
    finally:
        state.unlink(missing_ok=True)
        stop.set()
        listener.close()
