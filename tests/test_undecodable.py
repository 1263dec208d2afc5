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
