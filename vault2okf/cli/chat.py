"""``vault2okf chat BUNDLE``: a warm session that loads the embedder, the index and the answerer once.

Enter asks (the answer streams, then its sources), ``/search QUESTION`` retrieves only, ``/sources`` lists what
the last question retrieved and cited, ``/history`` the session's questions (also on the arrow keys where
readline is available), ``/help``, ``/quit`` (or Ctrl-D). A question that fails prints ``Error: ...`` and the
session goes on; Ctrl-C stops an answer, not the session. Search and answer options are those of ``ask``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import typer

from retriever.answer.backends import AnswerSpec
from retriever.asker import Asker, AskResult
from retriever.errors import RetrieverError, check_decodable
from retriever.retrieve import Retrieval, SearchSpec, left_out_notice
from vault2okf.cli.options import BUNDLE, CHROMA_URL, answer_options, open_retriever, search_options
from vault2okf.cli.render import context_lines, hit_lines, notes, render_sources, terminal

PROMPT = "> "
HELP = "Enter a question, or /search QUESTION, /sources, /history, /help, /quit."
SESSION_ERRORS = (RetrieverError, OSError)  # one bad question never ends the session


@dataclass
class ChatSession:
    """What one session holds: the asker (the opened retriever and answerer), the questions asked, the last
    result. It asks exactly as ``ask`` does (``retriever.asker``): the same prompt for the same question."""

    asker: Asker
    out: TextIO = field(default_factory=lambda: sys.stdout)
    err: TextIO = field(default_factory=lambda: sys.stderr)
    history: list[str] = field(default_factory=list)
    last: AskResult | Retrieval | None = None

    def handle(self, line: str) -> bool:
        """Run one input line; False when the session should end."""
        text = line.strip()
        if not text:
            return True
        try:
            check_decodable(text, "the line")  # not UTF-8: said, never kept in the history, the session goes on
        except RetrieverError as exc:
            return self._error(exc)
        if not text.startswith("/"):
            return self._guarded(text, self.ask)
        command, _, rest = text.partition(" ")
        command = command.lower()
        if command in ("/quit", "/exit", "/q"):
            return False
        if command == "/search":
            return self._guarded(rest.strip(), self.search) if rest.strip() else self._say("usage: /search QUESTION")
        if command == "/sources":
            return self._sources()
        if command == "/history":
            for i, question in enumerate(self.history, start=1):
                self._print(f"{i:>3}. {question}")
            return True
        if command in ("/help", "/?"):
            return self._say(HELP)
        return self._say(f"unknown command {command}. {HELP}")

    def ask(self, question: str) -> None:
        self.history.append(question)
        streamed: list[str] = []

        def on_token(token: str) -> None:
            streamed.append(token)
            self.out.write(terminal(token))
            self.out.flush()

        result = self.asker.ask(question, on_token=on_token, on_retrieved=self._reading)
        self.last = result
        if not streamed:
            self.out.write(terminal(result.answer.text))
        for line in render_sources(result.answer) or [""]:  # the quote each citation rests on, like ask's
            self._print(line)
        t, r = result.timings, result.retrieval
        search_ms = t.get("embed_ms", 0.0) + t.get("retrieve_ms", 0.0)
        notes, tokens = (r.notes, r.tokens) if r is not None else (0, 0)
        self._note(
            f"{notes} notes, {tokens} tokens; search {search_ms:.0f} ms, "
            f"answer {t.get('answer_ms', 0.0) / 1000:.1f} s ({result.answer.prompt_tokens} prompt tokens)"
        )

    def search(self, question: str) -> None:
        self.history.append(f"/search {question}")
        retrieval = self.asker.search(question)
        self._left_out(retrieval)
        self.last = retrieval
        self._hits(retrieval)
        t = retrieval.timings
        self._note(
            f"{retrieval.notes} notes, {retrieval.tokens} tokens; "
            f"search {t.get('embed_ms', 0.0) + t.get('retrieve_ms', 0.0):.0f} ms"
        )

    def _reading(self, retrieval: Retrieval) -> None:
        """The notes the answer will come from, on one line, as soon as retrieval ends (prompt processing takes
        seconds on a CPU; the numbered list with the cited ones marked is /sources)."""
        self._left_out(retrieval)
        titles = list(dict.fromkeys(h.title for h in retrieval.hits))
        shown = ", ".join(titles[:6]) + (f", … {len(titles) - 6} more" if len(titles) > 6 else "")
        self._note(f"reading {len(titles)} notes: {shown}" if titles else "no note retrieved")

    def _left_out(self, retrieval: Retrieval) -> None:
        notice = left_out_notice(retrieval, self.asker.spec.budget)
        if notice:
            self._note(f"note: {notice}")

    def _sources(self) -> bool:
        if self.last is None:
            return self._say("nothing asked yet")
        if isinstance(self.last, AskResult):
            hits = self.last.retrieval.hits if self.last.retrieval is not None else ()
            for line in context_lines(self.last.answer, hits):  # each note once, cited ones marked
                self._print(line)
        else:
            self._hits(self.last)
        return True

    def _hits(self, retrieval: Retrieval) -> None:
        for line in hit_lines(retrieval):
            self._print(line)

    def _guarded(self, text: str, run: Callable[[str], None]) -> bool:
        try:
            run(text)
        except SESSION_ERRORS as exc:
            self._print("")
            self._error(exc)
        except KeyboardInterrupt:
            self._print("")
            self._note("(stopped)")
        return True

    def _error(self, exc: Exception) -> bool:
        self.err.write(terminal(f"Error: {exc}") + "\n")
        self.err.flush()
        return True

    def _say(self, text: str) -> bool:
        self._print(text)
        return True

    def _print(self, text: str) -> None:
        self.out.write(terminal(text) + "\n")
        self.out.flush()

    def _note(self, text: str) -> None:
        self.err.write(terminal(text) + "\n")
        self.err.flush()


def run_session(session: ChatSession, read: Callable[[str], str] = input) -> None:
    """Read lines until /quit or end of input; Ctrl-C at the prompt clears the line."""
    while True:
        try:
            line = read(PROMPT)
        except UnicodeDecodeError as exc:  # a stdin that could not be set to surrogateescape
            session._error(RetrieverError(f"the line is not valid UTF-8 text ({exc.reason}): retype it in UTF-8"))
            continue
        except EOFError:
            session._print("")
            return
        except KeyboardInterrupt:
            session._print("")
            continue
        if not session.handle(line):
            return


def _readline_history() -> None:
    """Arrow-key editing and the session's questions on up/down, when the terminal supports it."""
    if not sys.stdin.isatty():
        return
    try:
        import readline  # noqa: F401  (importing it is what turns line editing on for input())
    except ImportError:
        return


