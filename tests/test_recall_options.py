"""Issue 37's search options (runs, twins and scale_seeds on in the default search since the frontier selection,
the others off): session runs (the sessions between two retrieved sessions of
a campaign that name what both name, and the same sessions told in another series), unlinked mentions as hop
edges both ways (weighed below links), and the question's entities searched on their own. The rules on small
graphs, then each option in a real search of the shared children-of-ash bundle (the session fixture)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from retriever.graph import Concept, NoteGraph
from retriever.mentions import MentionGraph, NameIndex, entity_queries
from retriever.retrieve import DEFAULT_SPEC, MENTION_WEIGHT, Retriever, SearchSpec
from retriever.threads import RUN_GAP, parallel_series, session_runs


def _session(folder: str, n: int) -> Concept:
    note = f"{folder}/Session {n}"
    return Concept(note, f"Session {n}", f"{note}.md", f"concepts/{note}.md", "session", (), n, None)


def _note(note: str) -> Concept:
    return Concept(note, note.split("/")[-1], f"{note}.md", f"concepts/{note}.md", "npc", (), None, None)


def _campaign() -> NoteGraph:
    """Two series of the same sessions 1-9 (a player's notes and the GM's recaps) and three people."""
    concepts = {c.id: c for c in [*(_session(f, n) for f in ("Notes", "Recaps") for n in range(1, 10)),
                                  *map(_note, ("People/Vex", "People/Orla", "People/Tam"))]}  # fmt: skip
    return NoteGraph(concepts)


NAMED = {  # session -> the people it names
    "Notes/Session 2": frozenset({"People/Vex", "People/Orla"}),
    "Notes/Session 3": frozenset({"People/Vex"}),
    "Notes/Session 4": frozenset({"People/Tam"}),  # names nobody of the run
    "Recaps/Session 4": frozenset({"People/Orla"}),
    "Notes/Session 5": frozenset({"People/Vex", "People/Orla"}),
    "Recaps/Session 2": frozenset({"People/Vex"}),
}


TWINS = {"Notes": frozenset({"Notes", "Recaps"}), "Recaps": frozenset({"Notes", "Recaps"})}


def test_a_run_offers_the_sessions_between_that_name_its_people_in_either_series() -> None:
    runs = session_runs(_campaign(), NAMED, ["Notes/Session 2", "Notes/Session 5", "People/Vex"], parallel=TWINS)
    # between 2 and 5: Notes 3 (Vex), Recaps 4 (Orla), not Notes 4 (Tam only); and the ends told in the recaps
    assert runs == ["Recaps/Session 2", "Notes/Session 3", "Recaps/Session 4", "Recaps/Session 5"]
    alone = session_runs(_campaign(), NAMED, ["Notes/Session 2", "Notes/Session 5"])  # two campaigns: one series
    assert alone == ["Notes/Session 3"]


def test_series_telling_the_same_sessions_are_parallel_and_campaigns_are_not() -> None:
    graph = _campaign()
    twins = {f"{f}/Session {n}": frozenset({"People/Vex", f"People/P{n}"}) for f in ("Notes", "Recaps")
             for n in (1, 2, 3)}  # fmt: skip
    assert parallel_series(graph, twins) == TWINS  # each pair shares 2 of 2: Jaccard 1
    apart = {f"{f}/Session {n}": frozenset({*(f"People/{f}{n}{x}" for x in "abc"), "People/Vex"})
             for f in ("Notes", "Recaps") for n in (1, 2, 3)}  # fmt: skip
    assert parallel_series(graph, apart) == {}  # two campaigns naming a god each session: Jaccard 1/7


def test_no_run_without_two_sessions_close_enough() -> None:
    graph = _campaign()
    assert session_runs(graph, NAMED, ["Notes/Session 2"]) == []
    assert session_runs(graph, NAMED, ["Notes/Session 2", "Notes/Session 3"]) == []  # adjacent: nothing between
    far = {**NAMED, "Notes/Session 9": frozenset({"People/Vex", "People/Orla"})}
    assert RUN_GAP < 9 - 2 and session_runs(graph, far, ["Notes/Session 2", "Notes/Session 9"]) == []
    asked = session_runs(graph, NAMED, ["Notes/Session 2", "Notes/Session 5"], asked=["People/Tam"], parallel=TWINS)
    assert "Notes/Session 4" in asked  # a person the question names joins the run's cast


def test_an_unlinked_mention_is_an_edge_both_ways_and_a_link_is_not() -> None:
    concepts = {c.id: c for c in map(_note, ("People/Vex Marrow", "People/Orla Fenn", "People/Tam Rook"))}
    graph = NoteGraph(
        concepts, {"People/Vex Marrow": {"People/Tam Rook": []}, "People/Tam Rook": {"People/Vex Marrow": []}}
    )
    texts = {"People/Vex Marrow": ["Vex Marrow > Vex sailed with Orla Fenn and Tam Rook."], "People/Orla Fenn": ["x"]}
    edges = MentionGraph.build(graph, NameIndex.from_graph(graph), texts)
    assert edges.of("People/Vex Marrow") == {"People/Orla Fenn"}  # Tam Rook is linked: a link, not a mention
    assert edges.of("People/Orla Fenn") == {"People/Vex Marrow"}  # named by Vex: the edge runs both ways
    assert edges.of("People/Tam Rook") == frozenset()


def test_the_entities_of_a_question() -> None:
    graph = NoteGraph({c.id: c for c in map(_note, ("People/Orla Fenn", "Places/Greyhaven"))})
    titles = {n: c.title for n, c in graph.concepts.items()}
    found = entity_queries('When did Orla\'s crew first hear of the "black echo glyphs" after leaving Greyhaven?',
                           NameIndex.from_graph(graph), titles)  # fmt: skip
    assert found[0] == "black echo glyphs" and "Greyhaven" in found and "Orla" in found
    assert not {"When", "Orla's"} & set(found)  # a question word at the start, a possessive
    assert entity_queries("what happened at the docks?", NameIndex.from_graph(graph), titles) == []


@pytest.fixture(scope="module")
def retriever(coa_bundle: Path) -> Retriever:
    return Retriever.open(coa_bundle)


QUESTIONS = (
    "How did the party's view of the Brazen Thorn change from Session 3 to Session 6?",
    "What did Tezha Olai do between being tricked and being captured?",
    "Who ambushed the escort on the way to the pumping station, and whose warmechs were they?",
)


def test_each_option_runs_within_the_budget(retriever: Retriever) -> None:
    # the frontier selection (reports/frontier-selection.md) turned runs, twins and scale_seeds on
    assert DEFAULT_SPEC.runs and DEFAULT_SPEC.twins and DEFAULT_SPEC.scale_seeds
    assert not (DEFAULT_SPEC.mention_edges or DEFAULT_SPEC.entities or DEFAULT_SPEC.entity_rank)
    tried = ({"runs": False}, {"twins": False}, {"mention_edges": True}, {"entities": True}, {"entity_rank": True})
    for flags in tried:
        spec = replace(DEFAULT_SPEC, **flags)
        retriever.prepare(spec)
        for question in QUESTIONS:
            got = retriever.search(question, spec)
            assert got.hits and len({h.note_id for h in got.hits}) == len(got.hits)
            plain = retriever.search(question, replace(spec, budget=replace(spec.budget, match=None)))
            assert got.tokens <= max(plain.tokens, 6000)


def test_mention_edges_offer_named_notes_below_linked_ones(
    retriever: Retriever, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retriever.retrieve as retrieve

    spec = replace(DEFAULT_SPEC, mention_edges=True)
    asked = [*QUESTIONS, "Who is Dmitri Solis?", "What is Cinderknife's grudge against Ashfall?", "Who is ECHO?"]
    for question in asked:
        first = [h for h in retriever.search(question, spec).hits if str(h.via) == "vector"]
        offers = retriever.hop_offers(question, first, spec, None)
        if offers.mentioned_only:
            break
    else:
        pytest.fail("no question's seeds name a note only by an unlinked mention")
    for note in offers.edges:  # each named by a seed, or naming one, without a link between them
        assert any(note in retriever.mention_graph.of(h.note_id) for h in first)
    qvec = retriever.embed(question)
    ranked, weighed = retriever.hop_order(question, qvec, first, spec, None)
    plain, _ = retriever.hop_order(question, qvec, first, replace(spec, mention_edges=False), None)
    assert set(ranked) - set(plain) == offers.mentioned_only  # the option adds them and nothing else
    monkeypatch.setattr(retrieve, "MENTION_WEIGHT", 1.0)
    _, unweighed = retriever.hop_order(question, qvec, first, spec, None)
    for note in offers.mentioned_only:
        assert weighed[note] == pytest.approx(unweighed[note] * MENTION_WEIGHT) and MENTION_WEIGHT < 1
    for note in set(plain):
        assert weighed[note] == pytest.approx(unweighed[note])


def test_entities_change_the_seeds_only_through_the_named_things(retriever: Retriever) -> None:
    spec = replace(DEFAULT_SPEC, entities=True)
    question = 'Who is "Crackshot"?'
    with_entities = [h.note_id for h in retriever.search(question, spec).hits if str(h.via) == "vector"]
    assert any("Tezha" in n for n in with_entities[:3]), with_entities  # Crackshot is Tezha Olai's callsign
    assert retriever.search("what happened?", spec).hits == retriever.search("what happened?", DEFAULT_SPEC).hits
    assert isinstance(spec, SearchSpec)


def test_entity_rank_adds_a_rank_list_of_the_candidates_naming_what_the_question_names(retriever: Retriever) -> None:
    from retriever.rankers import RRF_K

    plain = replace(DEFAULT_SPEC, entity_rank=False)
    retriever.prepare(replace(plain, entity_rank=True))
    for question in (*QUESTIONS, "Who is Dmitri Solis?", "What is Cinderknife's grudge against Ashfall?"):
        asked = {n for n in retriever.names.find(question) if retriever.graph.concepts[n].session_key is None}
        first = [h for h in retriever.search(question, plain).hits if str(h.via) == "vector"]
        qvec = retriever.embed(question)
        _, before = retriever.hop_order(question, qvec, first, plain, None)
        _, after = retriever.hop_order(question, qvec, first, replace(plain, entity_rank=True), None)
        assert set(before) == set(after)  # it ranks the same candidates, it offers none
        raised = {n: after[n] - before[n] for n in before if after[n] > before[n] + 1e-12}
        if raised:
            break
    else:
        pytest.fail("no question's hop candidates name or link what it names")
    for note, bonus in raised.items():
        concept = retriever.graph.concepts[note]
        named = (
            retriever.session_named.get(note, frozenset())
            if concept.session_key
            else set(retriever.graph.neighbours.get(note, {}))
        )
        assert asked & named and bonus <= 1 / (RRF_K + 1) + 1e-12
    assert all(after[n] == pytest.approx(before[n]) for n in before if n not in raised)
    unnamed = "what happened?"  # names nothing: the scores are the ranker's
    assert (
        retriever.hop_order(unnamed, qvec, first, replace(plain, entity_rank=True), None)[1]
        == (retriever.hop_order(unnamed, qvec, first, plain, None)[1])
    )


def test_scale_seeds_scales_the_seeds_with_the_matched_budget_and_keeps_them_to_it(retriever: Retriever) -> None:
    plain = replace(DEFAULT_SPEC, scale_seeds=False, runs=False, budget=replace(DEFAULT_SPEC.budget, match=5))
    assert DEFAULT_SPEC.budget.notes is None  # the default caps tokens, not notes
    scaled = replace(plain, scale_seeds=True)
    assert (plain.vector_k, scaled.vector_k) == (10, 3)  # 10 seeds at vector@15's budget: 10 * 5 / 15 at vector@5's
    assert replace(scaled, budget=replace(scaled.budget, match=15)).vector_k == 10
    assert replace(scaled, budget=replace(scaled.budget, match=None)).vector_k == 10  # no matched budget: k
    vector = SearchSpec("vector", 5)
    over = 0
    for question in QUESTIONS:
        cap = retriever.search(question, vector).tokens
        got = retriever.search(question, scaled)
        assert got.tokens <= cap and sum(str(h.via) == "vector" for h in got.hits) <= 3
        over += retriever.search(question, plain).tokens > cap
    assert over, "without the option the seeds spend more than vector@5 on no question"


def test_twins_make_two_adjacent_sessions_a_run_told_in_the_other_series() -> None:
    adjacent = ["Notes/Session 2", "Notes/Session 3"]
    assert session_runs(_campaign(), NAMED, adjacent, parallel=TWINS) == []  # nothing lies between them
    assert session_runs(_campaign(), NAMED, adjacent, parallel=TWINS, adjacent=True) == [
        "Recaps/Session 2", "Recaps/Session 3"]  # fmt: skip
    assert session_runs(_campaign(), NAMED, adjacent, adjacent=True) == []  # one series: no other telling


def test_the_session_mentions_are_cached_for_the_index_and_the_graph(
    coa_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retriever.mentions import SESSION_MENTIONS_CACHE, SessionMentions, load_session_mentions
    from vault2okf.protocol import state_dir

    path = state_dir(coa_bundle) / SESSION_MENTIONS_CACHE
    path.unlink(missing_ok=True)
    built = Retriever.open(coa_bundle).session_mentions  # runs are in the default search: every search needs them
    assert path.is_file() and built.sessions_of
    monkeypatch.setattr(SessionMentions, "build", classmethod(lambda *_: pytest.fail("built again, not read")))
    opened = Retriever.open(coa_bundle)
    assert opened.session_mentions == built
    key = opened._mentions_key()
    assert load_session_mentions(path, key, 1 << 30) == built
    assert load_session_mentions(path, ["another index"], 1 << 30) is None
    monkeypatch.undo()
    path.write_bytes(path.read_bytes()[:-3])  # damaged: built again and written over
    assert load_session_mentions(path, key, 1 << 30) is None
    assert Retriever.open(coa_bundle).session_mentions == built
    assert load_session_mentions(path, key, 1 << 30) == built
