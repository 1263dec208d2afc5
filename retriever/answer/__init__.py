"""Answer stage: grounded, cited answers from retrieved notes (backends `llama` and `bedrock`)."""

from retriever.answer.backends import BACKENDS, get_answerer
from retriever.answer.contract import Answer, Answerer, AnswerError, Citation, ContextNote
from retriever.answer.prompt import build_messages, extract_citations
from retriever.answer.refusal import NOT_FOUND, is_not_found

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
