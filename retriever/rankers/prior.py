"""Graph-analytics priors on ``dense`` (issue 25): PageRank and communities from ``okf.duckdb``'s ``analytics``.

Without analytics (a database lacking the table: `read_bundle` refuses any bundle older than schema 3, so only a
damaged one; or a note missing from the table) both are plain ``dense``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from retriever.rankers.base import HopInput, Scores
from retriever.rankers.dense import dense

COMMUNITY_BONUS = 0.1  # cosine points: about the gap between a neighbour that matches and one that half does


def dense_pr(inp: HopInput, candidates: Sequence[str]) -> Scores:
    """``dense`` times log2(2 + n * PageRank) over n notes (the opposite of ``dense-hub``): a note central to
    the vault (n * PageRank is 1 for an average note) gets in on a weaker match."""
    pagerank = inp.analytics().pagerank
    n = len(pagerank)
    return {note: s * math.log2(2 + n * pagerank.get(note, 0.0)) for note, s in dense(inp, candidates).items()}


def dense_comm(inp: HopInput, candidates: Sequence[str]) -> Scores:
    """``dense`` plus ``COMMUNITY_BONUS`` for a note in the community of a seed that reached it (links it either
    way, or is the session before or after it)."""
    same = same_community(inp, candidates)
    return {note: s + (COMMUNITY_BONUS if note in same else 0.0) for note, s in dense(inp, candidates).items()}


def dense_hub_comm(inp: HopInput, candidates: Sequence[str]) -> Scores:
    """``dense_comm`` divided by log2(2 + degree), the hub penalty of ``dense-hub``."""
    return {n: s / math.log2(2 + inp.graph.degree(n)) for n, s in dense_comm(inp, candidates).items()}


def same_community(inp: HopInput, candidates: Sequence[str]) -> set[str]:
    """The candidates that share a community with a seed that reached them."""
    community = inp.analytics().community
    reached = {s: {*inp.graph.neighbours.get(s, {}), *inp.graph.adjacent_sessions(s)} for s in inp.seeds}
    return {
        note
        for note in candidates
        if note in community and any(note in reached[s] and community.get(s) == community[note] for s in inp.seeds)
    }
