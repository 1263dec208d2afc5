"""What every neighbour ranker sees, and how scores become an order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from retriever.graph import GraphAnalytics, NoteGraph
from retriever.memory import ChunkTable, ContextVectors

Scores = dict[str, float]


@dataclass
class HopInput:
    question: str
    qvec: np.ndarray
    seeds: dict[str, float]  # seed note -> its retrieval score
    graph: NoteGraph
    table: ChunkTable
    contexts: ContextVectors | None
    lexical_scores: Callable[[], dict[str, float]]  # lazy: BM25 over notes for the question
    analytics: Callable[[], GraphAnalytics] = field(default=GraphAnalytics)  # lazy: the bundle's, for the priors


Ranker = Callable[[HopInput, Sequence[str]], Scores]


def order(scores: Scores) -> list[str]:
    """Best first; ties broken by note id so results are deterministic."""
    return sorted(scores, key=lambda n: (-scores[n], n))
