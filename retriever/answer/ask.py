"""Ask: retrieve notes for a question, hand them to an answerer, and report answer, citations and timings."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from retriever.answer.base import Answer, Answerer, ContextNote
from retriever.retrieve import Retrieval


@dataclass(frozen=True)
class AskResult:
    question: str
    answer: Answer
    retrieval: Retrieval
    timings: dict[str, float]  # milliseconds

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer.text,
            "not_found": self.answer.not_found,
            "supported": self.answer.supported,
            **({"support": self.answer.support} if self.answer.support else {}),
            "flag": self.answer.flag,
            "citations": [{**c.to_json(), "ref": c.ref} for c in self.answer.citations],
            "retrieved": [h.to_json() for h in self.retrieval.hits],
            "retrieval": {
                "mode": self.retrieval.mode,
                "k": self.retrieval.k,
                "ranker": self.retrieval.ranker,
                "notes": self.retrieval.notes,
                "tokens": self.retrieval.tokens,
                "left_out": self.retrieval.left_out,
            },
            "model": self.answer.model,
            "finish_reason": self.answer.finish_reason,
            "tokens": {"prompt": self.answer.prompt_tokens, "completion": self.answer.completion_tokens},
            "timings_ms": self.timings,
        }


def context_notes(retrieval: Retrieval, concepts: Mapping[str, Any] | None = None) -> list[ContextNote]:
    """The retrieved notes as the answerer sees them; with `concepts` (the graph's), each also carries its type
    and session number/date: those of the concept its hit was made from (`Hit.concept`, read once by the
    retriever), or of the one `concepts` names for a hit made without one."""
    notes = []
    for h in retrieval.hits:
        c = (h.concept or concepts.get(h.note_id)) if concepts else None
        notes.append(ContextNote(
            h.note_id, h.title, h.doc_path, h.text, h.via, h.score, h.session_label,
            type=getattr(c, "type", None) or None, session_number=getattr(c, "session_number", None),
            session_date=getattr(c, "session_date", None), aliases=tuple(getattr(c, "aliases", None) or ()),
        ))  # fmt: skip
    return notes


def ask(
    question: str,
    retrieve: Callable[[str], Retrieval],
    answerer: Answerer,
    on_token: Callable[[str], None] | None = None,
    concepts: Mapping[str, Any] | None = None,
    *,
    on_retrieved: Callable[[Retrieval], None] | None = None,
    started: float | None = None,
) -> AskResult:
    """Retrieve, then answer from the retrieved notes; `concepts` (the graph's) enriches what the prompt shows.

    ``on_retrieved`` gets the retrieval before the answerer starts (a terminal shows the sources while the model
    loads). With ``started`` (a ``time.perf_counter()`` value: the process's start), the timings gain
    ``first_token``: milliseconds from then to the first piece of answer text (to the whole answer when the
    answerer gives it at once)."""
    retrieval = retrieve(question)
    if on_retrieved is not None:
        on_retrieved(retrieval)
    start = time.perf_counter()
    first: list[float] = []

    def token(piece: str) -> None:
        if not first:
            first.append(time.perf_counter())
        if on_token is not None:
            on_token(piece)

    answer = answerer.answer(question, context_notes(retrieval, concepts), on_token=token)
    done = time.perf_counter()
    timings = {**retrieval.timings, "answer_ms": round((done - start) * 1000, 1)}
    if started is not None:
        timings["first_token"] = round(((first[0] if first else done) - started) * 1000, 1)
    return AskResult(question, answer, retrieval, timings)
