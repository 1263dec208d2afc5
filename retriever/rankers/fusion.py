"""Reciprocal rank fusion: the one definition, for fused neighbour rankers and for hybrid seeds."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from retriever.rankers.base import HopInput, Ranker, Scores, order

RRF_K = 60


def rrf(*rankings: Sequence[str], keys: Iterable[str] = ()) -> Scores:
    """Sum of 1 / (RRF_K + rank) over the rankings (rank from 1); ``keys`` start at 0 even if no ranking has them."""
    total = dict.fromkeys(keys, 0.0)
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            total[item] = total.get(item, 0.0) + 1.0 / (RRF_K + rank)
    return total


def fuse(*rankers: Ranker) -> Ranker:
    """A ranker scoring each candidate by ``rrf`` of the given rankers' orders."""

    def fused(inp: HopInput, candidates: Sequence[str]) -> Scores:
        return rrf(*(order(ranker(inp, candidates)) for ranker in rankers), keys=candidates)

    return fused
