"""``vault2okf ask BUNDLE QUESTION``: an answer from the notes, citing them; with ``--agent`` the model searches."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import typer

from retriever.agent.spec import AgentSpec
from retriever.answer.backends import AnswerSpec
from retriever.spec import Retrieval, SearchSpec, left_out_notice
from vault2okf.cli.options import (
    BUNDLE,
    CHROMA_URL,
    NO_SERVER,
    QUESTION,
    agent_options,
    answer_options,
    check_agent,
    check_question,
    open_retriever,
    search_options,
)  # fmt: skip
from vault2okf.cli.render import context_lines, echo, notes, print_token, render_sources
from vault2okf.cli.through import ask_through_server


@search_options
@answer_options
@agent_options
def ask_cmd(
    bundle: Path = BUNDLE,
    question: str = QUESTION,
    chroma_url: str | None = CHROMA_URL,
    as_json: bool = typer.Option(False, "--json", help="Answer, citations, retrieved notes, timings as JSON."),
    no_server: bool = NO_SERVER,
    *,
    spec: SearchSpec,
    answer: AnswerSpec,
    agent: AgentSpec | None,
) -> None:
    """Answer QUESTION from the notes, citing them; says 'not found in the vault' when they do not hold it."""
    from retriever.asker import Asker

    check_question(question)
    check_agent(agent, answer)
    answer.check()  # a missing GGUF or model ID fails here, before any model loads
    if ask_through_server(bundle, question, spec, answer, as_json=as_json, chroma_url=chroma_url,
                          no_server=no_server or agent is not None):  # fmt: skip
        return  # a `vault2okf serve` holds the bundle and answered
    retriever = open_retriever(bundle, chroma_url, spec)
    with Asker(retriever, spec, answer, agent) as asker:
        notes([asker.notice])
        early = agent is None and not as_json and sys.stdout.isatty()  # a person watching: the notes while it loads

        def retrieved(retrieval: Retrieval) -> None:
            notes([left_out_notice(retrieval, spec.budget)])
            if early:
                for line in context_lines(None, retrieval.hits):
                    typer.echo(line, err=True)

        show = None if as_json or agent is None else _show_call
        result = asker.ask(question, on_token=None if as_json else print_token, on_retrieved=retrieved, on_call=show,
                           started=process_started())  # fmt: skip
    if as_json:
        echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return
    if result.agent is not None:  # the loop answers at once, not streamed
        echo(result.answer.text)
    else:
        typer.echo("")
    for line in render_sources(result.answer):
        typer.echo(line)
    if result.agent is not None:
        from retriever.agent.loop import trace_lines

        typer.echo(list(trace_lines(result.agent))[-1], err=True)
    elif not early and result.retrieval is not None:  # (on a terminal the notes were listed before the answer)
        for line in context_lines(result.answer, result.retrieval.hits):
            typer.echo(line, err=True)


def _show_call(call: Any) -> None:
    """One tool call of ``ask --agent``'s trace, on stderr as it is made (the loop is imported only for --agent)."""
    from retriever.agent.loop import trace_lines_of

    typer.echo(next(iter(trace_lines_of([call]))), err=True)


def process_started() -> float:
    """This process's start as a ``time.perf_counter()`` value (Linux: /proc/self/stat, to 10 ms), so timings can
    count the interpreter's start and the imports too; elsewhere, now."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.perf_counter()
    return time.perf_counter() - max(age, 0.0)
