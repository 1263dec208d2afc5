"""The console command end to end on a real shared vault: convert, links, index, search, ask, eval."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vault2okf.cli import COMMANDS, app

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def run(*args: str) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vault = VAULTS / "blades-of-vengeance"
    if not vault.is_dir():
        pytest.skip(f"{vault} not present")
    out = tmp_path_factory.mktemp("cli") / "blades"
    assert "58 notes" in run("convert", vault, "-o", out)
    return out


def test_links_markdown_and_json(bundle: Path) -> None:
    assert run("links", bundle).startswith("# Link health: blades-of-vengeance")
    report = json.loads(run("links", bundle, "--json"))
    assert report["totals"]["notes"] == 58 and report["broken"][0]["target"] == "Takahashi Junpei"


def test_convert_refuses_an_output_inside_the_vault(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("hi\n", "utf-8")
    result = runner.invoke(app, ["convert", str(vault), "-o", str(vault / "out")])
    assert result.exit_code != 0 and "inside the vault" in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in vault.iterdir()) == ["a.md"]


def test_convert_refuses_to_replace_a_folder_that_is_not_a_bundle(tmp_path: Path) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("keep me", "utf-8")
    result = runner.invoke(app, ["convert", str(VAULTS / "children-of-ash"), "-o", str(tmp_path / "mine")])
    assert result.exit_code != 0 and "not a vault2okf bundle" in result.output
    assert (tmp_path / "mine" / "precious.txt").read_text("utf-8") == "keep me"


def test_search_before_index_says_what_to_run(tmp_path: Path) -> None:
    run("convert", VAULTS / "children-of-ash", "-o", tmp_path / "b")
    result = runner.invoke(app, ["search", str(tmp_path / "b"), "anything"])
    assert result.exit_code != 0 and "vault2okf index" in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_index_search_ask_eval(bundle: Path, tmp_path: Path) -> None:
    out = run("index", bundle, "--embedder", "minilm", "--no-progress")
    assert re.search(r"58 notes, \d+ chunks .*\(minilm\): \d+ embedded, 0 removed, 0 unchanged", out)
    again = run("index", bundle, "--embedder", "minilm", "--no-progress")
    assert re.search(r": 0 embedded, 0 removed, \d+ unchanged", again)

    hits = json.loads(
        run("search", bundle, "Who is the kame at the kabuki theatre?", "--mode", "union", "--k", "5", "--json")
    )
    assert hits["mode"] == "union" and hits["notes"] == len(hits["hits"]) > 0
    assert sum(h["tokens"] for h in hits["hits"]) <= 6000  # the default caps tokens, not notes
    assert {"note_id", "title", "vault_path", "doc_path", "score", "via", "tokens"} <= set(hits["hits"][0])
    assert {h["via"] for h in hits["hits"]} <= {"vector", "hop"}
    capped = runner.invoke(app, ["search", str(bundle), "Who is the kame at the kabuki theatre?", "--max-tokens", "1"])
    assert capped.exit_code == 0 and "0 notes, 0 tokens" in capped.stdout
    assert "note: no retrieved note fits the context budget (--max-tokens 1)" in capped.stderr  # no note cap

    options = ("--llm", "llama", "--k", "3", "--max-notes", "4", "--answer-tokens", "32", "--json")
    answer = json.loads(run("ask", bundle, "Who is Raiden?", *options))
    assert set(answer) >= {
        "question",
        "answer",
        "citations",
        "retrieved",
        "retrieval",
        "model",
        "finish_reason",
        "tokens",
        "timings_ms",
    }
    assert answer["finish_reason"] in {"stop", "length"} and 0 < answer["tokens"]["completion"] <= 32
    assert answer["retrieval"]["notes"] == len(answer["retrieved"]) <= 4
    assert all(c["path"] in {r["doc_path"] for r in answer["retrieved"]} for c in answer["citations"])
    assert {"vector_ms", "answer_ms", "retrieve_ms"} <= set(answer["timings_ms"])

    golden = tmp_path / "g.jsonl"
    question = {"id": "q1", "tier": "lookup", "question": "Who is Raiden?", "gold": ["Journal/Session 1.md"]}
    golden.write_text(json.dumps({**question, "answer": "a kame", "answer_entities": ["Raiden"]}) + "\n", "utf-8")
    run("eval", bundle, "--golden", golden, "--out", tmp_path / "reports", "--stem", "e")
    report = json.loads((tmp_path / "reports" / "e.json").read_text("utf-8"))
    assert {"vector@5", "vector@10", "vector@15", "graph@5+hop[v10]", "union@10+hop[v15]"} <= set(report["methods"])
    assert report["questions"][0]["id"] == "q1" and (tmp_path / "reports" / "e.png").stat().st_size > 0


def test_every_command_is_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    commands = list(COMMANDS)  # mounted lazily: the names, each command's module imported when it runs
    assert set(commands) == {"convert", "links", "index", "search", "ask", "chat", "eval", "mcp", "serve", "watch",
                             "doctor"}  # fmt: skip
    assert [c for c in commands if f"vault2okf {c} " not in readme] == []


def test_a_pinned_override_settles_an_ambiguous_name(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    for folder in ("People", "Villains"):
        (vault / folder).mkdir(parents=True)
        (vault / folder / "Bob.md").write_text(f"Bob of {folder}.\n", "utf-8")
    (vault / "Start.md").write_text("We met [[Bob]].\n", "utf-8")
    run("convert", vault, "-o", tmp_path / "a")
    assert json.loads((tmp_path / "a" / "link-health.json").read_text("utf-8"))["ambiguous"][0]["target"] == "Bob"
    (vault / "vault2okf.toml").write_text('[links.overrides]\nBob = "Villains/Bob.md"\n', "utf-8")
    run("convert", vault, "-o", tmp_path / "b")
    assert json.loads((tmp_path / "b" / "link-health.json").read_text("utf-8"))["ambiguous"] == []
    assert "[Bob](Villains/Bob.md)" in (tmp_path / "b" / "concepts" / "Start.md").read_text("utf-8")
    (vault / "vault2okf.toml").write_text('[links.overrides]\nBob = "Nobody.md"\n', "utf-8")
    result = runner.invoke(app, ["convert", str(vault), "-o", str(tmp_path / "c")])
    message = re.sub(r"[│\s]+", " ", result.output)  # the error box wraps lines
    assert result.exit_code != 0 and "'Bob' = 'Nobody.md' names no file in the vault" in message
    assert "Traceback" not in result.output and not (tmp_path / "c").exists()
    assert f"{vault / 'vault2okf.toml'} [links.overrides]" in message
    other = tmp_path / "elsewhere.toml"  # issue 26, point 8: the error names the file given with --config
    other.write_text('[links.overrides]\nBob = "Nobody.md"\n', "utf-8")
    (vault / "vault2okf.toml").unlink()
    result = runner.invoke(app, ["convert", str(vault), "-o", str(tmp_path / "d"), "--config", str(other)])
    message = re.sub(r"[│\s]+", " ", result.output)
    assert result.exit_code == 1 and f"{other} [links.overrides]: 'Bob' = 'Nobody.md'" in message
