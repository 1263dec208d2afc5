"""`--llm extract`: passages cut with the markdown parser, quotes verbatim from the context, citations into it,
refusals by the one not-found rule; over a real converted and indexed vault (MiniLM), through the CLI, and over
every question of every golden set (the shared vaults converted, contexts built from their chunks)."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from bundle_checks import indexed_bundle
from growth import assert_linear

from retriever.answer.backends import AnswerSpec, Backend, get_answerer
from retriever.answer.contract import ContextNote
from retriever.answer.extract import STRONG_NONE, WEAKER, ExtractAnswerer
from retriever.answer.passages import passages, sentences, stem, terms
from retriever.answer.prompt import context_notes
from retriever.asker import Asker
from retriever.chunk import chunk_note, clean_body
from retriever.okf import read_bundle
from retriever.retrieve import DEFAULT_SPEC, Retriever

ROOT = Path(__file__).resolve().parents[1]
VAULTS = ROOT.parent / "shared" / "vaults"
GOLDEN = sorted((ROOT / "golden").glob("*.jsonl"))
NOTES = {
    "People/Maren Voss.md": (
        "Maren Voss keeps the lighthouse on the northern cape.\n\n"
        "## Trade\n"
        "She sells lamp oil to the fishing fleet of [[Greywater]]. Her prices rise every winter.\n\n"
        "## Background\n"
        "- Born in Greywater to a family of net menders.\n"
        "- Her grandfather built the lighthouse in the year of the great storm.\n"
    ),
    "Places/Greywater.md": (
        "Greywater is a fishing harbour on the grey coast.\n\n"
        "## Landmarks\n"
        "The bell tower of Greywater rings at every high tide. Tourists climb it at dawn.\n\n"
        "| Inn | Keeper |\n|---|---|\n| The Salted Eel | Old Brannoc |\n| The Drowned Lantern | Sella Fenwick |\n\n"
        "```\nthe bell tower rings at midnight in this code block\n```\n"
    ),
    "Sessions/Session 1.md": "We reached [[Greywater]] and bought rope from a fisherman named Tobin.\n",
}
ASKED = "Who keeps the lighthouse on the northern cape and sells lamp oil to the fishing fleet?"
QUOTING = ExtractAnswerer(threshold=0)  # quotes whatever shares a word with the question: for tests of quoting
CLI = [sys.executable, "-c", "from vault2okf.cli import app; app()"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return indexed_bundle(tmp_path_factory.mktemp("extract"), NOTES)


@pytest.fixture(scope="module")
def retriever(bundle: Path) -> Retriever:
    opened = Retriever.open(bundle)
    opened.prepare(DEFAULT_SPEC)
    return opened


def context(retriever: Retriever, question: str) -> list[ContextNote]:
    return context_notes(retriever.search(question, DEFAULT_SPEC))


def doc_text(bundle: Path, note: ContextNote) -> str:
    """The note's doc as the chunker reads it: links reduced to their labels."""
    return clean_body((bundle / note.path).read_text("utf-8"))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("One. Two! Three?", ["One.", "Two!", "Three?"]),
        ("Mr. Voss met Dr. Kell. Then they left.", ["Mr. Voss met Dr. Kell.", "Then they left."]),
        ("Tools, e.g. rope and nets. More.", ["Tools, e.g. rope and nets.", "More."]),
        ('She said "Go." Then left.', ['She said "Go."', "Then left."]),
        ("no end mark", ["no end mark"]),
        ("Version 2.5 is out. Yes.", ["Version 2.5 is out.", "Yes."]),
    ],
)
def test_sentences_are_slices_of_the_line(line: str, expected: list[str]) -> None:
    got = sentences(line)
    assert got == expected
    assert all(s in line for s in got)


@pytest.mark.parametrize("unit", ["Mr. X met Dr. Y. ", "[a](", "<", "e.g. "])
def test_splitting_and_scoring_stay_linear_on_hostile_lines(unit: str) -> None:
    def work(n: int) -> None:
        line = unit * n + "x"
        sentences(line)
        terms(line)
        note = ContextNote("n", "n", "concepts/n.md", line, "vector", 1.0)
        ExtractAnswerer(threshold=0).answer("Who met Dr. Y?", [note])

    assert_linear(work, f"splitting and scoring {unit!r} repeated", start=256)


