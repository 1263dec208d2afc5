"""Passages (``retriever/passage.py``, ``SearchSpec.passage`` and ``seed_passage``, issue 37): the window of a chunk
chosen for the question, pure, then in a real search of the shared children-of-ash bundle (the session fixture),
and ``--explain`` on a hop note the budget cuts, which names a passage size that keeps it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from retriever.errors import RetrieverError
from retriever.explain import Cut, explain
from retriever.passage import SEED_NAME_WEIGHT, Focus, passage
from retriever.retrieve import DEFAULT_SPEC, Retriever, SearchSpec, Via
from retriever.tokens import count_tokens

SESSION = "\n".join([
    "- We wake in the purple tent and eat brownies from the goblin cart",
    "- The guard at the checkpoint asks about the lockdown",
    "- Trevor throws a book back at the door.",
    "- We get an appointment to speak with Trevor at ten tomorrow",
    "- The twins ask Alisha to find a ring",
])  # fmt: skip


def test_a_chunk_that_fits_is_handed_over_whole() -> None:
    focus = Focus({"trevor": 2.0})
    assert passage(SESSION, count_tokens(SESSION), 400, focus) == (SESSION, count_tokens(SESSION))


def test_the_window_holds_the_lines_naming_what_the_question_asks() -> None:
    focus = Focus.of("When did Trevor agree to an appointment?", [], {"trevor": 3.0, "appointment": 2.0})
    text, tokens = passage(SESSION, count_tokens(SESSION), 25, focus)
    assert "appointment to speak with Trevor" in text and "purple tent" not in text
    assert text in SESSION and tokens == count_tokens(text) <= 25


def test_lines_apart_are_kept_in_order_and_the_rest_fills_from_the_top() -> None:
    focus = Focus({"brownies": 3.0, "ring": 2.0})
    text, tokens = passage(SESSION, count_tokens(SESSION), 33, focus)
    first, *rest = SESSION.split("\n")
    assert text.split("\n")[0] == first and text.split("\n")[-1] == rest[-1]  # both focus lines, in order
    assert tokens == count_tokens(text) == 33 and "Trevor" not in text
    assert "guard at the checkpoint" in text  # the top line that fits


def test_without_a_focus_word_the_window_is_the_chunks_head() -> None:
    text, tokens = passage(SESSION, count_tokens(SESSION), 20, Focus({"dragon": 1.0}))
    assert SESSION.startswith(text) and tokens <= 20 and "goblin" in text


def test_a_line_longer_than_the_window_is_cut_at_a_token() -> None:
    line = " ".join(f"word{i}" for i in range(50)) + " Trevor " + " ".join(f"tail{i}" for i in range(50))
    text, tokens = passage(line, count_tokens(line), 10, Focus({"trevor": 1.0}))
    assert "Trevor" in text and tokens == count_tokens(text) == 10 and text in line


def test_seed_names_weigh_half_a_question_word() -> None:
    focus = Focus.of("Where is the ring?", ["Alisha", "Ring"], {"ring": 2.0, "alisha": 4.0})
    assert focus.weights == {"ring": 2.0, "alisha": 4.0 * SEED_NAME_WEIGHT}


def test_a_negative_passage_is_refused() -> None:
    with pytest.raises(RetrieverError, match="passage must be 0"):
        SearchSpec(passage=-1)


@pytest.fixture(scope="module")
def retriever(coa_bundle: Path) -> Retriever:
    return Retriever.open(coa_bundle)


QUESTION = "How did the party's view of the Brazen Thorn change from Session 3 to Session 6?"


def of_chunk(text: str, chunk: str) -> bool:
    """Every line of ``text`` is in ``chunk``, in the chunk's order."""
    at = 0
    for line in text.split("\n"):
        at = chunk.find(line, at)
        if at < 0:
            return False
        at += len(line)
    return True


WHOLE = replace(DEFAULT_SPEC, passage=0, seed_passage=0, passage_sessions=False)  # whole chunks everywhere


def test_the_default_cuts_session_notes_only() -> None:
    # chosen blind with the answers' condition (reports/frontier-selection.md, scripts/select_frontier.py --answers)
    assert (DEFAULT_SPEC.passage, DEFAULT_SPEC.seed_passage, DEFAULT_SPEC.passage_sessions) == (100, 200, True)


