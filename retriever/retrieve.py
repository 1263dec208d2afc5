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
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from retriever.cachefile import size_limit
from retriever.embed import Embedder
from retriever.errors import RetrieverError, check_decodable
from retriever.filters import NoteFilter
from retriever.graph import Concept, GraphAnalytics, NoteGraph, graph_key, load_analytics, read_graph
from retriever.memory import ChunkTable, ContextVectors, Lexical, SavedLexical, read_lexical, words
from retriever.mentions import (
    SESSION_MENTIONS_CACHE,
    MentionGraph,
    NameIndex,
    SessionMentions,
    entity_queries,
    load_session_mentions,
    save_session_mentions,
)
from retriever.passage import Focus, Passages
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
from retriever.threads import SessionThreads, Terms, parallel_series, session_runs
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


MENTION_WEIGHT = 0.5  # the hop score of a note an unlinked mention alone offers, against a linked one
ENTITY_WEIGHT = 0.5  # the weight of the question's entity sub-queries in the hybrid seeds, all together
RUN_SEEDS_SHARE = 0.5  # with `runs`, the seeds keep at least this share of the hop's tokens when making room
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
        """Built from every session's text (about a second on a 1,000-note vault), then cached in the bundle's
        state folder for this index and graph (``load_session_mentions``): runs are in the default search."""
        key = self._mentions_key()
        path = state_dir(self.bundle) / SESSION_MENTIONS_CACHE
        if key is not None and (cached := load_session_mentions(path, key, size_limit(self.bundle))) is not None:
            return cached
        built = SessionMentions.build(self.graph, self.names, self._note_texts())
        if key is not None and path.parent.is_dir():
            save_session_mentions(path, key, built)
        return built

    def _mentions_key(self) -> list[Any] | None:
        """What the session mentions are made from: the saved chunk table and the graph (None: not cacheable)."""
        if self.table.stamp is None:
            return None
        graph = graph_key(self.bundle)
        return None if graph is None else [1, self.table.stamp, len(self.table.ids), graph]

    @cached_property
    def session_threads(self) -> SessionThreads:
        return SessionThreads.build(self.graph, self.session_mentions, self._note_texts())

    @cached_property
    def mention_graph(self) -> MentionGraph:
        return MentionGraph.build(self.graph, self.names, self._note_texts())

    @cached_property
    def session_named(self) -> dict[str, frozenset[str]]:
        """Session note -> the notes it names or links (``session_mentions`` turned around)."""
        named: dict[str, set[str]] = {}
        for note, sessions in self.session_mentions.sessions_of.items():
            for session in sessions:
                named.setdefault(session, set()).add(note)
        return {session: frozenset(notes) for session, notes in named.items()}

    @cached_property
    def parallel(self) -> dict[str, frozenset[str]]:
        """Session folder -> the folders telling the same sessions (``threads.parallel_series``)."""
        return parallel_series(self.graph, self.session_named)

    @cached_property
    def titles(self) -> dict[str, str]:
        return {note: c.title for note, c in self.graph.concepts.items()}

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
        if spec.mode is not Mode.VECTOR and spec.runs:
            _ = self.parallel
        if spec.mode is not Mode.VECTOR and spec.mention_edges:
            _ = self.mention_graph
        if spec.mode is not Mode.VECTOR and spec.entity_rank:
            _ = self.session_named, self.lexical.notes
        if spec.entities:
            _ = self.names
        if spec.mode is not Mode.VECTOR and (spec.passage or spec.seed_passage):
            _ = self.lexical.chunks

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
        found = self.vector_stage(question, dense, spec, passing)
        first = self.seeds(question, found, dense, spec, passing)
        timings["vector_ms"] = _ms(t)
        hits = first
        if spec.mode is not Mode.VECTOR:
            t = time.perf_counter()
            hits = first + self._hop(question, qvec, first, spec, self.hop_budget(dense, spec), passing, found)
            timings["hop_ms"] = _ms(t)
        timings["retrieve_ms"] = round(sum(v for key, v in timings.items() if key != "embed_ms"), 3)
        ranker = None if spec.mode is Mode.VECTOR else spec.ranker
        return Retrieval(tuple(hits), spec.mode, spec.k, ranker, timings, left_out=len(found) - len(first))

    def seeds(
        self, question: str, found: list[Hit], dense: list[ChunkHit], spec: SearchSpec, passing: Passing | None
    ) -> list[Hit]:
        """The vector stage's notes the budget keeps, best first. With ``spec.runs`` and a run of sessions between
        two of ``found``'s (``run_of``), the seeds leave the run room: they keep to the hop's budget less the run's
        notes and tokens (at least ``RUN_SEEDS_SHARE`` of its tokens), so the run is not starved by weaker seeds."""
        return fit(found, self.seed_budget(question, found, dense, spec, passing))

    def seed_budget(
        self, question: str, found: list[Hit], dense: list[ChunkHit], spec: SearchSpec, passing: Passing | None
    ) -> Budget:
        """The budget the seeds keep to: ``spec.budget``, less a run's room with ``spec.runs`` (``seeds``); with
        ``spec.scale_seeds``, no more than the hop's (vector@match's tokens)."""
        if spec.mode is Mode.VECTOR:
            return spec.budget
        budget = self._run_room(question, found, dense, spec, passing) if spec.runs else spec.budget
        if spec.scale_seeds and spec.budget.match is not None:
            cap = self.hop_budget(dense, spec).tokens
            budget = budget if cap is None else budget.capped(cap)
        return budget

    def _run_room(
        self, question: str, found: list[Hit], dense: list[ChunkHit], spec: SearchSpec, passing: Passing | None
    ) -> Budget:
        """``spec.budget`` less the room of a run between two of ``found``'s sessions (``seeds``)."""
        run = [n for n in self.run_of(question, found, passing, spec) if n not in {h.note_id for h in found}]
        room = self.hop_budget(dense, spec)
        if not run or room.tokens is None:
            return spec.budget
        sizes = [int(self.table.tokens[rows[0]]) for n in run if (rows := self.table.rows_of.get(n))]  # sessions
        size = sum(min(n, spec.passage) if spec.passage else n for n in sizes)  # a passage costs at most that
        tokens = max(room.tokens - size, int(room.tokens * RUN_SEEDS_SHARE))
        notes = None if spec.budget.notes is None else max(spec.budget.notes - len(run), 1)
        return Budget(notes, tokens if spec.budget.tokens is None else min(tokens, spec.budget.tokens))

    def run_of(self, question: str, found: Sequence[Hit], passing: Passing | None, spec: SearchSpec) -> list[str]:
        """The sessions between two of ``found``'s sessions naming what both name (``threads.session_runs``)."""
        asked = {n for n in self.names.find(question) if self.graph.concepts[n].session_key is None}
        seeds = [h.note_id for h in found]
        run = session_runs(self.graph, self.session_named, seeds, asked, self.parallel, adjacent=spec.twins)
        return [n for n in run if passing is None or n in passing.notes]

    def vector_stage(
        self, question: str, dense: list[ChunkHit], spec: SearchSpec, passing: Passing | None
    ) -> list[Hit]:
        """The vector stage's notes, from ``dense``: the nearest chunks (of the notes ``passing``), at least
        ``_dense_k`` of them, best first."""
        k = spec.vector_k
        wide = k * 3 if spec.dedup else k  # enough chunks to find k distinct notes
        hybrid = spec.seeds is Seeds.HYBRID
        chunks = self._hybrid(question, dense[: k * 3], wide, spec, passing) if hybrid else dense[:wide]
        if spec.dedup:
            chunks = _best_per_note(chunks, k)
        by_note: dict[str, list[ChunkHit]] = {}
        for chunk in chunks:
            by_note.setdefault(chunk.note_id, []).append(chunk)
        found = [self._hit(note, group) for note, group in by_note.items()]
        cutting = spec.seed_passage and spec.mode is not Mode.VECTOR
        passages = self.passages(question, found, spec.seed_passage, spec.passage_sessions) if cutting else None
        if passages is None:
            return found
        cut = [(h, passages.cut(h.text, h.tokens, h.title) if cuts(passages, h.concept) else (h.text, h.tokens))
               for h in found]  # fmt: skip
        return [replace(h, text=text, tokens=size) for h, (text, size) in cut]

    def _hybrid(
        self, question: str, wide: list[ChunkHit], k: int, spec: SearchSpec, passing: Passing | None
    ) -> list[ChunkHit]:
        """The 3k nearest chunks and the 3k best BM25 chunks (of the notes ``passing``), fused by reciprocal rank;
        the top k. With ``spec.entities`` each entity of the question is fused the same way on its own and added
        at ``ENTITY_WEIGHT`` (shared among them)."""
        fused = self.fused(wide, self.lexical_scores(question, spec.phrases, passing), k)
        entities = entity_queries(question, self.names, self.titles) if spec.entities else []
        rows = None if passing is None else passing.rows
        for entity in entities:
            near = self.table.nearest(self.embed(entity), len(wide), rows)
            own = self.fused(near, self.lexical_scores(entity, spec.phrases, passing), k)
            for cid, score in own.items():
                fused[cid] = fused.get(cid, 0.0) + score * ENTITY_WEIGHT / len(entities)
            wide = [*wide, *(c for c in near if c.chunk_id not in {w.chunk_id for w in wide})]
        known = {c.chunk_id: c for c in wide}
        return [known.get(cid) or self._chunk_hit(cid, fused[cid]) for cid in order(fused)[:k]]

    def lexical_scores(self, question: str, phrases: bool, passing: Passing | None) -> np.ndarray:
        """Every chunk's BM25 score for ``question``; zero for a chunk of a note the filter stops."""
        lex = self.lexical.chunk_scores(question, phrases=phrases)
        if passing is not None:
            kept = np.zeros_like(lex)
            kept[passing.rows] = lex[passing.rows]
            lex = kept
        return lex

    def fused(self, wide: list[ChunkHit], lex: np.ndarray, k: int) -> dict[str, float]:
        """The ``wide`` nearest chunks and the 3k best BM25 chunks, fused by reciprocal rank (chunk id -> score)."""
        top_lex = [int(i) for i in np.argsort(-lex, kind="stable")[: k * 3] if lex[i] > 0]
        return rrf([c.chunk_id for c in wide], [self.table.ids[row] for row in top_lex])

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

    def hop_budget(self, dense: list[ChunkHit], spec: SearchSpec) -> Budget:
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
        found: list[Hit] | None = None,
    ) -> list[Hit]:
        """The hop's notes: the seeds' neighbours (and sessions, named notes, thread), only those ``passing``."""
        ranked, scores = self.hop_order(question, qvec, first, spec, passing, found)
        if not ranked:
            return []
        passages = self.passages(question, first, spec.passage, spec.passage_sessions)
        added = self.fill(qvec, ranked, scores, budget, len(first), sum(h.tokens for h in first), passages=passages)
        return [replace(h, seed=self._reached_from(h.note_id, first, spec.sessions)) for h in added]

    def hop_offers(
        self, question: str, first: list[Hit], spec: SearchSpec, passing: Passing | None, found: list[Hit] | None = None
    ) -> Offers:
        """What the hop offers, by why: the seeds' links, their adjacent sessions (and, with ``mentions``, the
        sessions naming them), the notes the question names, the thread; only notes ``passing``, no seed."""
        seeds = [h.note_id for h in first]
        neighbours = {n for s in seeds for n in self.graph.neighbours.get(s, {})}
        sessions = {n for s in seeds for n in self.graph.adjacent_sessions(s)} if spec.sessions else set()
        named = set(self.names.find(question)) if spec.named or spec.mentions or spec.threads else set()
        mentioned: set[str] = set()
        if spec.mentions:
            entities = [s for s in seeds if self.graph.concepts.get(s) and self.graph.concepts[s].session_key is None]
            mentioned = set(self.session_mentions.sessions_naming([*entities, *sorted(named)]))
        thread = self.session_threads.follow(Terms.of(question, named), seeds) if spec.threads else []
        if not spec.named:
            named = set()
        taken = set(seeds)

        def kept(notes: set[str]) -> frozenset[str]:
            return frozenset(n for n in notes if n not in taken and (passing is None or n in passing.notes))

        thread = [n for n in thread if passing is None or n in passing.notes]
        runs: list[str] = []
        if spec.runs:
            runs = [n for n in self.run_of(question, found or first, passing, spec) if kept({n})]
        edges = {n for s in seeds for n in self.mention_graph.of(s)} if spec.mention_edges else set()
        return Offers(kept(neighbours), kept(sessions), kept(mentioned), kept(named), tuple(thread), tuple(runs),
                      kept(edges))  # fmt: skip

    def hop_order(
        self,
        question: str,
        qvec: np.ndarray,
        first: list[Hit],
        spec: SearchSpec,
        passing: Passing | None,
        found: list[Hit] | None = None,
    ) -> tuple[list[str], dict[str, float]]:
        """The hop's candidates best first (the thread, then the run, in session order) and the ranker's scores;
        ``found``: the vector stage's notes, the budget's seeds or not (a run lies between two of them)."""
        offers = self.hop_offers(question, first, spec, passing, found)
        candidates = sorted(offers.notes)
        if not candidates:
            return [], {}
        inp = HopInput(
            question, qvec, {h.note_id: h.score for h in first}, self.graph, self.table,
            self.contexts if spec.ranker in _CONTEXT_RANKERS else None,
            lambda: self.lexical.note_scores(question, phrases=spec.phrases),
            lambda: self.analytics,
        )  # fmt: skip
        scores = RANKERS[spec.ranker](inp, candidates)
        if spec.entity_rank:
            scores = self.with_entities(question, scores, spec.phrases)
        for note in offers.mentioned_only:  # an unlinked mention weighs less than a link
            scores[note] *= MENTION_WEIGHT
        lead = list(dict.fromkeys([*offers.thread, *offers.runs]))  # the thread, then the run, in session order
        return [*lead, *(n for n in order(scores) if n not in lead)], scores

    def with_entities(self, question: str, scores: dict[str, float], phrases: bool) -> dict[str, float]:
        """``scores`` plus a reciprocal-rank list of the candidates naming or linking one of the notes the question
        names (``entity_rank``), most of them first, ties by BM25: a session names them (``session_named``),
        another note links them. Added on the fused rankers' own scale (``rrf``: 1 / (RRF_K + rank))."""
        asked = frozenset(n for n in self.names.find(question) if self.graph.concepts[n].session_key is None)
        if not asked:
            return scores
        counts = {}
        for note in scores:
            concept = self.graph.concepts.get(note)
            named = self.session_named.get(note, frozenset()) if concept and concept.session_key else None
            count = len(asked & (named if named is not None else self.graph.neighbours.get(note, {}).keys()))
            if count:
                counts[note] = count
        lexical = self.lexical.note_scores(question, phrases=phrases)
        listed = sorted(counts, key=lambda n: (-counts[n], -lexical.get(n, 0.0), n))
        bonus = rrf(listed)
        return {n: s + bonus.get(n, 0.0) for n, s in scores.items()}

    def passages(self, question: str, first: Sequence[Hit], size: int, sessions_only: bool = False) -> Passages | None:
        """How to cut a note's text to ``size`` tokens (0: not at all, None): the lines best covering the
        question's words and the names of the entity notes among ``first`` (the seeds), weighed by their BM25 IDF
        over the chunks (``retriever.passage``); with ``sessions_only`` only session notes are cut."""
        if not size:
            return None
        names = [h.title for h in first if h.concept is not None and h.concept.session_key is None]
        chunks = self.lexical.chunks
        terms = {w for text in (question, *names) for w in words(text)}
        idf = {w: chunks.idf(w) for w in terms}
        return Passages(size, Focus.of(question, names, idf), sessions_only)

    def hop_part(self, note: str, qvec: np.ndarray, passages: Passages | None = None) -> tuple[int, str, int] | None:
        """What the hop hands over of ``note``: its chunk closest to the question (row, text, tokens), cut to its
        passage with ``passages``; None for a note with no chunk."""
        best = self.table.best_chunk(note, qvec)
        if best is None:
            return None
        row = best[0]
        text, size = self.table.texts[row], int(self.table.tokens[row])
        concept = self.graph.concepts.get(note)
        if passages is not None and cuts(passages, concept):
            text, size = passages.cut(text, size, concept.title if concept else "")
        return row, text, size

    def _reached_from(self, note: str, first: list[Hit], sessions: bool) -> str | None:
        """The best-ranked seed that links ``note`` (either way) or is its adjacent session; None for a note the
        hop offered for another reason (the question names it, a session that mentions a seed)."""
        for seed in first:
            if note in self.graph.neighbours.get(seed.note_id, {}):
                return seed.note_id
            if sessions and note in self.graph.adjacent_sessions(seed.note_id):
                return seed.note_id
        return None

    def fill(
        self,
        qvec: np.ndarray,
        ranked: list[str],
        scores: dict[str, float],
        budget: Budget,
        notes: int,
        tokens: int,
        outcome: dict[str, tuple[Room, int]] | None = None,
        passages: Passages | None = None,
    ) -> list[Hit]:
        """Add neighbours best first while they fit the budget (a note too big for what is left is skipped), each
        its best chunk (cut to its passage with ``passages``: ``hop_part``). ``outcome`` gets each note's fate and
        the tokens spent before it (``retriever.explain``)."""
        added: list[Hit] = []
        for i, note in enumerate(ranked):
            if room(budget, notes + len(added), tokens, 0) is Room.CAP:
                if outcome is not None:
                    outcome.update((n, (Room.CAP, tokens)) for n in ranked[i:])
                break
            part = self.hop_part(note, qvec, passages)
            if part is None:
                continue
            _, text, size = part
            fate = room(budget, notes + len(added), tokens, size)
            if outcome is not None:
                outcome[note] = (fate, tokens)
            if fate is not Room.FITS:
                continue
            tokens += size
            added.append(self._make_hit(note, scores[note], Via.HOP, [(text, size)]))
        return added


