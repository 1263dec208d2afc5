"""``vault2okf search BUNDLE QUESTION``: the notes a question retrieves, with score, via and tokens."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from retriever.retrieve import Retrieval, Retriever, SearchSpec
from vault2okf.cli.options import BUNDLE, CHROMA_URL, QUESTION, check_question, search_options
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
        retriever = open_retriever(bundle, chroma_url)
        retriever.prepare(spec)
        retrieval = searched(retriever, question, spec)
    if as_json:
        payload = {"question": question, "mode": retrieval.mode, "k": spec.k, "ranker": retrieval.ranker,
                   "notes": retrieval.notes, "tokens": retrieval.tokens, "left_out": retrieval.left_out,
                   "timings_ms": retrieval.timings, "hits": [h.to_json() for h in retrieval.hits]}  # fmt: skip
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    for line in hit_lines(retrieval):
        typer.echo(line)
    typer.echo(f"{retrieval.notes} notes, {retrieval.tokens} tokens, {retrieval.timings.get('retrieve_ms', 0):.1f} ms")


def hit_lines(retrieval: Retrieval) -> list[str]:
    """A header, then one line per hit: rank, via, its score in the column of its stage (a vector hit's cosine
    and a hop hit's ranker score are different scales, so never one column), tokens, vault path (``search``
    and chat's ``/search`` and ``/sources``)."""
    lines = ["  #  via     vector     hop  tokens  note"]
    for rank, hit in enumerate(retrieval.hits, start=1):
        score = f"{hit.score:7.3f}"
        vector, hop = (score, "") if hit.via == "vector" else ("", score)
        lines.append(f"{rank:>3}. {hit.via:<6} {vector:>7} {hop:>7} {hit.tokens:>5} tok  {hit.vault_path}")
    return lines


def searched(retriever: Retriever, question: str, spec: SearchSpec) -> Retrieval:
    """``retriever.search``, saying on stderr when the budget left retrieved notes out (``search``, ``ask``)."""
    retrieval = retriever.search(question, spec)
    if retrieval.left_out:
        b = spec.budget
        caps = ", ".join(f"--max-{what} {cap}" for what, cap in (("notes", b.notes), ("tokens", b.tokens)) if cap)
        what = "no retrieved note fits" if not retrieval.hits else f"{retrieval.left_out} retrieved notes do not fit"
        typer.echo(f"note: {what} the context budget ({caps})", err=True)
    return retrieval


def open_retriever(bundle: Path, chroma_url: str | None) -> Retriever:
    """``Retriever.open``, saying on stderr what the index's state means for the results (``search``, ``ask``,
    ``chat``): an ``index`` rewriting it now, or an interrupted one."""
    retriever = Retriever.open(bundle, chroma_url=chroma_url)
    for notice in retriever.notices:
        typer.echo(f"note: {notice}", err=True)
    return retriever
