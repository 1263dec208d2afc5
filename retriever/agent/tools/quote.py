"""``quote``: a question answered with quotes from the notes, no model (``--llm extract`` behind a tool).

For a client whose model cannot (or should not) read whole notes, and as the fallback of a client with no model
of its own: the default search, then the one to three passages of the found notes that best answer the question,
verbatim, each with its note id and heading and how well it answers (``support``: strong or weak, and a one-line
``reason``, ``retriever/answer/support.py``), or ``not_found`` when no passage shares a word with the question
(``retriever/answer/extract.py``).
"""

from __future__ import annotations

from typing import Annotated, Any

from retriever.agent.tools.context import ToolContext
from retriever.agent.tools.declare import Arg
from retriever.agent.tools.results import Shown, ToolError


def quote(ctx: ToolContext, question: Annotated[str, Arg("The question, in words.", max_length=300)]) -> Shown:
    """Answer a question with quotes from the notes, without a model: the passages of the notes found for it that
    best answer it, verbatim, each with its note id, heading and support (strong: it covers the question and holds
    what it asks for; weak: the closest there is). not_found: no passage shares a word with the question; search
    and read_note can still find what a quote would miss."""
    from retriever.answer.extract import ExtractAnswerer
    from retriever.answer.prompt import context_notes  # the answer package only when this tool runs

    if not str(question).strip():
        raise ToolError("question is empty: ask something")
    retriever = ctx.retriever()
    retrieval = retriever.search(str(question), ctx.spec)
    notes = context_notes(retrieval)
    answer = ExtractAnswerer().answer(str(question), notes)
    quotes = [{"id": c.note_id, "title": c.title, "heading": c.heading or "", "quote": c.quote,
               "support": c.support, "reason": c.reason} for c in answer.citations]  # fmt: skip
    payload: dict[str, Any] = {"question": question, "not_found": answer.not_found, "support": answer.support,
                               "quotes": quotes, "notes_searched": len(notes)}  # fmt: skip
    payload = ctx.fit(payload, "ask a narrower question", "quotes")
    shown = answer.citations[: len(payload["quotes"])]
    headings = {c.note_id: (c.heading,) for c in shown if c.heading}
    return Shown(payload, tuple(dict.fromkeys(c.note_id for c in shown)), headings)
