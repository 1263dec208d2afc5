"""``search --explain NOTE`` (``retriever/explain.py``) on the shared children-of-ash bundle (the session fixture):
a note cut by each kind of cut (filter, notes cap, tokens budget in the vector stage and in the hop, dedup, not
reached) is said to be cut by that, and every setting it names keeps the note when the search runs again with it;
a kept note is said kept, with its rank and the seed that reached it; the CLI, the search tool and ``/search``
give the same explanation."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from retriever.errors import RetrieverError
from retriever.explain import Cut, Explanation, explain, explanation_lines, resolve_note
from retriever.filters import NoteFilter
from retriever.retrieve import DEFAULT_SPEC, Budget, Mode, Retriever, SearchSpec, Seeds, Via

QUESTION = "Which Cinderknife pilot runs the flamethrower mech, and what's his callsign?"
VECTOR = SearchSpec(Mode.VECTOR, 10, Seeds.DENSE, budget=Budget())


@pytest.fixture(scope="module")
def retriever(coa_bundle: Path) -> Retriever:
    return Retriever.open(coa_bundle)


def hits(retriever: Retriever, spec: SearchSpec, question: str = QUESTION) -> list[str]:
    return [h.note_id for h in retriever.search(question, spec).hits]


def assert_settings_keep(retriever: Retriever, spec: SearchSpec, made: Explanation, question: str = QUESTION) -> None:
    """The explanation names at least one setting, and each keeps the note when the search runs with it."""
    assert made.settings, made
    for setting in made.settings:
        assert made.note_id in hits(retriever, setting.apply(spec), question), setting


def rank(made: Explanation, stage: str) -> int | None:
    return next(r.rank for r in made.ranks if r.stage == stage)


def test_a_kept_note_says_where_and_how(retriever: Retriever) -> None:
    got = retriever.search(QUESTION, DEFAULT_SPEC).hits
    top = got[0]
    made = explain(retriever, QUESTION, DEFAULT_SPEC, top.title.upper())  # a title, in any case
    assert (made.note_id, made.kept, made.position, made.cut) == (top.note_id, "vector", 1, None)
    assert rank(made, "vector notes") == 1 and rank(made, "fused chunks") is not None
    hop = next(h for h in got if h.via is Via.HOP and h.seed)
    made = explain(retriever, QUESTION, DEFAULT_SPEC, hop.vault_path)
    assert made.kept == "hop" and made.position == [h.note_id for h in got].index(hop.note_id) + 1
    assert hop.seed in {r.seed for r in made.reached}
    assert rank(made, "hop candidates") is not None and rank(made, "vector notes") is None
    assert any(line.startswith("  kept: hit") for line in made.lines())


def test_a_note_the_filter_stops(retriever: Retriever) -> None:
    top = retriever.search(QUESTION, DEFAULT_SPEC).hits[0]
    assert top.concept is not None
    other = next(c.type for c in retriever.graph.concepts.values() if c.type and c.type != top.concept.type)
    spec = replace(DEFAULT_SPEC, filters=NoteFilter(types=(other,)))
    made = explain(retriever, QUESTION, spec, top.note_id)
    assert made.cut is Cut.FILTER and f"--type {other}" in made.why
    assert made.settings[0].option.startswith(f"without --type {other}")
    assert_settings_keep(retriever, spec, made)


def test_a_note_after_the_notes_cap(retriever: Retriever) -> None:
    spec = replace(VECTOR, budget=Budget(notes=3))
    sixth = hits(retriever, VECTOR)[5]
    made = explain(retriever, QUESTION, spec, sixth)
    assert made.cut is Cut.CAP and rank(made, "vector notes") == 6
    assert made.settings[0].option == "--max-notes 6"
    assert_settings_keep(retriever, spec, made)


def test_a_hop_note_after_the_notes_cap(retriever: Retriever) -> None:
    got = retriever.search(QUESTION, DEFAULT_SPEC).hits
    seeds = sum(h.via is Via.VECTOR for h in got)
    hops = [h.note_id for h in got if h.via is Via.HOP]
    assert len(hops) >= 2
    spec = replace(DEFAULT_SPEC, budget=replace(DEFAULT_SPEC.budget, notes=seeds + 1))
    made = explain(retriever, QUESTION, spec, hops[1])
    assert made.cut is Cut.CAP and "hop ranked it" in made.why and made.reached
    assert_settings_keep(retriever, spec, made)


def test_a_note_too_big_for_the_tokens_left(retriever: Retriever) -> None:
    got = retriever.search(QUESTION, VECTOR).hits
    spec = replace(VECTOR, budget=Budget(tokens=got[0].tokens))
    made = explain(retriever, QUESTION, spec, got[1].note_id)
    assert made.cut is Cut.BUDGET and "tokens" in made.why
    assert made.settings[0].option.startswith("--max-tokens")
    assert_settings_keep(retriever, spec, made)


def test_a_hop_note_past_vector_at_k_tokens(retriever: Retriever) -> None:
    hop = next(h for h in retriever.search(QUESTION, DEFAULT_SPEC).hits if h.via is Via.HOP)
    # the hop may spend vector@1's tokens; the seeds stay 10 and unbounded by it (scale_seeds off)
    spec = replace(DEFAULT_SPEC, scale_seeds=False, budget=replace(DEFAULT_SPEC.budget, match=1))
    made = explain(retriever, QUESTION, spec, hop.note_id)
    assert made.cut is Cut.BUDGET and "vector@1's" in made.why
    assert made.settings[0].option.startswith("--match-vector")
    assert_settings_keep(retriever, spec, made)


def test_a_note_whose_slots_other_notes_chunks_took(retriever: Retriever) -> None:
    spec = SearchSpec(Mode.VECTOR, 3, Seeds.DENSE, budget=Budget())
    for question in (QUESTION, "What happened at the Ashfall Incident?", "Who leads the Noble Rook Confederacy?"):
        chunks, notes = set(hits(retriever, spec, question)), hits(retriever, replace(spec, dedup=True), question)
        missed = [n for n in notes if n not in chunks]
        if missed:
            break
    else:
        pytest.fail("no question had a note two chunks of another note kept out of k=3 chunks")
    made = explain(retriever, question, spec, missed[0])
    assert made.cut is Cut.DEDUP and made.settings[0].option == "--dedup"
    assert_settings_keep(retriever, spec, made, question)


def test_a_note_the_search_never_reached(retriever: Retriever) -> None:
    spec = replace(VECTOR, k=2)
    far = hits(retriever, replace(VECTOR, dedup=True))[6]  # the seventh nearest note
    made = explain(retriever, QUESTION, spec, far)
    assert made.cut is Cut.NOT_REACHED and not made.reached and "no hop" in made.why
    assert rank(made, "vector chunks") is not None
    assert_settings_keep(retriever, spec, made)
    union = replace(DEFAULT_SPEC, k=1, seeds=Seeds.DENSE, dedup=False)
    unlinked = next(n for n in retriever.graph.concepts if n not in hits(retriever, union)
                    and retriever.table.rows_of.get(n) and not retriever.graph.neighbours.get(n))  # fmt: skip
    made = explain(retriever, QUESTION, union, unlinked)
    assert made.cut is Cut.NOT_REACHED and "no seed links it" in made.why


def test_the_note_is_named_by_id_path_or_title(retriever: Retriever) -> None:
    concept = next(c for c in retriever.graph.concepts.values() if "/" in c.vault_path)
    for ref in (concept.id, concept.vault_path, concept.vault_path.removesuffix(".md"), concept.title.lower()):
        assert resolve_note(retriever.graph, ref) == concept.id
    with pytest.raises(RetrieverError, match=r"no note 'Drex Orn' in the bundle \(did you mean 'Drex Orin'"):
        resolve_note(retriever.graph, "Drex Orn")


def test_the_cli_the_tool_and_json_say_the_same(coa_bundle: Path, retriever: Retriever) -> None:
    from serve_checks import cli

    from retriever.agent.tools import TOOL_SPECS, BundleTools

    made = explain(retriever, QUESTION, replace(DEFAULT_SPEC, k=2), "Ashfall").to_json()
    done = cli("search", str(coa_bundle), QUESTION, "--no-server", "--k", "2", "--explain", "Ashfall", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["explain"] == made
    text = cli("search", str(coa_bundle), QUESTION, "--no-server", "--k", "2", "--explain", "Ashfall")
    assert text.returncode == 0 and "\n".join(explanation_lines(made)) in text.stdout
    wrong = cli("search", str(coa_bundle), QUESTION, "--no-server", "--explain", "No Such Note")
    assert wrong.returncode == 1 and wrong.stderr.startswith("Error: no note 'No Such Note' in the bundle")
    assert "explain" in TOOL_SPECS["search"]["parameters"]["properties"]
    tools = BundleTools(coa_bundle, spec=replace(DEFAULT_SPEC, k=2))
    assert tools.run("search", {"query": QUESTION, "k": 2, "explain": "Ashfall"})["explain"] == made
    assert tools.call("search", {"query": QUESTION, "explain": "No Such Note"}).is_error


def test_a_seed_past_vector_at_k_tokens_with_scaled_seeds(retriever: Retriever) -> None:
    """With ``--scale-seeds`` (runs and passages off), the seeds themselves keep to vector@match's tokens: a
    vector-stage note past them is cut by the budget, and the explanation says the seeds were kept to those tokens."""
    question = "What is the host of those lavish galas known for through his family's history?"
    spec = replace(DEFAULT_SPEC, runs=False, passage=0, seed_passage=0, passage_sessions=False)
    assert spec.scale_seeds and spec.budget.match == 15
    kept = set(hits(retriever, spec, question))
    ranked = [n for n in hits(retriever, replace(spec, mode=Mode.VECTOR, budget=Budget()), question) if n not in kept]
    made = next(m for m in (explain(retriever, question, spec, n) for n in ranked) if "--scale-seeds" in m.why)
    assert made.cut is Cut.BUDGET and "vector@15's tokens" in made.why and rank(made, "vector notes") is not None
    assert_settings_keep(retriever, spec, made, question)
