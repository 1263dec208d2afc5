"""Ask: retrieve notes for a question, hand them to an answerer, and report answer, citations and timings."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from retriever.answer.base import Answer, Answerer, ContextNote
from retriever.answer.refusal import is_not_found
from retriever.retrieve import Hit, Retrieval


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
            "not_found": is_not_found(self.answer.text),
            "citations": [{"title": c.title, "path": c.path} for c in self.answer.citations],
            "retrieved": [hit_json(h) for h in self.retrieval.hits],
            "retrieval": {
                "mode": self.retrieval.mode,
                "k": self.retrieval.k,
                "ranker": self.retrieval.ranker,
                "notes": self.retrieval.notes,
                "tokens": self.retrieval.tokens,
            },
            "model": self.answer.model,
            "finish_reason": self.answer.finish_reason,
            "tokens": {"prompt": self.answer.prompt_tokens, "completion": self.answer.completion_tokens},
            "timings_ms": self.timings,
        }


def hit_json(hit: Hit) -> dict[str, Any]:
    data = asdict(hit)
    data.pop("text")
    return data


def context_notes(retrieval: Retrieval) -> list[ContextNote]:
    return [
        ContextNote(h.note_id, h.title, h.doc_path, h.text, h.via, h.score, h.session_label) for h in retrieval.hits
    ]


def ask(
    question: str,
    retrieve: Callable[[str], Retrieval],
    answerer: Answerer,
    on_token: Callable[[str], None] | None = None,
) -> AskResult:
    retrieval = retrieve(question)
    start = time.perf_counter()
    answer = answerer.answer(question, context_notes(retrieval), on_token=on_token)
    timings = {**retrieval.timings, "answer_ms": round((time.perf_counter() - start) * 1000, 1)}
    return AskResult(question, answer, retrieval, timings)
