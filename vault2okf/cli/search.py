"""``vault2okf search BUNDLE QUESTION``: the notes a question retrieves, with score, via and tokens."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retriever.spec import SearchSpec, left_out_notice
from vault2okf.cli.options import BUNDLE, CHROMA_URL, QUESTION, check_question, open_retriever, search_options
from vault2okf.cli.render import echo, hit_lines, notes
from vault2okf.cli.through import NO_SERVER, search_through_server


@search_options
def search_cmd(
    bundle: Path = BUNDLE,
    question: str = QUESTION,
    chroma_url: str | None = CHROMA_URL,
    as_json: bool = typer.Option(False, "--json", help="Print hits as JSON."),
    no_server: bool = NO_SERVER,
    *,
    spec: SearchSpec,
) -> None:
    """Retrieve the notes for QUESTION: each with score, via (vector | hop) and tokens."""
    check_question(question)
    retrieval = search_through_server(bundle, question, spec, chroma_url=chroma_url, no_server=no_server)
    if retrieval is None:  # no `vault2okf serve` holds the bundle (or --no-server): in this process
        retrieval = open_retriever(bundle, chroma_url, spec).search(question, spec)
    notes([left_out_notice(retrieval, spec.budget)])
    if as_json:
        payload = {"question": question, "mode": retrieval.mode, "k": spec.k, "ranker": retrieval.ranker,
                   "notes": retrieval.notes, "tokens": retrieval.tokens, "left_out": retrieval.left_out,
                   "timings_ms": retrieval.timings, "hits": [h.to_json() for h in retrieval.hits]}  # fmt: skip
        echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    for line in hit_lines(retrieval):
        typer.echo(line)
    typer.echo(f"{retrieval.notes} notes, {retrieval.tokens} tokens, {retrieval.timings.get('retrieve_ms', 0):.1f} ms")
