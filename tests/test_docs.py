"""The documentation against the code: ``--help`` lists the everyday options first and the retrieval experiments
apart; docs/cli.md is what ``scripts/cli_reference.py`` writes from the commands' ``--help`` now, and documents
every command."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

from vault2okf.cli import COMMANDS, app
from vault2okf.cli.options import EXPERIMENTS

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cli_reference.py"
FENCED = re.compile(r"^```.*?^```", re.M | re.S)
INLINE = re.compile(r"`[^`\n]*`")

EVERYDAY = ("--k", "--mode", "--max-notes", "--max-tokens", "--type", "--tag", "--folder", "--since", "--until")
EXPERIMENTAL = (
    "--match-vector", "--ranker", "--seeds", "--dedup", "--sessions", "--mentions", "--named", "--threads", "--phrases",
    "--runs", "--mention-edges", "--entities", "--entity-rank", "--scale-seeds", "--twins", "--passage",
    "--seed-passage", "--passage-sessions",
)  # fmt: skip
ANSWER = ("--llm", "--model", "--answer-tokens")


def help_text(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], prog_name="vault2okf", terminal_width=80)
    assert result.exit_code == 0, result.output
    return result.stdout


def sections(text: str) -> dict[str, str]:
    """The help's sections by title ("Options", "Retrieval experiments ..."), each with its lines."""
    found: dict[str, list[str]] = {}
    current = ""
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
        found.setdefault(current, []).append(line)
    return {title: "\n".join(lines) for title, lines in found.items()}


def options_of(section: str) -> set[str]:
    return {word.split("/")[0] for line in section.splitlines() for word in line.split()[:1] if word.startswith("--")}


@pytest.mark.parametrize("command", ["search", "ask", "chat"])
def test_help_shows_the_everyday_options_first_and_the_experiments_apart(command: str) -> None:
    text = help_text(command)
    parts = sections(text)
    assert list(parts)[-1] == EXPERIMENTS, list(parts)  # the experiments come last, under their own title
    everyday, experiments = options_of(parts["Options"]), options_of(parts[EXPERIMENTS])
    assert set(EVERYDAY) <= everyday and not everyday & set(EXPERIMENTAL)
    assert experiments == set(EXPERIMENTAL)
    if command != "chat":
        assert "--json" in everyday
    if command != "search":
        assert set(ANSWER) <= everyday


def test_commands_without_search_options_have_no_experiments_section() -> None:
    for command in ("convert", "links", "index", "eval", "mcp", "serve", "watch", "doctor"):
        assert EXPERIMENTS not in help_text(command), command


def test_a_usage_error_is_still_plain_text() -> None:
    result = CliRunner().invoke(app, ["search", "b", "q", "--k", "many"], terminal_width=80)
    assert result.exit_code == 2
    assert "Error: Invalid value for '--k'" in result.output and "│" not in result.output and "╭" not in result.output


def reference_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_reference", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_is_what_the_commands_help_says_now() -> None:
    written = (ROOT / "docs" / "cli.md").read_text("utf-8")
    assert written == reference_script().render(), "docs/cli.md is stale: run python scripts/cli_reference.py"


def test_the_cli_reference_documents_every_command() -> None:
    written = (ROOT / "docs" / "cli.md").read_text("utf-8")
    for name in COMMANDS:
        assert f"\n## vault2okf {name}\n" in written, name
        assert f"Usage: vault2okf {name} [OPTIONS]" in written, name
        assert help_text(name) in written, name  # the whole help, as the command prints it at 80 columns


def test_check_mode_exits_1_when_the_reference_differs(tmp_path: Path) -> None:
    out = tmp_path / "cli.md"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}

    def script(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, str(SCRIPT), "--out", str(out), *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path)

    assert script().returncode == 0 and script("--check").returncode == 0
    out.write_text(out.read_text("utf-8").replace("--max-notes", "--most-notes", 1), "utf-8")
    stale = script("--check")
    assert stale.returncode == 1 and "differs" in stale.stderr
    out.unlink()
    assert script("--check").returncode == 1  # no reference at all


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_every_relative_link_points_to_a_file(doc: Path) -> None:
    text = INLINE.sub("", FENCED.sub("", doc.read_text("utf-8")))  # code holds examples, not links
    targets = [t.split("#")[0] for t in LINK.findall(text) if not re.match(r"[a-z]+:|#", t)]
    assert [t for t in targets if not (doc.parent / t).exists()] == [], doc.name
