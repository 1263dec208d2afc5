"""Retrieval modes over an indexed bundle: ``vector``, ``graph`` (k=5 seeds + capped hop), ``union`` (vector at k +
capped hop adding only what vector missed). Every mode returns notes with score, the chunk text used and ``via``.

The hop walks links in both directions (out-links and backlinks) one step from the seeds, plus (unless turned
off) the previous and next session of a retrieved session note, ranks those candidates with a neighbour ranker
and stops at a context budget (notes and tokens), so methods can be compared at equal budgets.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path

import numpy as np

from retriever.embed import Embedder
from retriever.errors import RetrieverError
from retriever.graph import NoteGraph, load_graph
from retriever.memory import ChunkTable, ContextVectors, Lexical
from retriever.rankers import RANKERS, RRF_K, HopInput, order
from retriever.store import ChunkHit, ChunkStore

GRAPH_SEEDS = 5
_CONTEXT_RANKERS = frozenset({"context", "rrf", "rrf-lex"})
_LEXICAL_RANKERS = frozenset({"lexical", "lex-dense", "lex-dense-hub", "rrf", "rrf-lex"})
DEFAULT_RANKER = "lex-dense-hub"  # chosen on one golden set, confirmed on the other: reports/ranker-selection.md


class Mode(StrEnum):
    VECTOR = "vector"
    GRAPH = "graph"
    UNION = "union"


class Seeds(StrEnum):
    DENSE = "dense"
    HYBRID = "hybrid"  # dense + BM25 chunks fused by reciprocal rank


@dataclass(frozen=True)
class Budget:
    """The most context a method may use; None means no limit on that axis."""

    notes: int | None = None
    tokens: int | None = None


@dataclass(frozen=True)
class Hit:
    note_id: str
    title: str
    vault_path: str
    doc_path: str
    score: float
    via: str  # "vector" | "hop"
    text: str  # the chunk text(s) used as context
    tokens: int
    session_label: str | None = None


@dataclass(frozen=True)
class Retrieval:
    hits: tuple[Hit, ...]
    mode: str
    k: int
    ranker: str | None
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds

    @property
    def notes(self) -> int:
        return len(self.hits)

    @property
    def tokens(self) -> int:
        return sum(h.tokens for h in self.hits)


class Retriever:
    """An opened bundle index: the Chroma store for vector search, plus the graph and in-memory tables for the hop."""

    def __init__(self, bundle: Path, store: ChunkStore, embedder: Embedder, graph: NoteGraph) -> None:
        self.bundle = bundle
        self.store = store
        self.embedder = embedder
        self.graph = graph
        self.table = ChunkTable.from_collection(store.collection)
        self.row_of = {cid: i for i, cid in enumerate(self.table.ids)}
        if not self.table.ids:
            raise RetrieverError(f"the index of {bundle} is empty: run `vault2okf index {bundle}`")

    @classmethod
    def open(cls, bundle: Path, *, chroma_url: str | None = None, device: str = "cpu") -> Retriever:
        from retriever.index import open_index

        _, store, embedder = open_index(bundle, chroma_url=chroma_url, device=device)
        return cls(bundle, store, embedder, load_graph(bundle))

    @cached_property
    def lexical(self) -> Lexical:
        return Lexical(self.table, self.graph)

    @cached_property
    def contexts(self) -> ContextVectors:
        return ContextVectors.build(self.graph, self.embedder, self.bundle / ".vault2okf")

    def prepare(self, ranker: str = DEFAULT_RANKER, seeds: Seeds | str = Seeds.DENSE) -> None:
        """Build the in-memory indexes a ranker / seed mode needs now, so query timings hold only the query."""
        if ranker in _LEXICAL_RANKERS:
            _ = self.lexical.notes
        if Seeds(seeds) is Seeds.HYBRID:
            _ = self.lexical.chunks
        if ranker in _CONTEXT_RANKERS:
            _ = self.contexts

    def embed(self, question: str) -> np.ndarray:
        return np.asarray(self.embedder.embed_query(question), dtype=np.float32)

    def search(
        self,
        question: str,
        mode: Mode | str = Mode.UNION,
        k: int = 10,
        budget: Budget | None = None,
        ranker: str = DEFAULT_RANKER,
        seeds: Seeds | str = Seeds.DENSE,
        qvec: np.ndarray | None = None,
        adjacent_sessions: bool = True,
    ) -> Retrieval:
        """Retrieve for ``question``; pass ``qvec`` to reuse a question embedding (timings then exclude it)."""
        mode, seeds = Mode(mode), Seeds(seeds)
        if ranker not in RANKERS:
            raise RetrieverError(f"unknown ranker {ranker!r}; choose one of {', '.join(RANKERS)}")
        timings: dict[str, float] = {}
        if qvec is None:
            t = time.perf_counter()
            qvec = self.embed(question)
            timings["embed_ms"] = _ms(t)
        t = time.perf_counter()
        first = self._vector(question, qvec, GRAPH_SEEDS if mode is Mode.GRAPH else k, seeds)
        timings["vector_ms"] = _ms(t)
        hits = first
        if mode is not Mode.VECTOR:
            t = time.perf_counter()
            hits = first + self._hop(question, qvec, first, budget or Budget(), ranker, adjacent_sessions)
            timings["hop_ms"] = _ms(t)
        timings["retrieve_ms"] = round(sum(v for key, v in timings.items() if key != "embed_ms"), 3)
        return Retrieval(tuple(hits), mode.value, k, None if mode is Mode.VECTOR else ranker, timings)

    def _vector(self, question: str, qvec: np.ndarray, k: int, seeds: Seeds) -> list[Hit]:
        chunks = self.store.query(qvec, k)
        if seeds is Seeds.HYBRID:
            chunks = self._hybrid(question, chunks, self.store.query(qvec, k * 3), k)
        by_note: dict[str, list[ChunkHit]] = {}
        for chunk in chunks:
            by_note.setdefault(chunk.note_id, []).append(chunk)
        return [self._hit(note, group) for note, group in by_note.items()]

    def _hybrid(self, question: str, dense: list[ChunkHit], wide: list[ChunkHit], k: int) -> list[ChunkHit]:
        lex = self.lexical.chunk_scores(question)
        top_lex = [int(i) for i in np.argsort(-lex, kind="stable")[: k * 3] if lex[i] > 0]
        fused: dict[str, float] = {}
        for rank, c in enumerate(wide, start=1):
            fused[c.chunk_id] = fused.get(c.chunk_id, 0.0) + 1.0 / (RRF_K + rank)
        for rank, row in enumerate(top_lex, start=1):
            cid = self.table.ids[row]
            fused[cid] = fused.get(cid, 0.0) + 1.0 / (RRF_K + rank)
        known = {c.chunk_id: c for c in wide}
        return [known.get(cid) or self._chunk_hit(cid, fused[cid]) for cid in order(fused)[:k]]

    def _chunk_hit(self, chunk_id: str, score: float) -> ChunkHit:
        row = self.row_of[chunk_id]
        t = self.table
        return ChunkHit(chunk_id, t.note_ids[row], score, t.texts[row], int(t.tokens[row]))

    def _hit(self, note: str, chunks: Sequence[ChunkHit]) -> Hit:
        ordered = sorted(chunks, key=lambda c: self.row_of.get(c.chunk_id, 0))
        return self._make_hit(note, max(c.score for c in chunks), "vector", [(c.text, c.tokens) for c in ordered])

    def _make_hit(self, note: str, score: float, via: str, parts: list[tuple[str, int]]) -> Hit:
        c = self.graph.concepts.get(note)
        return Hit(
            note_id=note,
            title=c.title if c else note,
            vault_path=c.vault_path if c else f"{note}.md",
            doc_path=c.doc_path if c else f"concepts/{note}.md",
            score=round(float(score), 6),
            via=via,
            text="\n\n".join(text for text, _ in parts),
            tokens=sum(n for _, n in parts),
            session_label=c.session_label if c else None,
        )

    def _hop(
        self, question: str, qvec: np.ndarray, first: list[Hit], budget: Budget, ranker: str, adjacent: bool
    ) -> list[Hit]:
        seeds = {h.note_id: h.score for h in first}
        neighbours = {n for s in seeds for n in self.graph.neighbours.get(s, {})}
        sessions = {n for s in seeds for n in self.graph.adjacent_sessions(s)} if adjacent else set()
        candidates = sorted((neighbours | sessions) - set(seeds))
        if not candidates:
            return []
        inp = HopInput(
            question, qvec, seeds, self.graph, self.table,
            self.contexts if ranker in _CONTEXT_RANKERS else None,
            lambda: self.lexical.note_scores(question),
        )  # fmt: skip
        scores = RANKERS[ranker](inp, candidates)
        return self._fill(qvec, order(scores), scores, budget, len(first), sum(h.tokens for h in first))

    def _fill(
        self, qvec: np.ndarray, ranked: list[str], scores: dict[str, float], budget: Budget, notes: int, tokens: int
    ) -> list[Hit]:
        """Add neighbours best first while they fit the budget (a note too big for what is left is skipped)."""
        added: list[Hit] = []
        for note in ranked:
            if budget.notes is not None and notes + len(added) >= budget.notes:
                break
            best = self.table.best_chunk(note, qvec)
            if best is None:
                continue
            row = best[0]
            size = int(self.table.tokens[row])
            if budget.tokens is not None and tokens + size > budget.tokens:
                continue
            tokens += size
            added.append(self._make_hit(note, scores[note], "hop", [(self.table.texts[row], size)]))
        return added


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
