"""Search options that widen the hop or the seeds: sessions that mention a seed, notes the question names,
one slot per note. Through the real converter, MiniLM and Chroma, on a vault made for the purpose."""

from __future__ import annotations

import pytest

from retriever.index import index_bundle
from retriever.retrieve import Budget, Retriever, SearchSpec
from vault2okf.convert import convert

pytestmark = pytest.mark.slow

LONG = " ".join(f"The lighthouse keeper logged storm number {i} and the lamp oil it cost." for i in range(120))
NOTES = {
    "People/Maren Voss.md": "Maren Voss keeps the lighthouse on the northern cape and trades in lamp oil.",
    # sessions that mention Maren by name without linking her
    "Sessions/Session 1.md": "We met Maren Voss at the harbour; she was friendly and sold us rope.",
    "Sessions/Session 2.md": "A quiet session of travel through the marsh.",
    "Sessions/Session 3.md": "Maren Voss refused to speak to us after the fire at the docks.",
    "Places/Cape Lighthouse.md": "The lighthouse on the northern cape. " + LONG,
    "Places/Harbour.md": "The harbour of Greywater, busy with fishing boats.",
}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory, minilm) -> Retriever:  # noqa: ANN001
    root = tmp_path_factory.mktemp("expansion")
    vault = root / "vault"
    for path, text in NOTES.items():
        (vault / path).parent.mkdir(parents=True, exist_ok=True)
        (vault / path).write_text(text + "\n", "utf-8")
    convert(vault, root / "bundle")
    index_bundle(root / "bundle", embedder_name="minilm", progress=False)
    return Retriever.open(root / "bundle")


QUESTION = "How did the woman who trades lamp oil treat the party over time?"  # names nobody


def _paths(retriever: Retriever, spec: SearchSpec) -> list[str]:
    retriever.prepare(spec)
    return [h.vault_path for h in retriever.search(QUESTION, spec).hits]


def test_mentions_offer_the_sessions_that_name_a_seed(retriever: Retriever) -> None:
    seeds_only = SearchSpec("union", 1, sessions=False, budget=Budget(notes=4))
    plain = _paths(retriever, seeds_only)
    assert "Sessions/Session 3.md" not in plain  # not linked, not adjacent: the plain hop cannot reach it
    assert plain == ["People/Maren Voss.md"]  # the one seed, and she links nowhere
    widened = _paths(retriever, SearchSpec("union", 1, sessions=False, mentions=True, budget=Budget(notes=4)))
    assert widened == ["People/Maren Voss.md", "Sessions/Session 1.md", "Sessions/Session 3.md"]  # not Session 2


def test_named_notes_join_the_hop(retriever: Retriever) -> None:
    question = "What do the logs say about Maren Voss and the Harbour?"
    spec = SearchSpec("union", 1, sessions=False, named=True, budget=Budget(notes=5))
    retriever.prepare(spec)
    hits = retriever.search(question, spec).hits
    assert {"People/Maren Voss.md", "Places/Harbour.md"} <= {h.vault_path for h in hits}


def test_dedup_gives_each_note_one_slot(retriever: Retriever) -> None:
    chunks = retriever.search("lamp oil and storms at the lighthouse", SearchSpec("vector", 4))
    per_note = retriever.search("lamp oil and storms at the lighthouse", SearchSpec("vector", 4, dedup=True))
    assert len(per_note.hits) == 4 > len(chunks.hits)  # the long note took several of the 4 chunk slots
    assert per_note.hits[0].vault_path == chunks.hits[0].vault_path


@pytest.mark.parametrize("question", [QUESTION, "What happened at the docks?", "Tell me about Greywater"])
def test_a_matched_budget_never_spends_more_than_vector_search(retriever: Retriever, question: str) -> None:
    vector = retriever.search(question, SearchSpec("vector", 3))
    spec = SearchSpec("union", 1, mentions=True, named=True, budget=Budget(notes=15, tokens=6000, match=3))
    retriever.prepare(spec)
    union = retriever.search(question, spec)
    assert union.tokens <= vector.tokens and union.notes <= 15
    unmatched = retriever.search(question, SearchSpec("union", 1, mentions=True, named=True))
    assert unmatched.tokens >= union.tokens
