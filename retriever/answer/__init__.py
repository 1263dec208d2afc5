"""Answer stage: grounded, cited answers from retrieved notes (backends `llama` and `bedrock`)."""

from retriever.answer.base import (
    BACKENDS,
    Answer,
    Answerer,
    AnswerError,
    Citation,
    ContextNote,
    get_answerer,
)
from retriever.answer.prompt import NOT_FOUND, build_messages, extract_citations, is_not_found

__all__ = [
    "BACKENDS",
    "NOT_FOUND",
    "Answer",
    "AnswerError",
    "Answerer",
    "Citation",
    "ContextNote",
    "build_messages",
    "extract_citations",
    "get_answerer",
    "is_not_found",
]
