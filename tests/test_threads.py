"""Story threads across sessions and phrase-aware BM25 (issue 25 point 2): the thread step follows a rare
two-word term from the session a question reaches to the other sessions that hold it, in session order, within
the hop's budget; a question's adjacent words score more where a note holds them as a phrase."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from retriever.graph import Concept, NoteGraph
from retriever.memory import ChunkTable, Lexical, pairs, words
from retriever.mentions import NameIndex, SessionMentions
from retriever.retrieve import DEFAULT_SPEC, Budget, Retriever, SearchSpec
from retriever.threads import SessionThreads, Terms

ROOT = Path(__file__).resolve().parents[1]
THREAD = "The iron lantern was lit again and it showed the way down."  # the thread: a phrase of two common words
APART = "An iron gate creaked and a lantern swung over the road."  # the same two words, not as a phrase
SESSIONS = {n: f"Session {n}. " + (THREAD if n in (2, 5, 7) else APART) for n in range(1, 9)}
QUESTION = "What happened each time the iron lantern was lit?"


def _graph() -> NoteGraph:
    def session(n: int) -> Concept:
        note = f"Sessions/Session {n}"
        return Concept(note, f"Session {n}", f"{note}.md", f"concepts/{note}.md", "session", (), n, None)

    concepts = {c.id: c for c in map(session, SESSIONS)}
    concepts["Places/Road"] = Concept("Places/Road", "Road", "Places/Road.md", "concepts/Places/Road.md", "place",
                                      (), None, None)  # fmt: skip
    return NoteGraph(concepts)


def _threads() -> SessionThreads:
    graph = _graph()
    texts = {f"Sessions/Session {n}": [text] for n, text in SESSIONS.items()}
    return SessionThreads.build(graph, SessionMentions.build(graph, NameIndex.from_graph(graph), texts), texts)


def test_pairs_are_adjacent_words():
    assert pairs(words("The iron lantern, lit")) == ["iron lantern", "lantern lit"]


def test_the_thread_follows_the_phrase_not_its_common_words():
    threads = _threads()
    # "iron" and "lantern" are in every session (not specific); "iron lantern" as a phrase in three of eight
    assert threads.follow(Terms.of(QUESTION), ["Sessions/Session 5"]) == ["Sessions/Session 2", "Sessions/Session 7"]
    assert threads.follow(Terms.of(QUESTION), ["Sessions/Session 4"]) == []  # reached where the thread is not
    assert threads.follow(Terms.of(QUESTION), ["Places/Road"]) == []  # no session reached: nothing to follow


def test_a_term_in_most_of_the_series_is_no_thread():
    threads = _threads()
    assert threads.follow(Terms.of("Where did the road lead?"), ["Sessions/Session 1"]) == []  # 5 of 8 sessions


def test_named_notes_are_terms_too():
    graph = _graph()
    texts = {f"Sessions/Session {n}": [f"Session {n}. We walked the Road." if n in (3, 6) else "We rested."]
             for n in SESSIONS}  # fmt: skip
    threads = SessionThreads.build(graph, SessionMentions.build(graph, NameIndex.from_graph(graph), texts), texts)
    asked = Terms.of("when were we on it?", ["Places/Road"])  # names the note, shares no word with the sessions
    assert threads.follow(asked, ["Sessions/Session 6"]) == ["Sessions/Session 3"]


@pytest.fixture(scope="module")
def retriever() -> Retriever:
    """Every session one chunk, the question's vector nearest Session 5's: a real table, graph and BM25."""
    graph = _graph()
    notes = sorted(graph.concepts)
    texts = [SESSIONS[graph.concepts[n].session_number] if graph.concepts[n].session_number else "A dusty road."
             for n in notes]  # fmt: skip
    vectors = np.eye(len(notes), dtype=np.float32)
    table = ChunkTable([f"{n}#0" for n in notes], notes, texts, np.array([20] * len(notes)), vectors,
                       {n: [i] for i, n in enumerate(notes)})  # fmt: skip
    return Retriever(ROOT, None, _NoEmbedder(), graph, table)


class _NoEmbedder:
    """The question's vector is passed to `search`: nothing is embedded here."""

    name = "none"

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("nothing is embedded in these tests")

    embed_query = embed_documents


def _hop(retriever: Retriever, spec: SearchSpec) -> list[str]:
    qvec = retriever.table.vectors[retriever.table.rows_of["Sessions/Session 5"][0]]
    return [h.note_id.split("/")[-1] for h in retriever.search(QUESTION, spec, qvec=qvec).hits]


def test_the_hop_offers_the_thread_first_in_session_order(retriever: Retriever) -> None:
    spec = SearchSpec("union", 1, ranker="dense", sessions=False, threads=True, budget=Budget(notes=5))
    assert _hop(retriever, spec) == ["Session 5", "Session 2", "Session 7"]  # not 4 or 6, the adjacent ones
    assert _hop(retriever, SearchSpec("union", 1, ranker="dense", sessions=False, budget=Budget(notes=5))) == [
        "Session 5"
    ]  # without threads the lone seed links nowhere


def test_the_thread_stays_within_the_budget(retriever: Retriever) -> None:
    by_notes = SearchSpec("union", 1, ranker="dense", sessions=False, threads=True, budget=Budget(notes=2))
    assert _hop(retriever, by_notes) == ["Session 5", "Session 2"]
    by_tokens = SearchSpec("union", 1, ranker="dense", sessions=False, threads=True, budget=Budget(tokens=45))
    assert _hop(retriever, by_tokens) == ["Session 5", "Session 2"]  # 20 tokens each: a third does not fit


def test_phrases_score_a_note_holding_the_words_side_by_side():
    notes = ["Apart", "Phrase", "Other"]
    texts = [
        "An iron gate, a lantern, iron bars and iron nails.",  # more of the words, but never side by side
        "The iron lantern hung by the door of the inn.",
        "Bread and rope from the market.",
    ]
    table = ChunkTable([f"{n}#0" for n in notes], notes, texts, np.array([9, 9, 6]), np.eye(3, dtype=np.float32),
                       {n: [i] for i, n in enumerate(notes)})  # fmt: skip
    graph = NoteGraph({n: Concept(n, n.lower(), f"{n}.md", f"concepts/{n}.md", "note", (), None, None) for n in notes})
    lexical = Lexical(table, graph)
    question = "where does the iron lantern hang?"
    plain, phrased = lexical.note_scores(question), lexical.note_scores(question, phrases=True)
    assert plain["Apart"] > plain["Phrase"]  # word by word, the note that says "iron" three times wins
    assert phrased["Phrase"] > phrased["Apart"]  # as a phrase, the note that says "iron lantern" does
    chunks = lexical.chunk_scores(question, phrases=True)
    assert chunks[1] > chunks[0] and lexical.chunk_scores(question)[0] > lexical.chunk_scores(question)[1]
    assert lexical.note_scores("lantern", phrases=True) == lexical.note_scores("lantern")  # one word: no pair


def test_the_default_is_the_one_the_selection_report_names():
    report = (ROOT / "reports" / "ranker-selection.md").read_text("utf-8")
    options = json.loads(re.search(r"Options: `(\{.*?\})`", report).group(1))
    spec = DEFAULT_SPEC
    assert spec.mode == "union" and spec.budget.match == 15 and spec.budget.notes is None  # frontier-selection.md
    for key, value in options.items():
        assert getattr(spec, key) == value, key
