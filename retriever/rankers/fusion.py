"""Reciprocal rank fusion of several rankers."""

from __future__ import annotations

from collections.abc import Sequence

from retriever.rankers.base import HopInput, Ranker, Scores, order

RRF_K = 60


def fuse(*rankers: Ranker) -> Ranker:
    """Sum of 1 / (RRF_K + rank) over the given rankers (rank from 1)."""

    def fused(inp: HopInput, candidates: Sequence[str]) -> Scores:
        total = dict.fromkeys(candidates, 0.0)
        for ranker in rankers:
            for rank, note in enumerate(order(ranker(inp, candidates)), start=1):
                total[note] += 1.0 / (RRF_K + rank)
        return total

    return fused
