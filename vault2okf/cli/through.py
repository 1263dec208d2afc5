"""`search` and `ask` through a running `vault2okf serve` (``retriever.serve.client``): when a server holds the
bundle (its address in ``BUNDLE/.vault2okf/serve.json``), the command sends it the question and prints what the
in-process command prints, from the same code (``hit_lines``, ``render_sources``, ``context_lines``, the same
`note:` lines); ``--no-server`` forces in-process. A server that is gone, or stops mid-request, costs one `note:`
line and the command runs in process. Each command calls one function here, first."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from vault2okf.cli.render import context_lines, echo, notes, print_token, render_sources


def _address(bundle: Path, no_server: bool, chroma_url: str | None) -> Any:
    if no_server or chroma_url:
        return None
    from retriever.serve.client import find

    return find(bundle)


def spec_body(question: str, spec: Any, name: str) -> dict[str, Any]:
    """The `/search` body of ``spec``: every field, so the server runs exactly this search."""
    b = spec.budget
    return {"question": question, "bundle": name or None, "mode": str(spec.mode), "k": spec.k,
            "seeds": str(spec.seeds), "ranker": spec.ranker, "sessions": spec.sessions, "mentions": spec.mentions,
            "named": spec.named, "dedup": spec.dedup, "threads": spec.threads, "phrases": spec.phrases,
            "runs": spec.runs, "mention_edges": spec.mention_edges, "entities": spec.entities,
            "entity_rank": spec.entity_rank, "scale_seeds": spec.scale_seeds, "twins": spec.twins,
            "passage": spec.passage, "seed_passage": spec.seed_passage, "passage_sessions": spec.passage_sessions,
            "max_notes": b.notes, "max_tokens": b.tokens, "match_vector": b.match,
            "filters": spec.filters.to_json()}  # fmt: skip


def gone(address: Any, error: Exception) -> None:
    echo(f"note: the server at {address.url} stopped answering ({error}); running in this process", err=True)


def search_through_server(
    bundle: Path, question: str, spec: Any, *, chroma_url: str | None, no_server: bool, explain: str | None = None
) -> tuple[Any, dict[str, Any] | None] | None:
    """The ``Retrieval`` the server holding ``bundle`` gives (its notes said as in-process) and its explanation of
    the note ``explain`` names (None without one), or None: run in process (no server, ``--no-server``, or it
    stopped answering: one `note:` line)."""
    address = _address(bundle, no_server, chroma_url)
    if address is None:
        return None
    from retriever.serve.client import ServerGone, ServerRefused, post

    body = spec_body(question, spec, address.name)
    if explain is not None:
        body["explain"] = explain
    try:
        found = post(address, "/search", body)
    except ServerGone as e:
        gone(address, e)
        return None
    except ServerRefused:
        return None  # in process, which says what is wrong as the command always does
    if explain is not None and "explain" not in found:
        return None  # a server from before `explain`: in process
    notes(found.get("notices", []))
    # the command says what the budget left out, as in process
    return served_retrieval(found["hits"], found, spec), found.get("explain")


def served_retrieval(hits: list[dict[str, Any]], found: dict[str, Any], spec: Any) -> Any:
    from retriever.spec import Hit, Mode, Retrieval, Via

    made = tuple(
        Hit(
            h["note_id"],
            h["title"],
            h["vault_path"],
            h["doc_path"],
            h["score"],
            Via(h["via"]),
            "",
            h["tokens"],
            h.get("session_label"),
        )  # fmt: skip
        for h in hits
    )
    return Retrieval(made, Mode(found["mode"]), found.get("k", spec.k), found.get("ranker"),
                     found.get("timings_ms", {}), found.get("left_out", 0))  # fmt: skip


def ask_through_server(
    bundle: Path, question: str, spec: Any, answer: Any, *, as_json: bool, chroma_url: str | None, no_server: bool
) -> bool:
    """Answer through the server holding ``bundle`` and print as `ask` does; False: run in process (no server,
    one with another answerer, ``--no-server``, or it stopped answering: one `note:` line)."""
    address = _address(bundle, no_server, chroma_url)
    if address is None or address.answer != answer.to_json():
        return False
    from retriever.serve.client import ServerGone, ServerRefused, events, post

    body = spec_body(question, spec, address.name)
    try:
        if as_json:
            result = post(address, "/ask", body)
            notes([address.notice])
            _say_left_out(result, question, spec)
            echo(json.dumps(result, indent=2, ensure_ascii=False))
            return True
        notes([address.notice])
        return _stream(address, body, question, spec, events)
    except ServerGone as e:
        gone(address, e)
        return False
    except ServerRefused:
        return False


def _say_left_out(result: dict[str, Any], question: str, spec: Any) -> None:
    from retriever.spec import left_out_notice

    r = result["retrieval"]
    notes([left_out_notice(served_retrieval(result["retrieved"], {**r, "timings_ms": {}}, spec), spec.budget)])


def _stream(address: Any, body: dict[str, Any], question: str, spec: Any, events: Any) -> bool:
    """The answer streamed as `ask` prints it: tokens on stdout, then the sources; the context on stderr."""
    early = sys.stdout.isatty()
    for event, data in events(address, "/ask", body):
        if event == "sources" and early:
            for line in context_lines(None, served_retrieval(data["hits"], {"mode": "union"}, spec).hits):
                echo(line, err=True)
        elif event == "token":
            print_token(data["text"])
        elif event == "error":
            echo(f"note: the server could not answer ({data['error']}); running in this process", err=True)
            return False
        elif event == "done":
            _say_left_out(data, question, spec)
            answer = _answer(data)
            echo("")
            for line in render_sources(answer):
                echo(line)
            if not early:
                hits = served_retrieval(data["retrieved"], {**data["retrieval"], "timings_ms": {}}, spec).hits
                for line in context_lines(answer, hits):
                    echo(line, err=True)
            return True
    return False


def _answer(done: dict[str, Any]) -> Any:
    from retriever.answer.contract import Answer, Citation

    citations = tuple(Citation(c["title"], c["path"], c["note_id"], c["heading"], c.get("quote", ""))
                      for c in done["citations"])  # fmt: skip
    tokens = done.get("tokens", {})
    return Answer(done["answer"], citations, done.get("finish_reason", ""), tokens.get("prompt", 0),
                  tokens.get("completion", 0), 0.0, done.get("model", ""), done.get("not_found", False),
                  flag=done.get("flag", ""))  # fmt: skip