@search_options
@answer_options
def chat_cmd(
    bundle: Path = BUNDLE,
    chroma_url: str | None = CHROMA_URL,
    verbose: bool = typer.Option(False, "--verbose", help="Let model libraries print their progress and logs."),
    *,
    spec: SearchSpec,
    answer: AnswerSpec,
) -> None:
    """Ask many questions of BUNDLE in one session: the models and the index load once."""
    if verbose:
        os.environ["VAULT2OKF_VERBOSE"] = "1"
    answer.check()  # a missing GGUF or model ID fails here, before any model loads
    started = time.perf_counter()
    retriever = open_retriever(bundle, chroma_url, spec)
    retriever.embed("warm up")  # the first question pays no one-time set-up of the embedder
    asker = Asker(retriever, spec, answer)
    notes([asker.notice])  # the answerer is built here, after --verbose: llama.cpp's log lines too
    count, chunks = len(retriever.table.rows_of), len(retriever.table.ids)
    typer.echo(
        f"{bundle}: {count} notes, {chunks} chunks, ready in {time.perf_counter() - started:.1f} s. {HELP}", err=True
    )
    _readline_history()
    _tolerant_stdin()
    run_session(ChatSession(asker))


def _tolerant_stdin() -> None:
    """Bytes that are not UTF-8 reach the session as surrogates (then one Error line) instead of ending it."""
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:
        with contextlib.suppress(OSError, ValueError):
            reconfigure(errors="surrogateescape")
