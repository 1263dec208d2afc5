"""Support: how many seeds link a neighbour, weighted by how well those seeds matched."""

from __future__ import annotations

from collections.abc import Sequence

from retriever.rankers.base import HopInput, Scores


def support(inp: HopInput, candidates: Sequence[str]) -> Scores:
    return {n: sum(s for seed, s in inp.seeds.items() if n in inp.graph.neighbours.get(seed, {})) for n in candidates}
