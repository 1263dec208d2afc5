"""The passage a hop note hands over with ``SearchSpec.passage`` (issue 37): at most N tokens of its best chunk,
the lines (or sentences) that hold the most of what the search is about, instead of the whole chunk. A 400-token
session chunk then costs a fraction of that, so more sessions of a run fit the same budget.

What the search is about is a ``Focus``: the question's words, each weighed by its inverse document frequency
over the chunks (a rare name counts more than "went"), and the names of the entity notes among the seeds at half
that. A line's score is the weight of the distinct focus words it holds; the passage takes the best lines that fit,
then the others from the top, and gives them in the chunk's order (lines apart joined by a line break: the
answerers quote line by line). A chunk that holds none of them gives its first N tokens. Pure: no index, no model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from retriever.chunk import split_header
from retriever.memory import words
from retriever.tokens import count_tokens, token_spans

SEED_NAME_WEIGHT = 0.5  # a seed's name word, against the same word in the question
_BREAK = re.compile(r"\n+|(?<=[.!?])[ \t]+")  # between lines, and between sentences of a line


@dataclass(frozen=True)
class Focus:
    """The words a passage is chosen for and their weights (``of``)."""

    weights: Mapping[str, float]

    @classmethod
    def of(cls, question: str, seed_names: Iterable[str], idf: Mapping[str, float]) -> Focus:
        """The question's words at their ``idf`` (1.0 for a word ``idf`` lacks), and the words of ``seed_names``
        the question lacks at ``SEED_NAME_WEIGHT`` of theirs."""
        weights = {w: idf.get(w, 1.0) for w in words(question)}
        for name in seed_names:
            for w in words(name):
                weights.setdefault(w, SEED_NAME_WEIGHT * idf.get(w, 1.0))
        return cls(weights)

    def score(self, found: set[str]) -> float:
        return sum(self.weights.get(w, 0.0) for w in found)


@dataclass(frozen=True)
class Passages:
    """How a hop note's chunk is cut: at most ``size`` tokens, the window best covering ``focus``."""

    size: int
    focus: Focus
    sessions_only: bool = False  # cut only session notes' chunks (``SearchSpec.passage_sessions``)

    def cut(self, text: str, tokens: int, title: str = "") -> tuple[str, int]:
        return passage(text, tokens, self.size, self.focus, title)


def bm25_idf(num_docs: int, df: int) -> float:
    """BM25's inverse document frequency (Lucene's, never negative)."""
    return math.log(1 + (num_docs - df + 0.5) / (df + 0.5))


def passage(text: str, tokens: int, size: int, focus: Focus, title: str = "") -> tuple[str, int]:
    """``text`` (of ``tokens`` tokens) itself when it fits ``size``; else its best window of at most ``size``
    tokens and that window's token count. A chunk of a note titled ``title`` keeps its header line (``Title >
    Heading``: the answerers read the section from it) and its window fills the rest of ``size``; a header of
    ``size`` tokens or more is windowed with the rest."""
    if tokens <= size or size < 1:
        return text, tokens
    _, rest = split_header(text, title) if title else ((), text)
    head = text[: len(text) - len(rest)] if rest != text else ""
    room = size - count_tokens(head)
    if head and room >= 1:
        window, _ = _window(rest, room, focus)
        cut = f"{head}{window}"
        return cut, count_tokens(cut)
    return _window(text, size, focus)


def _window(text: str, size: int, focus: Focus) -> tuple[str, int]:
    """The lines of ``text`` (at most ``size`` tokens) holding the most of ``focus``, in the text's order, and
    their tokens: the best-scoring lines first (a line's score: the weight of the distinct focus words it holds;
    ties to the earlier), each that still fits, then the lines holding none of them from the top."""
    units = _units(text, size)
    if not units:
        return text, 0
    scores = [focus.score(set(words(text[a:b]))) for a, b, _ in units]
    ranked = sorted(range(len(units)), key=lambda i: (-scores[i], i) if scores[i] > 0 else (0.0, len(units) + i))
    kept, spent = set[int](), 0
    for i in ranked:
        if spent + units[i][2] <= size:
            kept.add(i)
            spent += units[i][2]
    window = _joined(text, units, sorted(kept))
    return window, count_tokens(window)


def _joined(text: str, units: list[tuple[int, int, int]], kept: list[int]) -> str:
    """The kept units of ``text``, neighbours as written, a gap between two of them as one line break."""
    out = ""
    for n, i in enumerate(kept):
        start, end, _ = units[i]
        if n and kept[n - 1] == i - 1:
            out += text[units[i - 1][1] : end]
        else:
            out += ("\n" if n else "") + text[start:end]
    return out


def _units(text: str, size: int) -> list[tuple[int, int, int]]:
    """(start, end, tokens) of each line or sentence of ``text`` that holds a token, in order; one longer than
    ``size`` tokens is cut into pieces of ``size`` tokens at token boundaries."""
    out: list[tuple[int, int, int]] = []
    start = 0
    for cut in [*_BREAK.finditer(text), None]:
        end = len(text) if cut is None else cut.start()
        spans = token_spans(text[start:end])
        for at in range(0, len(spans), size):
            piece = spans[at : at + size]
            out.append((start + piece[0][0], start + piece[-1][1], len(piece)))
        if cut is not None:
            start = cut.end()
    return out