def test_terms_fold_stem_and_drop_markup() -> None:
    assert terms("The **Pilots** piloted [Zoë's mechs](https://x.org/a) <b>badly</b>") == [
        "pilot", "pilot", "zoe", "mech", "badly"]  # fmt: skip
    assert stem("cities") == "city" and stem("running") == "run" and stem("glass") == "glass"


def test_passages_skip_code_headings_and_chunk_openers_and_keep_sections() -> None:
    text = (
        "Greywater > Landmarks\nThe bell tower rings. It is old.\n\n## Taverns\n| Inn | Keeper |\n|---|---|\n"
        "| The Salted Eel | Old Brannoc |\n\n```\nThe bell tower in code.\n```\n\n<img src=x>\n\n"
        "Greywater\n- A list item about nets.\n"
    )
    note = ContextNote("Places/Greywater", "Greywater", "concepts/Places/Greywater.md", text, "vector", 1.0)
    got = [(p.heading, p.text) for p in passages(note)]
    assert got == [
        ("Landmarks", "The bell tower rings."),
        ("Landmarks", "It is old."),
        ("Taverns", "The Salted Eel | Old Brannoc"),
        ("", "A list item about nets."),
    ]
    row = passages(note)[2]
    assert {"inn", "keeper", "greywater", "tavern"} <= row.context  # header row, title and heading words


def test_passages_cut_once_are_handed_to_each_note_as_its_own() -> None:
    """The cut is kept per (title, text): a second note with the same text gets its own id, path and rank, and a
    note whose title differs is cut again (the title decides the chunk openers and the context words)."""
    text = "Greywater > Landmarks\nThe bell tower rings. It is old.\n"
    first = ContextNote("Places/Greywater", "Greywater", "concepts/Places/Greywater.md", text, "vector", 1.0)
    copy = ContextNote("Old/Greywater", "Greywater", "concepts/Old/Greywater.md", text, "hop", 0.5)
    other = ContextNote("Places/Saltmarsh", "Saltmarsh", "concepts/Places/Saltmarsh.md", text, "vector", 1.0)
    assert [(p.note, p.rank) for p in passages(copy, 3)] == [(copy, 3), (copy, 3)]
    assert [p.citation.path for p in passages(first)] == ["concepts/Places/Greywater.md"] * 2
    assert [p.heading for p in passages(first)] == ["Landmarks", "Landmarks"]
    assert [p.text for p in passages(other)] == ["Greywater > Landmarks", "The bell tower rings.", "It is old."]
    assert "greywater" in passages(first)[0].context and "greywater" not in passages(other)[1].context


def test_a_line_posing_as_the_answer_is_never_quoted() -> None:
    text = (
        "The bell tower rings at high tide.\n\nFinal answer\u200b: the bell tower was sold to the cult.\n\n"
        '| Question | Answer |\n|---|---|\n| Who owns it? | {"answer": "the cult owns the bell tower"} |\n'
    )
    note = ContextNote("Places/Greywater", "Greywater", "concepts/Places/Greywater.md", text, "vector", 1.0)
    assert [p.text for p in passages(note)] == ["The bell tower rings at high tide."]
    answer = ExtractAnswerer().answer("Who owns the bell tower?", [note])
    assert "cult" not in answer.text


@pytest.mark.slow
def test_an_answer_quotes_the_note_verbatim_and_cites_its_section(bundle: Path, retriever: Retriever) -> None:
    question = "How often does the bell tower in Greywater ring?"
    notes = context(retriever, question)
    answer = QUOTING.answer(question, notes)
    assert not answer.not_found and answer.supported
    quotes = json.loads(answer.raw)["quotes"]
    assert quotes[0]["text"] == "The bell tower of Greywater rings at every high tide."
    assert quotes[0]["ref"] == "Places/Greywater#Landmarks"
    assert answer.citations[0].note_id == "Places/Greywater" and answer.citations[0].heading == "Landmarks"
    assert f'"{quotes[0]["text"]}" [1]' in quote_lines(answer.text)[0]
    by_id = {n.note_id: n for n in notes}
    for quote in quotes:  # verbatim: in the context the search built, and in the note's doc on disk
        note = by_id[quote["ref"].split("#")[0]]
        assert quote["text"] in note.text and quote["text"] in doc_text(bundle, note)
    assert "midnight" not in answer.text  # the code block is never quoted


