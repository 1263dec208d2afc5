"""Neighbour rankers: which one-hop neighbours of the seed notes enter the context under the cap.

Each ranker scores candidate notes (higher is better) from a ``HopInput``; ``rank`` orders them. Rankers:
- ``dense``: similarity of the question to the neighbour's best chunk (repeats the embedding's view);
- ``dense-hub``: ``dense`` divided by log2(2 + degree), a penalty for hub notes;
- ``context``: similarity of the question to the sentences that link the neighbour to a seed;
- ``support``: how many seeds link it, weighted by how well those seeds matched;
- ``lexical``: BM25 of the question over the neighbour's title, aliases and text;
- ``lex-dense``: reciprocal rank fusion of lexical and dense;
- ``lex-dense-hub`` (the default, see reports/ranker-selection.md): reciprocal rank fusion of lexical and
  dense-hub;
- ``rrf``: reciprocal rank fusion of context, support, lexical and dense;
- ``rrf-lex``: reciprocal rank fusion of context, support and lexical (no dense);
- ``file``: vault path order, the naive baseline.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from retriever.graph import NoteGraph
from retriever.memory import ChunkTable, ContextVectors

RRF_K = 60


@dataclass
class HopInput:
    question: str
    qvec: np.ndarray
    seeds: dict[str, float]  # seed note -> its retrieval score
    graph: NoteGraph
    table: ChunkTable
    contexts: ContextVectors | None
    lexical_scores: Callable[[], dict[str, float]]  # lazy: BM25 over notes for the question


Scores = dict[str, float]


def dense(inp: HopInput, candidates: Sequence[str]) -> Scores:
    out = {}
    for note in candidates:
        best = inp.table.best_chunk(note, inp.qvec)
        out[note] = best[1] if best else -1.0
    return out


def dense_hub(inp: HopInput, candidates: Sequence[str]) -> Scores:
    return {n: s / math.log2(2 + inp.graph.degree(n)) for n, s in dense(inp, candidates).items()}


def context(inp: HopInput, candidates: Sequence[str]) -> Scores:
    if inp.contexts is None:
        return dense(inp, candidates)
    out = {}
    for note in candidates:
        texts = [t for seed in inp.seeds for t in inp.graph.neighbours.get(seed, {}).get(note, [])]
        out[note] = inp.contexts.similarity(texts, inp.qvec)
    return out


def support(inp: HopInput, candidates: Sequence[str]) -> Scores:
    return {n: sum(s for seed, s in inp.seeds.items() if n in inp.graph.neighbours.get(seed, {})) for n in candidates}


def lexical(inp: HopInput, candidates: Sequence[str]) -> Scores:
    scores = inp.lexical_scores()
    return {n: scores.get(n, 0.0) for n in candidates}


def file_order(inp: HopInput, candidates: Sequence[str]) -> Scores:
    ordered = sorted(candidates, key=lambda n: inp.graph.concepts[n].vault_path if n in inp.graph.concepts else n)
    return {n: -i for i, n in enumerate(ordered)}


def fuse(*rankers: Callable[[HopInput, Sequence[str]], Scores]) -> Callable[[HopInput, Sequence[str]], Scores]:
    """Reciprocal rank fusion: sum of 1 / (RRF_K + rank) over the given rankers (rank from 1)."""

    def fused(inp: HopInput, candidates: Sequence[str]) -> Scores:
        total = dict.fromkeys(candidates, 0.0)
        for ranker in rankers:
            for rank, note in enumerate(order(ranker(inp, candidates)), start=1):
                total[note] += 1.0 / (RRF_K + rank)
        return total

    return fused


def order(scores: Scores) -> list[str]:
    """Best first; ties broken by note id so results are deterministic."""
    return sorted(scores, key=lambda n: (-scores[n], n))


RANKERS: dict[str, Callable[[HopInput, Sequence[str]], Scores]] = {
    "dense": dense,
    "dense-hub": dense_hub,
    "context": context,
    "support": support,
    "lexical": lexical,
    "lex-dense": fuse(lexical, dense),
    "lex-dense-hub": fuse(lexical, dense_hub),
    "rrf": fuse(context, support, lexical, dense),
    "rrf-lex": fuse(context, support, lexical),
    "file": file_order,
}
