"""``vault2okf search BUNDLE QUESTION``: the notes a question retrieves, with score, via and tokens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from retriever.spec import SearchSpec
from vault2okf.cli.options import (
    BUNDLE,
    CHROMA_URL,
    NO_SERVER,
    QUESTION,
    check_question,
    open_retriever,
    search_options,
)
from vault2okf.cli.render import print_search
from vault2okf.cli.through import search_through_server


@search_options
def search_cmd(
    bundle: Path = BUNDLE,
    question: str = QUESTION,
    chroma_url: str | None = CHROMA_URL,
    as_json: bool = typer.Option(False, "--json", help="Print hits as JSON."),
    no_server: bool = NO_SERVER,
    explain_note: str | None = typer.Option(
        None,
        "--explain",
        metavar="NOTE",
        help="Say why NOTE (an id, title or vault path) was or was not retrieved: its rank in each stage, what cut "
        "it (filter, budget, cap, dedup, not reached) and the nearest setting that keeps it.",
    ),
    *,
    spec: SearchSpec,
) -> None:
    """Retrieve the notes for QUESTION: each with score, via (vector | hop) and tokens."""
    check_question(question)
    if explain_note is not None:
        check_note(bundle, explain_note)
    explained: dict[str, Any] | None = None
    found = search_through_server(bundle, question, spec, chroma_url=chroma_url, no_server=no_server,
                                  explain=explain_note)  # fmt: skip
    if found is not None:
        retrieval, explained = found
    else:  # no `vault2okf serve` holds the bundle (or --no-server): in this process
        retriever = open_retriever(bundle, chroma_url, spec)
        retrieval = retriever.search(question, spec)
        if explain_note is not None:
            from retriever.explain import explain

            explained = explain(retriever, question, spec, explain_note).to_json()
    print_search(question, retrieval, spec, as_json, explained)


def check_note(bundle: Path, note: str) -> None:
    """The note ``--explain`` names is one of the bundle's, before any model loads (a bundle that cannot be read
    is said by the search itself)."""
    from retriever.errors import RetrieverError
    from retriever.explain import resolve_note
    from retriever.graph import read_graph

    try:
        graph, _ = read_graph(bundle)
    except (RetrieverError, OSError):
        return
    resolve_note(graph, note)