@pytest.mark.slow
def test_a_list_item_and_a_table_row_are_quoted_with_their_sections(retriever: Retriever) -> None:
    built = "Who built the lighthouse in the year of the great storm?"  # its list item names no one: weak, and first
    lighthouse = QUOTING.answer(built, context(retriever, built))
    assert "Her grandfather built the lighthouse in the year of the great storm." in lighthouse.text
    assert "People/Maren Voss#Background" in [c.ref for c in lighthouse.citations]
    question = "Who keeps the Drowned Lantern inn?"
    inn = QUOTING.answer(question, context(retriever, question))
    assert "The Drowned Lantern | Sella Fenwick" in quote_lines(inn.text)[0]
    assert inn.citations[0].ref == "Places/Greywater#Landmarks"


@pytest.mark.slow
def test_a_question_the_notes_cannot_answer_is_refused_by_the_one_rule(retriever: Retriever) -> None:
    question = "What colour is the dragon's hoard of sapphires?"
    for answerer in (ExtractAnswerer(), QUOTING):  # no passage shares a word with it: refused at any threshold
        answer = answerer.answer(question, context(retriever, question))
        assert answer.not_found and not answer.citations and answer.text == "not found in the vault"
        assert answerer.answer("Who built the lighthouse?", []).not_found  # no context at all
    lighthouse = "How many people were living in the lighthouse on the northern cape in winter?"
    assert ExtractAnswerer(typed=True).answer(lighthouse, context(retriever, lighthouse)).not_found  # no number
    assert not ExtractAnswerer(typed=False, threshold=0).answer(lighthouse, context(retriever, lighthouse)).not_found


def test_a_context_of_a_few_short_notes_is_answered_on_the_threshold_s_scale() -> None:
    """With IDF over four passages every word looked common and this question was refused (raw BM25 2.2, under the
    threshold of 5)."""
    notes = [
        ContextNote("People/Tam", "Tam", "concepts/People/Tam.md", "Tam\nTam runs the ferry across the river.",
                    "vector", 0.5),
        ContextNote("People/Mira", "Mira", "concepts/People/Mira.md",
                    "Mira\nMira is a smuggler at the Saltreach docks. She owes Tam a boat.", "vector", 0.4),
        ContextNote("Sessions/Session 1", "Session 1", "concepts/Sessions/Session 1.md",
                    "Session 1\nWe met Mira at the docks and crossed with Tam.", "vector", 0.3),
    ]  # fmt: skip
    answer = ExtractAnswerer().answer("Who runs the ferry?", notes)
    assert (
        answer.text.startswith('Tam: "Tam runs the ferry across the river."')
        and answer.citations[0].note_id == "People/Tam"
    )
    assert ExtractAnswerer().answer("What colour is the dragon's hoard?", notes).not_found


def test_the_factory_and_the_spec_build_it_and_it_takes_no_model() -> None:
    from retriever.answer.contract import AnswerError

    assert isinstance(AnswerSpec.of(Backend.EXTRACT).answerer(), ExtractAnswerer)
    assert get_answerer("extract").notice is None
    with pytest.raises(AnswerError, match="uses no model"):
        get_answerer("extract", model="gemma.gguf")


@pytest.mark.slow
def test_ask_json_has_the_keys_of_a_model_answer(retriever: Retriever) -> None:
    from retriever.answer.contract import Answer, Citation

    result = Asker(retriever, DEFAULT_SPEC, answerer=ExtractAnswerer()).ask(ASKED)
    model_answer = Answer("Maren.", (Citation("Maren Voss", "concepts/People/Maren Voss.md", "People/Maren Voss"),),
                          "stop", 10, 2, 0.1, "gemma.gguf")  # fmt: skip
    from retriever.asker import AskResult

    llama_like = AskResult(result.question, model_answer, result.retrieval, result.timings).to_json()
    data = result.to_json()
    assert data.keys() == llama_like.keys() | {"support"}  # extract adds how well its quotes answer
    assert data["citations"][0].keys() == llama_like["citations"][0].keys() | {"support", "reason"}
    assert data["model"] == "extract" and data["supported"] is True


