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

import functools
import re
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from retriever.memory import words
from retriever.tokens import count_tokens, token_spans

LINES_CACHED = 4096  # chunks whose split into lines is kept (the same for every question)
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

    def score(self, found: Set[str]) -> float:
        return sum(self.weights.get(w, 0.0) for w in found)


@dataclass(frozen=True)
class Passages:
    """How a hop note's chunk is cut: at most ``size`` tokens, the window best covering ``focus``."""

    size: int
    focus: Focus
    sessions_only: bool = False  # cut only session notes' chunks (``SearchSpec.passage_sessions``)

    def cut(self, text: str, tokens: int, title: str = "") -> tuple[str, int]:
        return passage(text, tokens, self.size, self.focus, title)


def passage(text: str, tokens: int, size: int, focus: Focus, title: str = "") -> tuple[str, int]:
    """``text`` (of ``tokens`` tokens) itself when it fits ``size``; else its best window of at most ``size``
    tokens and that window's token count. A chunk of a note titled ``title`` keeps its header line (``Title >
    Heading``: the answerers read the section from it) and its window fills the rest of ``size``; a header of
    ``size`` tokens or more is windowed with the rest."""
    if tokens <= size or size < 1:
        return text, tokens
    lines = _lines(text, size, title)
    if not lines.units:
        return text, 0
    window = lines.head + _window(lines, focus)
    return window, count_tokens(window)


@dataclass(frozen=True)
class _Lines:
    """A chunk's text split for a passage of ``room`` tokens: its header line, the rest, and each unit of the rest
    (start, end, tokens) with its words; the same for every question, so worked out once (``_lines``)."""

    head: str
    body: str
    room: int
    units: tuple[tuple[int, int, int], ...]
    found: tuple[frozenset[str], ...]


@functools.lru_cache(maxsize=LINES_CACHED)
def _lines(text: str, size: int, title: str) -> _Lines:
    head = _header(text, title)
    rest = text[len(head) :]
    room = size - count_tokens(head)
    if not head or room < 1:
        head, rest, room = "", text, size
    units = tuple(_units(rest, room))
    return _Lines(head, rest, room, units, tuple(frozenset(words(rest[a:b])) for a, b, _ in units))


def _header(text: str, title: str) -> str:
    """The header line ``Title > Heading`` (with its line break) a chunk of a note titled ``title`` starts with
    (``retriever.chunk._make_chunk`` writes it; ``chunk.split_header`` reads it, but importing the chunker would
    load markdown-it into every search), or "" when the text does not start with it."""
    first, newline, _ = text.partition("\n")
    return f"{first}{newline}" if title and newline and first.split(" > ")[0] == title else ""


def _window(lines: _Lines, focus: Focus) -> str:
    """The lines of the body (at most ``lines.room`` tokens) holding the most of ``focus``, in the text's order:
    the best-scoring lines first (a line's score: the weight of the distinct focus words it holds; ties to the
    earlier), each that still fits, then the lines holding none of them from the top."""
    text, size, units = lines.body, lines.room, lines.units
    scores = [focus.score(found) for found in lines.found]
    ranked = sorted(range(len(units)), key=lambda i: (-scores[i], i) if scores[i] > 0 else (0.0, len(units) + i))
    kept, spent = set[int](), 0
    for i in ranked:
        if spent + units[i][2] <= size:
            kept.add(i)
            spent += units[i][2]
    return _joined(text, units, sorted(kept))


def _joined(text: str, units: Sequence[tuple[int, int, int]], kept: list[int]) -> str:
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
