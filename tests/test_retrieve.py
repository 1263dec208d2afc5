"""Retrieval modes on a small vault built for the purpose, through the real converter, MiniLM and Chroma."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from retriever.graph import GraphAnalytics, load_analytics
from retriever.index import index_bundle
from retriever.rankers import RANKERS
from retriever.retrieve import Budget, Retriever, SearchSpec
from vault2okf.convert import convert

pytestmark = pytest.mark.slow

NOTES = {
    "Places/Old Graveyard.md": "The old graveyard lies north of the village. A ghoul named Morrow guards its crypt.",
    # a backlink-only neighbour: it links to the graveyard, the graveyard never links to it
    "Sessions/Session 4.md": "We walked to the [[Old Graveyard]] at dusk and spoke with the gatekeeper's widow.",
    "People/Widow Hale.md": "Widow Hale sells candles in the village square and remembers the old days.",
    "Places/Hub Town.md": "Hub Town is the trading centre of the valley.",
    "Items/Bronze Key.md": "A bronze key that opens the crypt door under the chapel.",
}
FILLER = 12  # notes that all link to Hub Town, making it a hub


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory, minilm) -> Retriever:  # noqa: ANN001
    root = tmp_path_factory.mktemp("retrieve")
    vault = root / "vault"
    for path, text in NOTES.items():
        (vault / path).parent.mkdir(parents=True, exist_ok=True)
        (vault / path).write_text(text + "\n", "utf-8")
    for i in range(FILLER):
        (vault / "Shops").mkdir(exist_ok=True)
        (vault / "Shops" / f"Shop {i}.md").write_text(
            f"Shop {i} sells goods in [[Hub Town]], item number {i}.\n", "utf-8"
        )
    convert(vault, root / "bundle")
    index_bundle(root / "bundle", embedder_name="minilm", progress=False)
    return Retriever.open(root / "bundle")


def test_vector_mode_groups_chunks_into_notes(retriever: Retriever) -> None:
    r = retriever.search("Who guards the crypt in the old graveyard?", SearchSpec("vector", k=3))
    assert r.hits[0].vault_path == "Places/Old Graveyard.md"
    assert all(h.via == "vector" for h in r.hits)
    assert len({h.note_id for h in r.hits}) == len(r.hits) <= 3
    assert r.tokens == sum(h.tokens for h in r.hits) > 0


def test_hop_reaches_a_backlink_only_neighbour(retriever: Retriever) -> None:
    bundle = retriever.bundle
    con = duckdb.connect(str(bundle / "okf.duckdb"), read_only=True)
    out_links = con.execute("SELECT target_id FROM links WHERE source_id = 'Places/Old Graveyard'").fetchall()
    con.close()
    assert out_links == []  # the graveyard links to nothing: only the session points at it
    r = retriever.search("Who guards the crypt in the old graveyard?", SearchSpec("union", 1, budget=Budget(notes=3)))
    assert r.hits[0].vault_path == "Places/Old Graveyard.md"
    hop = [h for h in r.hits if h.via == "hop"]
    assert [h.vault_path for h in hop] == ["Sessions/Session 4.md"]


def test_the_cap_holds_on_a_hub(retriever: Retriever) -> None:
    q = "What is the trading centre of the valley?"
    for notes, tokens in ((4, None), (None, 60), (6, 100)):
        r = retriever.search(q, SearchSpec("union", 1, ranker="dense", budget=Budget(notes=notes, tokens=tokens)))
        assert r.hits[0].vault_path == "Places/Hub Town.md"
        assert notes is None or r.notes <= notes
        assert tokens is None or r.tokens <= tokens
        assert any(h.via == "hop" for h in r.hits)
    uncapped = retriever.search(q, SearchSpec("union", 1, budget=Budget()))
    assert uncapped.notes == 1 + FILLER  # the hub's whole neighbourhood, which is what the cap prevents


@pytest.mark.parametrize("mode", ["vector", "union"])
def test_the_budget_caps_the_vector_stage_too(retriever: Retriever, mode: str) -> None:
    q = "the ghoul in the crypt"
    wide = retriever.search(q, SearchSpec(mode, 6, budget=Budget()))
    assert wide.notes >= 3 and wide.left_out == 0
    two = retriever.search(q, SearchSpec(mode, 6, budget=Budget(notes=2)))
    assert [h.note_id for h in two.hits] == [h.note_id for h in wide.hits[:2]] and two.left_out > 0
    smallest = min(h.tokens for h in wide.hits if h.via == "vector")
    none = retriever.search(q, SearchSpec(mode, 6, budget=Budget(tokens=smallest - 1)))
    assert none.hits == () and none.left_out == len([h for h in wide.hits if h.via == "vector"])
    tight = retriever.search(q, SearchSpec(mode, 6, budget=Budget(tokens=wide.hits[0].tokens)))
    assert tight.tokens <= wide.hits[0].tokens and tight.hits[0] == wide.hits[0]


def test_graph_mode_seeds_from_five_and_adds_only_new_notes(retriever: Retriever) -> None:
    r = retriever.search("bronze key for the crypt", SearchSpec("graph", 15, budget=Budget(notes=8)))
    vector = [h for h in r.hits if h.via == "vector"]
    assert len(vector) <= 5
    assert len({h.note_id for h in r.hits}) == len(r.hits) <= 8


@pytest.mark.parametrize("ranker", list(RANKERS))
def test_every_ranker_runs_within_budget(retriever: Retriever, ranker: str) -> None:
    r = retriever.search("the ghoul in the crypt", SearchSpec("union", 2, ranker=ranker, budget=Budget(5, 400)))
    assert r.ranker == ranker and r.notes <= 5 and r.tokens <= 400


def test_the_analytics_priors_read_the_bundle_and_do_without_it(retriever: Retriever, tmp_path: Path) -> None:
    assert sum(retriever.analytics.pagerank.values()) == pytest.approx(1.0)
    assert set(retriever.analytics.community) == set(retriever.graph.concepts)
    shutil.copy(retriever.bundle / "okf.duckdb", tmp_path / "okf.duckdb")
    with duckdb.connect(str(tmp_path / "okf.duckdb")) as con:
        con.execute("DROP TABLE analytics")
    assert load_analytics(tmp_path) == GraphAnalytics()


def test_hybrid_seeds_find_a_rare_name(retriever: Retriever) -> None:
    r = retriever.search("Morrow", SearchSpec("vector", 2, "hybrid"))
    assert "Places/Old Graveyard.md" in [h.vault_path for h in r.hits]


def test_timings_exclude_a_given_question_vector(retriever: Retriever) -> None:
    q = "candles in the square"
    r = retriever.search(q, SearchSpec("union", 2, budget=Budget(notes=4)), qvec=retriever.embed(q))
    assert "embed_ms" not in r.timings and r.timings["retrieve_ms"] >= 0


def test_unknown_ranker_is_a_clear_error(retriever: Retriever) -> None:
    from retriever.errors import RetrieverError

    with pytest.raises(RetrieverError, match="unknown ranker 'best'; choose one of dense"):
        SearchSpec("union", ranker="best")
    with pytest.raises(RetrieverError, match="unknown mode 'sideways'; choose one of vector, graph, union"):
        SearchSpec("sideways")
    with pytest.raises(RetrieverError, match="the question is empty"):
        retriever.search("   ")


def test_adjacent_sessions_are_candidates(tmp_path: Path, minilm) -> None:  # noqa: ANN001
    vault = tmp_path / "vault"
    (vault / "Sessions").mkdir(parents=True)
    for n, text in (
        (1, "The party found a silver bell."),
        (2, "They rang the bell at the tower."),
        (3, "A storm came."),
    ):
        (vault / "Sessions" / f"Session {n}.md").write_text(text + "\n", "utf-8")
    convert(vault, tmp_path / "bundle")
    index_bundle(tmp_path / "bundle", embedder_name="minilm", progress=False)
    r = Retriever.open(tmp_path / "bundle").search(
        "silver bell", SearchSpec("union", 1, sessions=True, budget=Budget(notes=3))
    )
    assert [h.vault_path for h in r.hits][:2] == ["Sessions/Session 1.md", "Sessions/Session 2.md"]
    assert r.hits[1].session_label == "session 2"
