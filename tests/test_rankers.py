"""Neighbour rankers on hand-made data, with hand-computed expectations."""

from __future__ import annotations

import numpy as np
import pytest

from retriever.graph import Concept, GraphAnalytics, NoteGraph
from retriever.memory import ChunkTable, ContextVectors
from retriever.rankers import RANKERS, RRF_K, HopInput, dense, dense_comm, dense_hub, dense_pr, fuse, order, support
from retriever.rankers.prior import COMMUNITY_BONUS


def concept(note: str) -> Concept:
    return Concept(note, note.title(), f"{note}.md", f"concepts/{note}.md", "Note", (), None, None)


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture
def inp() -> HopInput:
    # seeds s1 (score .9) and s2 (score .5); a links to s1 and s2, b to s1, c to s2 (and c is a hub)
    graph = NoteGraph(
        {n: concept(n) for n in ("s1", "s2", "a", "b", "c", "x1", "x2", "x3")},
        {
            "s1": {"a": ["a near s1"], "b": ["the bell rang"]},
            "s2": {"a": ["a near s2"], "c": ["c text"]},
            "a": {"s1": ["a near s1"], "s2": ["a near s2"]},
            "b": {"s1": ["the bell rang"]},
            "c": {"s2": ["c text"], "x1": [], "x2": [], "x3": []},
        },
    )
    table = ChunkTable(
        ids=["a#0", "b#0", "b#1", "c#0"],
        note_ids=["a", "b", "b", "c"],
        texts=["A", "B0", "B1", "C"],
        tokens=np.array([10, 20, 30, 40]),
        vectors=np.vstack([unit(1, 0), unit(0, 1), unit(1, 1), unit(-1, 0)]),
        rows_of={"a": [0], "b": [1, 2], "c": [3]},
    )
    contexts = ContextVectors(
        ["a near s1", "a near s2", "the bell rang", "c text"],
        np.vstack([unit(0, 1), unit(0, 1), unit(1, 0), unit(1, 1)]),
    )
    return HopInput(
        "q", unit(1, 0), {"s1": 0.9, "s2": 0.5}, graph, table, contexts, lambda: {"a": 1.0, "b": 3.0, "c": 2.0}
    )


def test_dense_is_the_best_chunk_similarity(inp: HopInput) -> None:
    scores = dense(inp, ["a", "b", "c"])
    assert scores == pytest.approx({"a": 1.0, "b": np.sqrt(0.5), "c": -1.0})


def test_dense_hub_divides_by_log_degree(inp: HopInput) -> None:
    scores = dense_hub(inp, ["a", "c"])
    assert scores["a"] == pytest.approx(1.0 / np.log2(2 + 2))
    assert scores["c"] == pytest.approx(-1.0 / np.log2(2 + 4))


def test_support_sums_the_scores_of_linking_seeds(inp: HopInput) -> None:
    assert support(inp, ["a", "b", "c"]) == pytest.approx({"a": 1.4, "b": 0.9, "c": 0.5})


def test_context_scores_the_linking_sentence_not_the_note(inp: HopInput) -> None:
    scores = RANKERS["context"](inp, ["a", "b", "c"])
    assert scores == pytest.approx({"a": 0.0, "b": 1.0, "c": np.sqrt(0.5)})
    assert order(scores) == ["b", "c", "a"]


def test_lexical_reads_the_bm25_scores(inp: HopInput) -> None:
    assert order(RANKERS["lexical"](inp, ["a", "b", "c"])) == ["b", "c", "a"]


def test_rrf_sums_reciprocal_ranks(inp: HopInput) -> None:
    fused = fuse(dense, support)(inp, ["a", "b", "c"])
    # dense ranks a, b, c; support ranks a, b, c
    assert fused["a"] == pytest.approx(2 / (RRF_K + 1))
    assert fused["b"] == pytest.approx(2 / (RRF_K + 2))
    assert fused["c"] == pytest.approx(2 / (RRF_K + 3))


def test_order_breaks_ties_by_id() -> None:
    assert order({"b": 1.0, "a": 1.0, "c": 2.0}) == ["c", "a", "b"]


def test_file_order_is_vault_path_order(inp: HopInput) -> None:
    assert order(RANKERS["file"](inp, ["c", "a", "b"])) == ["a", "b", "c"]


def test_every_registered_ranker_scores_every_candidate(inp: HopInput) -> None:
    for name, ranker in RANKERS.items():
        assert set(ranker(inp, ["a", "b", "c"])) == {"a", "b", "c"}, name


@pytest.fixture
def near() -> HopInput:
    # seed s reaches a and b (same degree); a matches the question a little better (cosine .743 vs .707), b is
    # the better BM25 match, central (PageRank .5 of 4 notes) and in s's community; a is neither
    graph = NoteGraph(
        {n: concept(n) for n in ("s", "a", "b", "z")},
        {"s": {"a": ["s a"], "b": ["s b"]}, "a": {"s": ["s a"]}, "b": {"s": ["s b"]}},
    )
    table = ChunkTable(["a#0", "b#0"], ["a", "b"], ["A", "B"], np.array([5, 5]),
                       np.vstack([unit(1, 0.9), unit(1, 1)]), {"a": [0], "b": [1]})  # fmt: skip
    analytics = GraphAnalytics({"s": 0.2, "a": 0.1, "b": 0.5, "z": 0.2}, {"s": "s", "b": "s", "a": "a", "z": "z"})
    return HopInput("q", unit(1, 0), {"s": 0.9}, graph, table, None, lambda: {"b": 1.0}, lambda: analytics)


@pytest.mark.parametrize("name", ["lex-dense-pr", "lex-dense-comm", "lex-dense-hub-comm"])
def test_an_analytics_prior_turns_dense_round_for_the_central_same_community_note(near: HopInput, name: str) -> None:
    assert order(RANKERS["lex-dense"](near, ["a", "b"])) == ["a", "b"]  # lexical says b, dense a: a tie, by id
    assert order(RANKERS[name](near, ["a", "b"])) == ["b", "a"]  # the prior turns dense round: both say b


def test_the_priors_are_plain_dense_without_analytics(near: HopInput) -> None:
    near.analytics = GraphAnalytics  # an older bundle: no analytics table
    assert dense_pr(near, ["a", "b"]) == dense_comm(near, ["a", "b"]) == dense(near, ["a", "b"])
    assert order(RANKERS["lex-dense-comm"](near, ["a", "b"])) == ["a", "b"]


def test_the_pagerank_prior_and_the_community_bonus_by_hand(near: HopInput) -> None:
    a, b = 1 / np.sqrt(1.81), np.sqrt(0.5)
    assert dense_pr(near, ["a", "b"]) == pytest.approx({"a": a * np.log2(2 + 0.4), "b": b * np.log2(2 + 2)})
    assert dense_comm(near, ["a", "b"]) == pytest.approx({"a": a, "b": b + COMMUNITY_BONUS})


def test_the_light_spec_names_every_ranker_in_the_registry_order() -> None:
    """``retriever.spec`` checks a spec against the names without importing the rankers: they must agree."""
    from retriever.rankers import RANKERS, RankerName
    from retriever.spec import RANKER_NAMES

    assert tuple(RANKERS) == RANKER_NAMES and [r.value for r in RankerName] == list(RANKER_NAMES)
