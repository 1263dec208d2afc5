"""The documentation against the code: ``--help`` lists the everyday options first and the retrieval experiments
apart."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from vault2okf.cli import app
from vault2okf.cli.options import EXPERIMENTS

EVERYDAY = ("--k", "--mode", "--max-notes", "--max-tokens", "--type", "--tag", "--folder", "--since", "--until")
EXPERIMENTAL = (
    "--match-vector", "--ranker", "--seeds", "--dedup", "--sessions", "--mentions", "--named", "--threads", "--phrases"
)  # fmt: skip
ANSWER = ("--llm", "--model", "--answer-tokens")


def help_text(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], terminal_width=80)
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
    for command in ("convert", "links", "index", "eval", "doctor"):
        assert EXPERIMENTS not in help_text(command), command


def test_a_usage_error_is_still_plain_text() -> None:
    result = CliRunner().invoke(app, ["search", "b", "q", "--k", "many"], terminal_width=80)
    assert result.exit_code == 2
    assert "Error: Invalid value for '--k'" in result.output and "│" not in result.output and "╭" not in result.output
