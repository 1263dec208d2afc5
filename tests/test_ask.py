"""`ask`'s JSON and its terminal rendering of a structured answer (the answer records are built, not stubbed)."""

import time
from dataclasses import replace

from retriever.answer.contract import Answer, Citation
from retriever.answer.prompt import context_notes
from retriever.asker import Asker, AskResult
from retriever.graph import Concept
from retriever.retrieve import DEFAULT_SPEC, Hit, Mode, Retrieval, Via
from vault2okf.cli.render import context_lines, render_sources

HIT = Hit("Sessions/Session 3", "Session 3", "Sessions/Session 3.md", "concepts/Sessions/Session 3.md", 0.9,
          Via.VECTOR, "## Loot\nA map.", 5, "session 3, 2024-03-15")  # fmt: skip
RETRIEVAL = Retrieval((HIT,), Mode.UNION, 10, "lex-dense-hub")
LOOT = Citation("Session 3", "concepts/Sessions/Session 3.md", "Sessions/Session 3", "Loot")
BASE = {"finish_reason": "stop", "prompt_tokens": 9, "completion_tokens": 3, "seconds": 0.1, "model": "m"}


def result(answer: Answer) -> AskResult:
    return AskResult("Who sold the map?", answer, RETRIEVAL, {"answer_ms": 1.0})


def test_json_carries_the_structured_answer():
    data = result(Answer("Mira.", (LOOT,), **BASE)).to_json()
    assert data["answer"] == "Mira." and data["not_found"] is False and data["supported"] is True
    (cited,) = data["citations"]
    assert cited == {"note_id": "Sessions/Session 3", "heading": "Loot", "title": "Session 3", "quote": "",
                     "path": "concepts/Sessions/Session 3.md", "ref": "Sessions/Session 3#Loot"}  # fmt: skip


def test_json_not_found_is_the_answer_flag():
    data = result(Answer("not found in the vault", (), **BASE, not_found=True)).to_json()
    assert data["not_found"] is True and data["citations"] == [] and data["supported"] is False


def test_sources_list_titles_sections_quotes_and_paths():
    mira = Citation("Mira", "concepts/People/Mira.md", "People/Mira", quote="Mira sells  maps.\n" + "word " * 60)
    lines = render_sources(Answer("Mira.", (LOOT, mira), **BASE))
    assert lines[:3] == ["", "Sources:", "  [1] Session 3 › Loot — concepts/Sessions/Session 3.md#Loot"]
    assert lines[3].startswith('  [2] Mira: "Mira sells maps. word word') and lines[3].endswith(
        ' …" — concepts/People/Mira.md'
    )
    assert len(lines) == 4 and len(lines[3]) < 260


def test_the_context_list_shows_each_note_once_and_marks_the_cited():
    mira = Citation("Mira", "concepts/People/Mira.md", "People/Mira")
    hits = (HIT, replace(HIT, note_id="People/Mira", title="Mira", doc_path="concepts/People/Mira.md", via="hop"),
            HIT)  # fmt: skip
    lines = context_lines(Answer("Mira.", (mira, LOOT), **BASE), hits)
    assert lines[0] == "Context (2 notes):" and len(lines) == 3
    assert lines[1].split() == ["cited", "[2]", "vector", "Session", "3", "(concepts/Sessions/Session", "3.md)"]
    assert lines[2].split()[:3] == ["cited", "[1]", "hop"]


def test_an_uncited_answer_is_shown_as_unsupported():
    assert any("unsupported" in line for line in render_sources(Answer("Koko.", (), **BASE)))
    assert render_sources(Answer("not found in the vault", (), **BASE, not_found=True)) == []


def test_context_notes_take_type_and_session_from_the_concept_of_each_hit():
    concept = Concept("Sessions/Session 3", "Session 3", "Sessions/Session 3.md", "concepts/Sessions/Session 3.md",
                      "session", (), 3, "2024-03-15")  # fmt: skip
    (note,) = context_notes(replace(RETRIEVAL, hits=(replace(HIT, concept=concept),)))
    assert (note.type, note.session_number, note.session_date) == ("session", 3, "2024-03-15")
    (bare,) = context_notes(RETRIEVAL)  # a hit made without a concept
    assert bare.type is None and bare.session_label == "session 3, 2024-03-15"


class _Fixed:
    """A retriever that retrieves ``retrieval`` for any question, noting each search in ``events``."""

    def __init__(self, retrieval: Retrieval, events: list[str] | None = None) -> None:
        self.retrieval, self.events = retrieval, events if events is not None else []

    def search(self, question, spec):  # noqa: ANN001, ANN201
        self.events.append("retrieved")
        return self.retrieval


def asker(answerer, events: list[str] | None = None) -> Asker:  # noqa: ANN001
    return Asker(_Fixed(RETRIEVAL, events), DEFAULT_SPEC, answerer=answerer)  # type: ignore[arg-type]


class _Streaming:
    """An answerer that streams two pieces and records what had happened when it started."""

    model = "m"
    notice = None

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def answer(self, question, notes, *, on_token=None):  # noqa: ANN001, ANN201
        self.events.append("answer starts")
        time.sleep(0.02)
        for piece in ("Mi", "ra."):
            on_token(piece)
        time.sleep(0.05)
        return Answer("Mira.", (LOOT,), **BASE)


def test_sources_come_before_the_answer_and_the_first_token_is_timed_from_the_start():
    events: list[str] = []
    started = time.perf_counter() - 1.0  # as if the process had started a second ago
    result = asker(_Streaming(events), events).ask(
        "Who sold the map?", on_token=lambda piece: events.append(piece), started=started,
        on_retrieved=lambda retrieval: events.append(f"sources: {retrieval.notes}"))  # fmt: skip
    assert events == ["retrieved", "sources: 1", "answer starts", "Mi", "ra."]
    first = result.timings["first_token"]
    assert 1020 <= first < 1000 + result.timings["answer_ms"] - 40  # after the 20 ms wait, before the 50 ms one
    assert "first_token" in result.to_json()["timings_ms"]
    assert "first_token" not in asker(_Streaming([])).ask("q").timings  # no start given, no figure
