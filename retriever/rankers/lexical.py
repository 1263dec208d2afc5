"""Lexical: BM25 of the question over a neighbour's title, aliases and text (names are rare words)."""

from __future__ import annotations

from collections.abc import Sequence

from retriever.rankers.base import HopInput, Scores


def lexical(inp: HopInput, candidates: Sequence[str]) -> Scores:
    scores = inp.lexical_scores()
    return {n: scores.get(n, 0.0) for n in candidates}
