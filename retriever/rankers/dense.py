"""Dense similarity of the question to a neighbour's best chunk, optionally with a hub penalty."""

from __future__ import annotations

import math
from collections.abc import Sequence

from retriever.rankers.base import HopInput, Scores


def dense(inp: HopInput, candidates: Sequence[str]) -> Scores:
    """Repeats the embedding's view of the note: the cosine of its closest chunk."""
    out = {}
    for note in candidates:
        best = inp.table.best_chunk(note, inp.qvec)
        out[note] = best[1] if best else -1.0
    return out


def dense_hub(inp: HopInput, candidates: Sequence[str]) -> Scores:
    """``dense`` divided by log2(2 + degree): a note linked to everything needs a better match to get in."""
    return {n: s / math.log2(2 + inp.graph.degree(n)) for n, s in dense(inp, candidates).items()}