def fit(hits: list[Hit], budget: Budget) -> list[Hit]:
    """The vector stage's hits, best first, while they fit ``budget`` (one too big for what is left is skipped)."""
    kept: list[Hit] = []
    tokens = 0
    for hit in hits:
        if room(budget, len(kept), tokens, 0) is Room.CAP:
            break
        if room(budget, len(kept), tokens, hit.tokens) is not Room.FITS:
            continue
        tokens += hit.tokens
        kept.append(hit)
    return kept


class Room(StrEnum):
    """Whether a note of some size fits a budget that already holds some notes and tokens."""

    FITS = "fits"
    CAP = "cap"  # the budget's notes are all taken
    BUDGET = "budget"  # too many tokens for what is left


def room(budget: Budget, notes: int, tokens: int, size: int) -> Room:
    if budget.notes is not None and notes >= budget.notes:
        return Room.CAP
    if budget.tokens is not None and tokens + size > budget.tokens:
        return Room.BUDGET
    return Room.FITS


@dataclass(frozen=True)
class Offers:
    """The notes the hop offers, by why (``Retriever.hop_offers``); a note may be offered for several reasons."""

    links: frozenset[str]  # linked to or from a seed
    sessions: frozenset[str]  # the previous or next session of a seed
    mentions: frozenset[str]  # sessions that name a seed or a note the question names
    named: frozenset[str]  # notes the question names
    thread: tuple[str, ...]  # sessions carrying a seed's story thread, in session order
    runs: tuple[str, ...] = ()  # sessions between two seed sessions naming what both name, in session order
    edges: frozenset[str] = frozenset()  # notes a seed names without a link, or that name a seed

    @property
    def notes(self) -> frozenset[str]:
        return self.linked | self.edges

    @property
    def linked(self) -> frozenset[str]:
        """The notes offered for any reason but an unlinked mention."""
        return self.links | self.sessions | self.mentions | self.named | frozenset(self.thread + self.runs)

    @property
    def mentioned_only(self) -> frozenset[str]:
        """The notes offered for an unlinked mention alone."""
        return self.edges - self.linked


def cuts(passages: Passages, concept: Concept | None) -> bool:
    """Whether ``passages`` cut a note's text: every note's, or with ``sessions_only`` a session note's."""
    return not passages.sessions_only or (concept is not None and concept.session_key is not None)


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
