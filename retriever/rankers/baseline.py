"""The naive baseline: neighbours in vault path order, as a walk that ranks nothing would take them."""

from __future__ import annotations

from collections.abc import Sequence

from retriever.rankers.base import HopInput, Scores


def file_order(inp: HopInput, candidates: Sequence[str]) -> Scores:
    ordered = sorted(candidates, key=lambda n: inp.graph.concepts[n].vault_path if n in inp.graph.concepts else n)
    return {n: -i for i, n in enumerate(ordered)}