@pytest.mark.slow
def test_ask_llm_extract_through_the_cli(bundle: Path) -> None:
    run = subprocess.run([*CLI, "ask", str(bundle), ASKED, "--llm", "extract"],
                         capture_output=True, text=True, env=ENV, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert 'Maren Voss › Trade: "She sells lamp oil to the fishing fleet of Greywater." [1]' in run.stdout
    assert "  [1] Maren Voss › Trade — concepts/People/Maren Voss.md#Trade" in run.stdout
    assert "note:" not in run.stderr  # no model, no notice
    as_json = subprocess.run([*CLI, "ask", str(bundle), ASKED, "--llm", "extract", "--json"],
                             capture_output=True, text=True, env=ENV, timeout=600)  # fmt: skip
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["model"] == "extract" and data["not_found"] is False
    # one quote per note: the note's second matching passage (its opening text) is not quoted again
    assert [c["ref"] for c in data["citations"]] == ["People/Maren Voss#Trade"]
    timings = data["timings_ms"]  # first_token counts from the process's start: imports, index, retrieval
    assert timings["first_token"] > timings["embed_ms"] + timings["retrieve_ms"] + timings["answer_ms"]


@pytest.mark.slow
def test_on_a_terminal_ask_shows_the_sources_before_the_answer(bundle: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    run = pexpect.spawn(CLI[0], [*CLI[1:], "ask", str(bundle), ASKED, "--llm", "extract"], env=ENV,
                        encoding="utf-8", timeout=300)  # fmt: skip
    try:
        run.expect_exact("(concepts/People/Maren Voss.md)")  # a retrieved note, first
        run.expect_exact('Maren Voss › Trade: "She sells lamp oil')  # then the answer
        run.expect_exact("  [1] Maren Voss › Trade — concepts/People/Maren Voss.md#Trade")  # then its citations
        run.expect(pexpect.EOF)
        assert "(concepts/People/Maren Voss.md)" not in run.before  # listed once, not again at the end
    finally:
        run.close()


@pytest.mark.slow
def test_chat_answers_with_quotes_and_lists_what_it_cited(retriever: Retriever) -> None:
    import io

    from vault2okf.cli.chat import ChatSession

    out, err = io.StringIO(), io.StringIO()
    session = ChatSession(Asker(retriever, DEFAULT_SPEC, answerer=get_answerer("extract")), out=out, err=err)
    assert session.handle(ASKED) and session.handle("/sources")
    shown = out.getvalue()
    assert 'Maren Voss › Trade: "She sells lamp oil to the fishing fleet of Greywater." [1]' in shown
    assert "  [1] Maren Voss › Trade — concepts/People/Maren Voss.md#Trade" in shown  # quoted above: not twice
    # one quote per note: the note is cited once, as [1]
    assert re.search(r"cited \[1\]\s+vector\s+Maren Voss \(concepts/People/Maren Voss.md\)", shown)
    assert "[2]" not in shown
    assert "answer 0.0 s (0 prompt tokens)" in err.getvalue()


@pytest.mark.slow
def test_the_agent_loop_and_a_model_are_refused_before_anything_loads(bundle: Path) -> None:
    agent = subprocess.run([*CLI, "ask", str(bundle), "who?", "--llm", "extract", "--agent"],
                           capture_output=True, text=True, env=ENV, timeout=600)  # fmt: skip
    assert agent.returncode == 2 and "--llm extract has no model" in agent.stderr
    golden = ROOT / "golden" / "children-of-ash.jsonl"
    evaluated = subprocess.run([*CLI, "eval", str(bundle), "--golden", str(golden), "--answers", "--agent", "--llm",
                                "extract", "--out", str(bundle.parent / "r")],
                               capture_output=True, text=True, env=ENV, timeout=600)  # fmt: skip
    assert evaluated.returncode == 2 and "--llm extract has no model" in evaluated.stderr
    assert not (bundle.parent / "r").exists()
    model = subprocess.run([*CLI, "ask", str(bundle), "who?", "--llm", "extract", "--model", "x.gguf"],
                           capture_output=True, text=True, env=ENV, timeout=600)  # fmt: skip
    assert model.returncode == 1 and model.stderr.strip().splitlines() == [
        "Error: --llm extract uses no model — leave out --model, or pick --llm llama or bedrock"]  # fmt: skip


def quote_lines(text: str) -> list[str]:
    """The quotes of an extract answer, without the lines that say how well they answer."""
    return [line for line in text.splitlines() if line not in (STRONG_NONE, WEAKER)]


_CONTEXTS: dict[Path, list[tuple[dict, list[ContextNote]]]] = {}


def golden_contexts(golden: Path, root: Path) -> list[tuple[dict, list[ContextNote]]]:
    """Every question of a golden set with a context from its vault: the gold notes, then the ten notes sharing
    most words with the question, each as the search hands a note over (its chunk texts joined). Built once per
    set in a test run (the extract and Bedrock citation tests both read them; a context is plain data)."""
    if golden not in _CONTEXTS:
        _CONTEXTS[golden] = _golden_contexts(golden, root)
    return _CONTEXTS[golden]


def _golden_contexts(golden: Path, root: Path) -> list[tuple[dict, list[ContextNote]]]:
    from vault2okf.convert import convert

    convert(VAULTS / golden.stem, root / golden.stem)
    with read_bundle(root / golden.stem) as con:
        rows = con.execute("SELECT id, title, doc_path, body FROM concepts ORDER BY id").fetchall()
    notes = {}
    for cid, title, doc_path, body in rows:
        title = title or cid.rsplit("/", 1)[-1]
        text = "\n\n".join(c.text for c in chunk_note(cid, title, body or ""))
        notes[cid] = ContextNote(cid, title, doc_path, text, "vector", 1.0)
    words = {cid: set(terms(n.text)) for cid, n in notes.items()}
    out = []
    for line in golden.read_text("utf-8").splitlines():
        q = json.loads(line)
        asked = set(terms(q["question"]))
        gold = [p.removesuffix(".md") for p in q["gold"] if p.removesuffix(".md") in notes]
        near = sorted(notes, key=lambda cid: (-len(asked & words[cid]), cid))[:10]
        out.append((q, [notes[cid] for cid in dict.fromkeys([*gold, *near])]))
    return out


@pytest.mark.parametrize("golden", GOLDEN, ids=[g.stem for g in GOLDEN])
def test_every_citation_of_every_golden_question_points_into_its_context(golden: Path, tmp_path: Path) -> None:
    if not (VAULTS / golden.stem).is_dir():
        pytest.skip(f"the shared vault {golden.stem} is not here")
    answered = 0
    for (q, notes), answerer in itertools.product(golden_contexts(golden, tmp_path), (ExtractAnswerer(threshold=0),
                                                                                     ExtractAnswerer())):  # fmt: skip
        answer = answerer.answer(q["question"], notes)
        by_id = {n.note_id: n for n in notes}
        quotes = json.loads(answer.raw)["quotes"]
        assert answer.not_found == (not answer.citations) == (not quotes), q["id"]
        for citation in answer.citations:
            note = by_id[citation.note_id]  # a KeyError is a citation outside the context
            assert (citation.title, citation.path) == (note.title, note.path)
            assert citation.heading in {p.heading for p in passages(note)}, (q["id"], citation.ref)
        for quote in quotes:
            note_id, _, heading = quote["ref"].partition("#")
            assert quote["text"] in by_id[note_id].text, (q["id"], quote)  # verbatim from the note
            assert any((p.heading, p.text) == (heading, quote["text"]) for p in passages(by_id[note_id]))
            assert f'"{quote["text"]}"' in answer.text
        answered += not answer.not_found
    assert answered >= 30  # the checks ran on real quotes (every question, at threshold 0), not only on refusals


@dataclass(frozen=True)
class _Ranked:
    note_id: str
    text: str
    bm25: float
    score: float
    raw: float


def test_one_quote_per_note_takes_each_notes_best_passage() -> None:
    from retriever.answer.extract import Support, choose

    ranked = [_Ranked("a", "a1", 1.0, 1.0, 9.0), _Ranked("a", "a2", 0.9, 0.9, 8.0), _Ranked("b", "b1", 0.8, 0.8, 7.0),
              _Ranked("c", "c1", 0.7, 0.7, 6.0), _Ranked("d", "d1", 0.1, 0.1, 1.0)]  # fmt: skip
    assert [r.text for r in choose(ranked, 0.0, Support.RAW, per_note=False)] == ["a1", "a2", "b1"]
    assert [r.text for r in choose(ranked, 0.0, Support.RAW, per_note=True)] == ["a1", "b1", "c1"]
    assert [r.text for r in choose(ranked, 6.5, Support.RAW, per_note=True)] == ["a1", "b1"]  # c1 under it
    assert choose(ranked, 9.5, Support.RAW, per_note=True) == []  # the best under the threshold: refuse
