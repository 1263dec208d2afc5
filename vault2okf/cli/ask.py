"""``vault2okf ask BUNDLE QUESTION``: an answer from the notes, citing them; with ``--agent`` the model searches."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import typer

from retriever.answer.base import Answer, AnswerSpec, Backend
from retriever.retrieve import Hit, Retrieval, Retriever, SearchSpec
from vault2okf.cli.options import BUNDLE, CHROMA_URL, NO_AGENT, QUESTION, answer_options, check_question, search_options
from vault2okf.cli.through import NO_SERVER, ask_through_server


@search_options
@answer_options
def ask_cmd(
    bundle: Path = BUNDLE,
    question: str = QUESTION,
    chroma_url: str | None = CHROMA_URL,
    as_json: bool = typer.Option(False, "--json", help="Answer, citations, retrieved notes, timings as JSON."),
    agent: bool = typer.Option(
        False, "--agent", help="Let the model call the bundle's tools (search, read_note, neighbours, sql, schema)."
    ),
    steps: int = typer.Option(5, "--steps", min=0, help="With --agent: most tool calls before it must answer."),
    prefetch: bool = typer.Option(
        False, "--prefetch", help="With --agent: start from the search of the question, as if the model called it."
    ),
    no_server: bool = NO_SERVER,
    *,
    spec: SearchSpec,
    answer: AnswerSpec,
) -> None:
    """Answer QUESTION from the notes, citing them; says 'not found in the vault' when they do not hold it."""
    from retriever.answer.ask import ask
    from retriever.answer.base import check_answerer
    from vault2okf.cli.search import open_retriever, searched

    check_question(question)
    if prefetch and not agent:
        raise typer.BadParameter("--prefetch is for the agent loop: add --agent", param_hint="'--prefetch'")
    if agent and answer.llm == Backend.EXTRACT:
        raise typer.BadParameter(NO_AGENT, param_hint="'--agent'")
    check_answerer(answer.llm, model=answer.model)  # a missing GGUF or model ID fails here, before any model loads
    if ask_through_server(
        bundle, question, spec, answer, as_json=as_json, chroma_url=chroma_url, no_server=no_server or agent
    ):  # a `vault2okf serve` holds the bundle: through it
        return
    retriever = open_retriever(bundle, chroma_url)
    retriever.prepare(spec)
    if agent:  # retriever/agent/loop.py: the model calls the tool layer, then answers from what it returned
        _ask_agent(bundle, question, retriever, spec, answer, steps=steps, prefetch=prefetch, as_json=as_json)
        return
    answerer = answer.answerer()
    say_notice(answerer.notice)
    stream = None if as_json else _print_token
    early = not as_json and sys.stdout.isatty()  # a person watching: the notes while the model loads
    result = ask(
        question, lambda q: searched(retriever, q, spec), answerer, on_token=stream,
        concepts=retriever.graph.concepts, on_retrieved=_print_retrieved if early else None,
        started=process_started(),
    )  # fmt: skip
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return
    typer.echo("")
    for line in render_sources(result.answer):
        typer.echo(line)
    if not early:  # (on a terminal the notes were listed before the answer)
        for line in context_lines(result.answer, result.retrieval.hits):
            typer.echo(line, err=True)


def _print_retrieved(retrieval: Retrieval) -> None:
    """The notes retrieved for the answer, listed before it (the model may take seconds to load)."""
    for line in context_lines(None, retrieval.hits):
        typer.echo(line, err=True)


def process_started() -> float:
    """This process's start as a ``time.perf_counter()`` value (Linux: /proc/self/stat, to 10 ms), so timings can
    count the interpreter's start and the imports too; elsewhere, now."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.perf_counter()
    return time.perf_counter() - max(age, 0.0)


def _ask_agent(
    bundle: Path,
    question: str,
    retriever: Retriever,
    spec: SearchSpec,
    answer: AnswerSpec,
    *,
    steps: int,
    prefetch: bool,
    as_json: bool,
) -> None:
    """``ask --agent``: the loop with the command's search options; the trace on stderr, then the answer."""
    from retriever.agent.loop import AgentSpec, ask_agent, get_driver, trace_lines, trace_lines_of

    driver = get_driver(answer)
    say_notice(driver.notice)
    show = None if as_json else (lambda call: typer.echo(next(iter(trace_lines_of([call]))), err=True))
    result = ask_agent(bundle, question, retriever, spec, driver, AgentSpec(steps, prefetch), on_call=show)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return
    typer.echo(result.answer.text)
    for line in render_sources(result.answer):
        typer.echo(line)
    typer.echo(list(trace_lines(result))[-1], err=True)


def render_sources(answer: Answer) -> list[str]:
    """What follows the streamed answer text: the "Sources" list, or why there is none."""
    if answer.not_found:
        return []
    if not answer.citations:
        return ["", "(unsupported: this answer cites no note of its context — do not rely on it)"]
    lines = ["", f"(unsupported: {answer.flag} — do not rely on it)"] if answer.flag else []
    lines += ["", "Sources:"]
    for number, c in enumerate(answer.citations, start=1):
        anchor = f"#{c.heading}" if c.heading else ""
        quote = f': "{_clip(c.quote)}"' if c.quote and c.quote not in answer.text else ""  # extract quoted it
        lines.append(f"  [{number}] {c.label}{quote} — {c.path}{anchor}")
    return lines


def context_lines(answer: Answer | None, hits: Sequence[Hit]) -> list[str]:
    """The notes the answer was given, each once, in context order: how it came (vector or hop) and, for a
    cited note, the numbers of its citations in the Sources list (none before the answer: ``answer`` None)."""
    cited: dict[str, list[str]] = {}
    for number, c in enumerate(answer.citations if answer else (), start=1):
        cited.setdefault(c.note_id, []).append(f"[{number}]")
    seen: set[str] = set()
    lines = [f"Context ({len({h.note_id for h in hits})} notes):"]
    for hit in hits:
        if hit.note_id in seen:
            continue
        seen.add(hit.note_id)
        mark = f"cited {' '.join(cited[hit.note_id])}" if hit.note_id in cited else ""
        lines.append(f"  {mark:<12} {hit.via:<6} {hit.title} ({hit.doc_path})")
    return lines


def _clip(text: str, most: int = 200) -> str:
    """A quote for one line: its first ``most`` characters, cut at a word, with "…"."""
    text = " ".join(text.split())
    return text if len(text) <= most else text[:most].rsplit(" ", 1)[0] + " …"


def say_notice(notice: str | None) -> None:
    """A model's notice (the tiny packaged model is in use), on stderr."""
    if notice:
        typer.echo(f"note: {notice}", err=True)


def _print_token(token: str) -> None:
    sys.stdout.write(token)
    sys.stdout.flush()
