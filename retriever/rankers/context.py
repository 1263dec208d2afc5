"""Link context: how well the sentences that link a neighbour to a seed match the question."""

from __future__ import annotations

from collections.abc import Sequence

from retriever.rankers.base import HopInput, Scores
from retriever.rankers.dense import dense


def context(inp: HopInput, candidates: Sequence[str]) -> Scores:
    """The best similarity of the question to any sentence linking the neighbour and a seed, in either note."""
    if inp.contexts is None:
        return dense(inp, candidates)
    out = {}
    for note in candidates:
        texts = [t for seed in inp.seeds for t in inp.graph.neighbours.get(seed, {}).get(note, [])]
        out[note] = inp.contexts.similarity(texts, inp.qvec)
    return out
