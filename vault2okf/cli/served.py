"""``vault2okf search BUNDLE QUESTION [--json]`` through a running ``vault2okf serve``, before typer parses the
command line: typer's parameter conversion builds pydantic adapters, about 0.1 s of a served search's 0.25 s
whole command on two cores (``python -X importtime``), and a served search needs none of it.

Only the plain form goes this way: the command, a bundle, a question and at most ``--json``, the search at its
defaults (`retriever.spec.DEFAULT_SPEC`, what the options default to). Anything else (another option, a question
that starts with ``-`` or is empty, no server) runs as always, through typer and `vault2okf.cli.through`. A server
that has gone costs the same one `note:` line as there, and the command runs in process (``--no-server``: it is not
asked twice). What it prints comes from the same code as the typed command (`render.print_search`,
`through.served_retrieval`)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from pathlib import Path


class Outcome(Enum):
    ANSWERED = "answered"  # the server answered and it is printed: the command is done
    TYPED = "typed"  # not a plain search, or no server holds the bundle: the command runs as always
    IN_PROCESS = "in process"  # the server refused or has gone (said in one `note:` line): run with --no-server


def served_search(argv: Sequence[str]) -> Outcome:
    """Run ``argv`` (the command line after the program's name) through the server holding its bundle when it is
    a plain ``search``."""
    plain = _plain_search(argv)
    if plain is None:
        return Outcome.TYPED
    bundle, question, as_json = plain
    from retriever.serve.client import ServerGone, ServerRefused, find, post

    address = find(Path(bundle))
    if address is None:
        return Outcome.TYPED
    from retriever.spec import DEFAULT_SPEC
    from vault2okf.cli.render import notes, print_search
    from vault2okf.cli.through import gone, served_retrieval, spec_body

    try:
        found = post(address, "/search", spec_body(question, DEFAULT_SPEC, address.name))
    except ServerGone as e:
        gone(address, e)
        return Outcome.IN_PROCESS
    except ServerRefused:  # in process, which says what is wrong as the command always does
        return Outcome.IN_PROCESS
    notes(found.get("notices", []))
    print_search(question, served_retrieval(found["hits"], found, DEFAULT_SPEC), DEFAULT_SPEC, as_json, None)
    return Outcome.ANSWERED


def _plain_search(argv: Sequence[str]) -> tuple[str, str, bool] | None:
    """(bundle, question, --json) of ``search BUNDLE QUESTION [--json]``; None for any other command line."""
    if not argv or argv[0] != "search":
        return None
    rest = list(argv[1:])
    as_json = rest.count("--json") == 1
    if as_json:
        rest.remove("--json")
    if len(rest) != 2 or any(not arg or arg.startswith("-") for arg in rest):
        return None
    bundle, question = rest
    if not question.strip() or not _encodable(question):  # the typed command says what is wrong with it
        return None
    return bundle, question, as_json


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 on the command line
        return False
    return True
