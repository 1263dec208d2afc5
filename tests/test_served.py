"""The plain `search` that `vault2okf.cli.served` sends to a running server before typer parses the command line
(tests/test_serve_cli.py runs it against a server): which command lines are plain."""

from __future__ import annotations

from pathlib import Path

import pytest

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