def test_hop_notes_and_seeds_hand_over_passages_of_their_chunks(retriever: Retriever) -> None:
    whole = retriever.search(QUESTION, WHOLE)
    cut = retriever.search(QUESTION, replace(WHOLE, passage=60))
    hop = [h for h in cut.hits if h.via is Via.HOP]
    assert hop and all(h.tokens <= 60 and h.tokens == count_tokens(h.text) for h in hop)
    chunks = retriever.table.texts
    assert all(any(of_chunk(h.text, chunks[r]) for r in retriever.table.rows_of[h.note_id]) for h in hop)
    assert sum(h.via is Via.HOP for h in cut.hits) > sum(h.via is Via.HOP for h in whole.hits)
    assert cut.tokens <= whole.tokens + 60 and cut.tokens <= 6000
    seeds = retriever.search(QUESTION, replace(WHOLE, seed_passage=80))
    assert all(h.tokens <= 80 for h in seeds.hits if h.via is Via.VECTOR)
    assert [h.text for h in retriever.search(QUESTION, replace(WHOLE, seed_passage=80, mode="vector")).hits] \
        == [h.text for h in retriever.search(QUESTION, replace(WHOLE, mode="vector")).hits]  # fmt: skip


def test_explain_names_a_passage_that_keeps_a_hop_note_the_budget_cut(retriever: Retriever) -> None:
    spec = WHOLE
    ambush = "Who ambushed the escort on the way to the pumping station, and whose warmechs were they?"
    for question in (QUESTION, ambush):
        kept = {h.note_id for h in retriever.search(question, spec).hits}
        shorter = [h.note_id for h in retriever.search(question, replace(spec, passage=60)).hits]
        gained = [n for n in shorter if n not in kept]
        if gained:
            break
    else:
        pytest.fail("no question had a hop note that only a 60-token passage kept")
    made = explain(retriever, question, spec, gained[0])
    assert made.cut is Cut.BUDGET and "its best chunk needs" in made.why
    passages = [s for s in made.settings if s.option.startswith("--passage")]
    assert passages, made.settings
    for setting in passages:
        assert gained[0] in {h.note_id for h in retriever.search(question, setting.apply(spec)).hits}
    with_passage = replace(spec, passage=200)
    if gained[0] not in {h.note_id for h in retriever.search(question, with_passage).hits}:
        said = explain(retriever, question, with_passage, gained[0])
        assert said.cut is Cut.BUDGET and "200-token passage needs" in said.why


def test_a_chunk_keeps_its_header_line_and_the_window_fills_the_rest() -> None:
    chunk = f"Session 18 > Notes\n{SESSION}"
    focus = Focus({"trevor": 3.0, "appointment": 2.0})
    text, tokens = passage(chunk, count_tokens(chunk), 25, focus, "Session 18")
    assert text.startswith("Session 18 > Notes\n") and "appointment to speak with Trevor" in text
    assert tokens == count_tokens(text) <= 25 and "purple tent" not in text
    other, _ = passage(chunk, count_tokens(chunk), 25, focus, "Another title")  # not its header: windowed as text
    assert "appointment to speak with Trevor" in other and not other.startswith("Session 18 > Notes")


def test_a_server_runs_the_passages_a_client_asks_for() -> None:
    from retriever.serve.library import BadRequest
    from retriever.serve.views import read_query
    from vault2okf.cli.through import spec_body

    spec = replace(DEFAULT_SPEC, passage=80, seed_passage=150)
    assert read_query(spec_body("Who?", spec, "")).spec == spec
    for bad in (True, -1, "80"):
        with pytest.raises(BadRequest, match='"passage" must be an integer'):
            read_query({"question": "Who?", "passage": bad})


def test_passage_sessions_cuts_session_notes_only(retriever: Retriever) -> None:
    spec = replace(WHOLE, passage=40, seed_passage=60, passage_sessions=True)
    got = retriever.search(QUESTION, spec).hits
    sessions = [h for h in got if h.concept is not None and h.concept.session_key is not None]
    others = [h for h in got if h not in sessions]
    assert sessions and others
    assert all(h.tokens <= (40 if h.via is Via.HOP else 60) for h in sessions)
    texts = set(retriever.table.texts)
    assert all(h.text in texts for h in others)  # whole chunks (dedup: one per note)
    assert any(h.text not in texts for h in sessions)
