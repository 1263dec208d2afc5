"""Retrieval modes over an indexed bundle: ``vector``, ``graph`` (k=5 seeds + capped hop), ``union`` (vector at k +
capped hop adding only what vector missed). Every mode returns notes with score, the chunk text used and ``via``.

The hop walks links in both directions (out-links and backlinks) one step from the seeds, plus (unless turned
off) the previous and next session of a retrieved session note, ranks those candidates with a neighbour ranker
and stops at a context budget (notes and tokens), so methods can be compared at equal budgets. With ``threads``
the sessions that carry a retrieved session's story thread on (``retriever.threads``) come first in the hop, in
session order, within the same budget.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

import numpy as np

from retriever.embed import Embedder
from retriever.errors import RetrieverError, check_decodable
from retriever.filters import NoteFilter
from retriever.graph import GraphAnalytics, NoteGraph, load_analytics, read_graph
from retriever.memory import ChunkTable, ContextVectors, Lexical, SavedLexical, read_lexical
from retriever.mentions import NameIndex, SessionMentions
from retriever.rankers import RANKERS, HopInput, order, rrf
from retriever.spec import (
    DEFAULT_RANKER,
    DEFAULT_SPEC,
    GRAPH_SEEDS,
    Budget,
    Hit,
    Mode,
    Retrieval,
    SearchSpec,
    Seeds,
    Via,
    left_out_notice,
)  # fmt: skip
from retriever.store import ChunkHit, ChunkStore
from retriever.threads import SessionThreads, Terms
from vault2okf.protocol import state_dir

_CONTEXT_RANKERS = frozenset({"context", "rrf", "rrf-lex"})
_ANALYTICS_RANKERS = frozenset({"lex-dense-pr", "lex-dense-comm", "lex-dense-hub-comm"})
_LEXICAL_RANKERS = frozenset({"lexical", "lex-dense", "lex-dense-hub", "rrf", "rrf-lex", *_ANALYTICS_RANKERS})
__all__ = [  # the records live in `retriever.spec` (light: a client of `vault2okf serve` imports no numpy)
    "DEFAULT_RANKER", "DEFAULT_SPEC", "GRAPH_SEEDS", "Budget", "Hit", "Mode", "Retrieval", "Retriever", "SearchSpec",
    "Seeds", "Via", "left_out_notice",
]  # fmt: skip


@dataclass(frozen=True)
class Passing:
    """The notes a non-empty filter lets through and their chunk rows, ascending (``Retriever.passing``)."""

    notes: frozenset[str]
    rows: np.ndarray  # int64


PASSING_CACHED = 64  # filters whose notes a Retriever keeps (a server sees many; each costs a row array)


def empty_index_message(bundle: Path) -> str:
    """Why the index holds no chunks, with advice that does not loop: when `index` ran and found nothing (a
    bundle with no notes that have text), running it again would change nothing."""
    from vault2okf.protocol import BundleError, index_info

    try:
        indexed = index_info.read(bundle).chunks == 0
    except (BundleError, OSError, ValueError):  # no index recorded, or one this code cannot read: index is the fix
        indexed = False
    if indexed:
        return (
            f"{bundle} has nothing to search: its index is up to date and holds 0 chunks because the bundle has no "
            "notes with text — add notes to the vault, then convert and index it again"
        )
    return f"the index of {bundle} is empty: run `vault2okf index {bundle}`"


class Retriever:
    """An opened bundle index: the in-memory chunk table (exact vector search, the hop's chunks) and the graph.

    ``store`` is the Chroma collection the table was read from, or None when it came from the copy `index` saved.
    """

    def __init__(
        self,
        bundle: Path,
        store: ChunkStore | None,
        embedder: Embedder,
        graph: NoteGraph,
        table: ChunkTable | None = None,
        lexical_file: Path | None = None,
    ) -> None:
        self.bundle = bundle
        self.store = store
        self.embedder = embedder
        self.graph = graph
        self.lexical_file = lexical_file  # the BM25 indexes `index` saved beside the table (`Lexical.save`)
        self.notices: tuple[str, ...] = ()  # what a search should say: `index.index_notices`, the encoder's,
        # a damaged cache's (`retriever.cachefile`)
        self.saved_lexical: SavedLexical | None = None  # the BM25 indexes' file as `open` read it
        if table is None:
            if store is None:
                raise RetrieverError("a Retriever needs a chunk table or a store to read one from")
            table = ChunkTable.from_store(store)
        self.table = table
        self.row_of = {cid: i for i, cid in enumerate(self.table.ids)}
        self._passing: dict[NoteFilter, Passing] = {}
        self._passing_lock = threading.Lock()
        if not self.table.ids:
            raise RetrieverError(empty_index_message(bundle))

    @classmethod
    def open(
        cls, bundle: Path, *, chroma_url: str | None = None, device: str = "cpu", graph: NoteGraph | None = None
    ) -> Retriever:
        """Open an indexed bundle; the bundle and its schema are checked before the embedder loads.

        Questions are embedded by the index's ONNX question encoder (`retriever.encoder`: no torch); where it is
        missing, stale or damaged, by FlagEmbedding, and one of ``notices`` says how to rebuild it."""
        from retriever.encoder import load_index_encoder, question_embedder
        from retriever.index import index_notices, lexical_path, open_table

        # The ONNX question encoder loads in a thread while this one reads the graph and the chunk table:
        # onnxruntime builds its session without the GIL (0.15-0.2 s of a cold search on two cores). Its errors
        # wait for `result()`, after the bundle's and the index's own checks, so they come in the same order.
        notices: list[str] = []
        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(load_index_encoder, bundle) if device == "cpu" else None
            if graph is None:
                graph, graph_notices = read_graph(bundle)
                notices.extend(graph_notices)
            info, table, store = open_table(bundle, chroma_url=chroma_url, notices=notices)
            read_info, loaded = pending.result() if pending is not None else (None, None)
        # the thread's encoder only for the index read here (an `index` may have finished in between)
        embedder, notice = question_embedder(bundle, info, device=device, loaded=loaded if read_info == info else None)
        opened = cls(bundle, store, embedder, graph, table, lexical_path(bundle, info.collection))
        if table.stamp is not None:  # the saved BM25 indexes: read now, so that damage is said with the rest
            opened.saved_lexical = read_lexical(lexical_path(bundle, info.collection))
            notices.extend(filter(None, [opened.saved_lexical.notice]))
        opened.notices = (*index_notices(bundle, info, table, store), *notices, *([notice] if notice else []))
        return opened

    @cached_property
    def lexical(self) -> Lexical:
        return Lexical(self.table, self.graph, self.lexical_file, self.saved_lexical)

    @cached_property
    def contexts(self) -> ContextVectors:
        return ContextVectors.build(self.graph, self.embedder, state_dir(self.bundle))

    @cached_property
    def analytics(self) -> GraphAnalytics:
        return load_analytics(self.bundle)

    @cached_property
    def names(self) -> NameIndex:
        return NameIndex.from_graph(self.graph)

    @cached_property
    def session_mentions(self) -> SessionMentions:
        return SessionMentions.build(self.graph, self.names, self._note_texts())

    @cached_property
    def session_threads(self) -> SessionThreads:
        return SessionThreads.build(self.graph, self.session_mentions, self._note_texts())

    def passing(self, filters: NoteFilter) -> Passing | None:
        """The notes and chunk rows ``filters`` lets through, worked out once per filter; None for the empty
        filter (every note: the search then runs exactly as it does without filters)."""
        if filters.empty:
            return None
        with self._passing_lock:
            found = self._passing.get(filters)
        if found is not None:
            return found
        notes = frozenset(n for n, c in self.graph.concepts.items() if filters.allows(c))
        rows = sorted(r for n in notes for r in self.table.rows_of.get(n, ()))
        found = Passing(notes, np.array(rows, dtype=np.int64))
        with self._passing_lock:
            if len(self._passing) >= PASSING_CACHED:
                del self._passing[next(iter(self._passing))]  # the oldest
            self._passing[filters] = found
        return found

    def _note_texts(self) -> dict[str, list[str]]:
        return {note: [self.table.texts[r] for r in rows] for note, rows in self.table.rows_of.items()}

    def prepare(self, spec: SearchSpec | None = None) -> None:
        """Build the in-memory indexes a search needs now, so query timings hold only the query."""
        spec = spec or SearchSpec()
        self.passing(spec.filters)
        if spec.mode is not Mode.VECTOR and spec.ranker in _LEXICAL_RANKERS:
            _ = self.lexical.notes
            if spec.phrases:
                _ = self.lexical.note_pairs
        if spec.seeds is Seeds.HYBRID:
            _ = self.lexical.chunks
            if spec.phrases:
                _ = self.lexical.chunk_pairs
        if self.lexical_file is not None and "lexical" in self.__dict__ and self.lexical.stale:
            with contextlib.suppress(OSError):  # missing or stale (an older index, aliases edited): save it now
                self.lexical.save(self.lexical_file)
        if spec.mode is not Mode.VECTOR and spec.ranker in _CONTEXT_RANKERS:
            _ = self.contexts
        if spec.mode is not Mode.VECTOR and spec.ranker in _ANALYTICS_RANKERS:
            _ = self.analytics
        if spec.mode is not Mode.VECTOR and spec.mentions:
            _ = self.session_mentions
        if spec.mode is not Mode.VECTOR and spec.named:
            _ = self.names
        if spec.mode is not Mode.VECTOR and spec.threads:
            _ = self.session_threads

    def embed(self, question: str) -> np.ndarray:
        return np.asarray(self.embedder.embed_query(question), dtype=np.float32)

    def search(self, question: str, spec: SearchSpec | None = None, *, qvec: np.ndarray | None = None) -> Retrieval:
        """Retrieve for ``question``; pass ``qvec`` to reuse a question embedding (timings then exclude it)."""
        spec = spec or SearchSpec()
        if not question.strip():
            raise RetrieverError("the question is empty: ask something")
        check_decodable(question)
        timings: dict[str, float] = {}
        if qvec is None:
            t = time.perf_counter()
            qvec = self.embed(question)
            timings["embed_ms"] = _ms(t)
        t = time.perf_counter()
        match = spec.budget.match if spec.mode is not Mode.VECTOR else None
        passing = self.passing(spec.filters)
        rows = None if passing is None else passing.rows
        dense = self.table.nearest(qvec, max(_dense_k(spec.vector_k, spec.seeds, spec.dedup), match or 0), rows)
        found = self._vector(question, dense, spec, passing)
        first = _fit(found, spec.budget)
        timings["vector_ms"] = _ms(t)
        hits = first
        if spec.mode is not Mode.VECTOR:
            t = time.perf_counter()
            hits = first + self._hop(question, qvec, first, spec, self._budget(dense, spec), passing)
            timings["hop_ms"] = _ms(t)
        timings["retrieve_ms"] = round(sum(v for key, v in timings.items() if key != "embed_ms"), 3)
        ranker = None if spec.mode is Mode.VECTOR else spec.ranker
        return Retrieval(tuple(hits), spec.mode, spec.k, ranker, timings, left_out=len(found) - len(first))

    def _vector(self, question: str, dense: list[ChunkHit], spec: SearchSpec, passing: Passing | None) -> list[Hit]:
        """The vector stage's notes, from ``dense``: the nearest chunks (of the notes ``passing``), at least
        ``_dense_k`` of them, best first."""
        k = spec.vector_k
        wide = k * 3 if spec.dedup else k  # enough chunks to find k distinct notes
        hybrid = spec.seeds is Seeds.HYBRID
        chunks = self._hybrid(question, dense[: k * 3], wide, spec.phrases, passing) if hybrid else dense[:wide]
        if spec.dedup:
            chunks = _best_per_note(chunks, k)
        by_note: dict[str, list[ChunkHit]] = {}
        for chunk in chunks:
            by_note.setdefault(chunk.note_id, []).append(chunk)
        return [self._hit(note, group) for note, group in by_note.items()]

    def _hybrid(
        self, question: str, wide: list[ChunkHit], k: int, phrases: bool, passing: Passing | None
    ) -> list[ChunkHit]:
        """The 3k nearest chunks and the 3k best BM25 chunks (of the notes ``passing``), fused by reciprocal rank;
        the top k."""
        lex = self.lexical.chunk_scores(question, phrases=phrases)
        if passing is not None:  # a chunk of a note the filter stops scores nothing
            kept = np.zeros_like(lex)
            kept[passing.rows] = lex[passing.rows]
            lex = kept
        top_lex = [int(i) for i in np.argsort(-lex, kind="stable")[: k * 3] if lex[i] > 0]
        fused = rrf([c.chunk_id for c in wide], [self.table.ids[row] for row in top_lex])
        known = {c.chunk_id: c for c in wide}
        return [known.get(cid) or self._chunk_hit(cid, fused[cid]) for cid in order(fused)[:k]]

    def _chunk_hit(self, chunk_id: str, score: float) -> ChunkHit:
        row = self.row_of[chunk_id]
        t = self.table
        return ChunkHit(chunk_id, t.note_ids[row], score, t.texts[row], int(t.tokens[row]))

    def _hit(self, note: str, chunks: Sequence[ChunkHit]) -> Hit:
        ordered = sorted(chunks, key=lambda c: self.row_of.get(c.chunk_id, 0))
        return self._make_hit(note, max(c.score for c in chunks), Via.VECTOR, [(c.text, c.tokens) for c in ordered])

    def _make_hit(self, note: str, score: float, via: Via, parts: list[tuple[str, int]]) -> Hit:
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
            concept=c,
        )

    def _budget(self, dense: list[ChunkHit], spec: SearchSpec) -> Budget:
        """The hop's budget for this question: ``spec.budget``, capped at vector@match's tokens when it asks so
        (the tokens of the ``match`` nearest chunks: a prefix of ``dense``, which holds at least that many)."""
        if spec.budget.match is None:
            return spec.budget
        return spec.budget.capped(sum(c.tokens for c in dense[: spec.budget.match]))

    def _hop(
        self,
        question: str,
        qvec: np.ndarray,
        first: list[Hit],
        spec: SearchSpec,
        budget: Budget,
        passing: Passing | None = None,
    ) -> list[Hit]:
        """The hop's notes: the seeds' neighbours (and sessions, named notes, thread), only those ``passing``."""
        seeds = {h.note_id: h.score for h in first}
        neighbours = {n for s in seeds for n in self.graph.neighbours.get(s, {})}
        sessions = {n for s in seeds for n in self.graph.adjacent_sessions(s)} if spec.sessions else set()
        named = set(self.names.find(question)) if spec.named or spec.mentions or spec.threads else set()
        if spec.mentions:
            entities = [s for s in seeds if self.graph.concepts.get(s) and self.graph.concepts[s].session_key is None]
            sessions |= set(self.session_mentions.sessions_naming([*entities, *sorted(named)]))
        thread = self.session_threads.follow(Terms.of(question, named), seeds) if spec.threads else []
        if not spec.named:
            named = set()
        offered = neighbours | sessions | named | set(thread)
        if passing is not None:
            offered &= passing.notes
            thread = [n for n in thread if n in passing.notes]
        candidates = sorted(offered - set(seeds))
        if not candidates:
            return []
        inp = HopInput(
            question, qvec, seeds, self.graph, self.table,
            self.contexts if spec.ranker in _CONTEXT_RANKERS else None,
            lambda: self.lexical.note_scores(question, phrases=spec.phrases),
            lambda: self.analytics,
        )  # fmt: skip
        scores = RANKERS[spec.ranker](inp, candidates)
        ranked = [*thread, *(n for n in order(scores) if n not in thread)]  # the thread first, in session order
        added = self._fill(qvec, ranked, scores, budget, len(first), sum(h.tokens for h in first))
        return [replace(h, seed=self._reached_from(h.note_id, first, spec.sessions)) for h in added]

    def _reached_from(self, note: str, first: list[Hit], sessions: bool) -> str | None:
        """The best-ranked seed that links ``note`` (either way) or is its adjacent session; None for a note the
        hop offered for another reason (the question names it, a session that mentions a seed)."""
        for seed in first:
            if note in self.graph.neighbours.get(seed.note_id, {}):
                return seed.note_id
            if sessions and note in self.graph.adjacent_sessions(seed.note_id):
                return seed.note_id
        return None

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
            added.append(self._make_hit(note, scores[note], Via.HOP, [(self.table.texts[row], size)]))
        return added


def _fit(hits: list[Hit], budget: Budget) -> list[Hit]:
    """The vector stage's hits, best first, while they fit ``budget`` (one too big for what is left is skipped)."""
    kept: list[Hit] = []
    tokens = 0
    for hit in hits:
        if budget.notes is not None and len(kept) >= budget.notes:
            break
        if budget.tokens is not None and tokens + hit.tokens > budget.tokens:
            continue
        tokens += hit.tokens
        kept.append(hit)
    return kept


def _dense_k(k: int, seeds: Seeds, dedup: bool) -> int:
    """How many nearest chunks the vector stage reads: ``k``, or ``3k`` to fuse (hybrid) or to find k notes."""
    return k * 3 if seeds is Seeds.HYBRID or dedup else k


def _best_per_note(chunks: Sequence[ChunkHit], k: int) -> list[ChunkHit]:
    """The best chunk of each of the first ``k`` distinct notes, in rank order."""
    best: dict[str, ChunkHit] = {}
    for chunk in chunks:
        if chunk.note_id not in best:
            if len(best) == k:
                break
            best[chunk.note_id] = chunk
    return list(best.values())


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)
