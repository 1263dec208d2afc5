"""Every error path of the console command: one line `Error: ...` and exit 1 for a library error, click's
usage error and exit 2 for a bad option, no traceback, and nothing heavy (models, Chroma) loaded first.

The cases run in one child process, so what it imported is what the failing commands imported, not what
other tests loaded into this one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"
HEAVY = ("FlagEmbedding", "torch", "llama_cpp", "chromadb")
CHILD = """
import json, sys
from typer.testing import CliRunner
from vault2okf.cli import app
out = {}
for name, args in json.loads(sys.argv[1]).items():
    r = CliRunner().invoke(app, args)
    error = None if r.exception is None or isinstance(r.exception, SystemExit) else repr(r.exception)
    out[name] = {"code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr, "exception": error,
                 "heavy": [m for m in sys.argv[2].split(",") if m in sys.modules]}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A converted (not indexed) bundle, an old-schema bundle, a vault, and bad inputs."""
    root = tmp_path_factory.mktemp("errors")
    vault = root / "vault"
    (vault / "People").mkdir(parents=True)
    (vault / "People" / "Mira.md").write_text("Mira is a smuggler. She knows [[Tam]].\n", "utf-8")
    (vault / "Tam.md").write_text("Tam runs the ferry.\n", "utf-8")
    bad_config = root / "bad-config"
    bad_config.mkdir()
    (bad_config / "a.md").write_text("A note.\n", "utf-8")
    (bad_config / "vault2okf.toml").write_text("links = 5\n", "utf-8")
    bundle = root / "bundle"
    _cli("convert", str(vault), "-o", str(bundle))
    old = root / "old"
    _cli("convert", str(vault), "-o", str(old))
    with duckdb.connect(str(old / "okf.duckdb")) as con:
        con.execute("DELETE FROM meta WHERE key = 'schema_version'")
    damaged = root / "damaged"
    _cli("convert", str(vault), "-o", str(damaged))
    (damaged / "link-health.json").write_text("{not json", "utf-8")
    golden_latin1 = root / "latin1.jsonl"
    golden_latin1.write_bytes('{"id": "q1", "question": "Qui est Mira ? café"}\n'.encode("latin-1"))
    golden = root / "g.jsonl"
    q = {"id": "q1", "tier": "lookup", "question": "Who smuggles?", "gold": ["People/Mira.md"], "answer": "Mira"}
    golden.write_text(json.dumps({**q, "answer_entities": ["Mira"]}) + "\n", "utf-8")
    mine = root / "mine"
    mine.mkdir()
    (mine / "precious.txt").write_text("keep me\n", "utf-8")
    a_file = root / "a-file.txt"
    a_file.write_text("not a folder\n", "utf-8")
    return {"root": root, "vault": vault, "bundle": bundle, "old": old, "damaged": damaged, "golden": golden,
            "latin1": golden_latin1, "file": a_file, "mine": mine, "bad_config": bad_config}  # fmt: skip


def _cli(*args: str) -> None:
    exe = Path(sys.executable).with_name("vault2okf")
    subprocess.run([str(exe), *args], check=True, capture_output=True)


LIBRARY_ERRORS = {  # case -> (args, words the one-line message must hold)
    "convert-missing-vault": (["convert", "{root}/nope", "-o", "{root}/x"], "vault not found"),
    "convert-inside-vault": (["convert", "{vault}", "-o", "{vault}/out"], "inside the vault"),
    "convert-not-a-bundle": (["convert", "{vault}", "-o", "{mine}"], "not a vault2okf bundle"),
    "convert-config-not-a-table": (["convert", "{bad_config}", "-o", "{root}/y"], "vault2okf.toml: config links = 5"),
    "convert-missing-config": (["convert", "{vault}", "-o", "{root}/y", "--config", "{root}/none.toml"], "not found"),
    "index-bad-chroma-url": (
        ["index", "{bundle}", "--embedder", "minilm", "--chroma-url", "ftp://x"],
        "Bad Chroma URL",
    ),
    "links-missing": (["links", "{root}/nope"], "does not exist"),
    "links-of-a-vault": (["links", "{vault}"], "looks like a vault, not a bundle"),
    "links-damaged-json": (["links", "{damaged}", "--json"], "is damaged"),
    "index-not-a-bundle": (["index", "{vault}", "--embedder", "minilm"], "no okf.duckdb"),
    "index-missing": (["index", "{root}/nope", "--embedder", "minilm"], "does not exist"),
    "search-missing": (["search", "{root}/nope", "who?"], "does not exist"),
    "search-not-indexed": (["search", "{bundle}", "who?"], "has no index: run `vault2okf index"),
    "search-old-schema": (["search", "{old}", "who?"], "re-convert it with `vault2okf convert"),
    "ask-missing-gguf": (["ask", "{bundle}", "who?", "--model", "{root}/none.gguf"], "GGUF model file not found"),
    "ask-bedrock-no-model": (["ask", "{bundle}", "who?", "--llm", "bedrock"], "needs a model ID"),
    "eval-missing-golden": (["eval", "{bundle}", "--golden", "{root}/none.jsonl", "--out", "{root}/r"], "not found"),
    "eval-latin1-golden": (["eval", "{bundle}", "--golden", "{latin1}", "--out", "{root}/r"], "is not UTF-8"),
    "eval-out-is-a-file": (["eval", "{bundle}", "--golden", "{golden}", "--out", "{file}"], "is a file"),
    "eval-bad-ranker": (["eval", "{bundle}", "--golden", "{golden}", "--rankers", "nope"], "unknown ranker 'nope'"),
    "eval-bad-answer-method": (
        ["eval", "{bundle}", "--golden", "{golden}", "--answers", "--answer-method", "nope"],
        "unknown --answer-method",
    ),
    "eval-not-indexed": (["eval", "{bundle}", "--golden", "{golden}", "--out", "{root}/r"], "has no index"),
}
USAGE_ERRORS = {  # case -> (args, words the usage message must hold)
    "search-bad-ranker": (["search", "{bundle}", "who?", "--ranker", "bogus"], "--ranker"),
    "search-empty-question": (["search", "{bundle}", "  "], "the question is empty"),
    "search-bad-mode": (["search", "{bundle}", "who?", "--mode", "sideways"], "--mode"),
    "ask-bad-llm": (["ask", "{bundle}", "who?", "--llm", "gpt"], "--llm"),
    "ask-bad-ranker": (["ask", "{bundle}", "who?", "--ranker", "bogus"], "--ranker"),
    "ask-zero-k": (["ask", "{bundle}", "who?", "--k", "0"], "--k"),
}


@pytest.fixture(scope="module")
def outcomes(places: dict[str, Path]) -> dict[str, dict]:
    cases = {name: [a.format(**places) for a in args] for name, (args, _) in {**LIBRARY_ERRORS, **USAGE_ERRORS}.items()}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(cases), ",".join(HEAVY)],
        capture_output=True,
        text=True,
        check=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(places["root"])},
    )
    return json.loads(child.stdout)


@pytest.mark.parametrize("case", sorted(LIBRARY_ERRORS))
def test_library_errors_are_one_line_and_exit_1(outcomes: dict[str, dict], case: str) -> None:
    got = outcomes[case]
    assert got["exception"] is None, got
    assert got["code"] == 1, got
    lines = got["stderr"].strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), got
    assert LIBRARY_ERRORS[case][1] in lines[0] and "Usage:" not in got["stderr"]


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS))
def test_usage_errors_exit_2_with_the_option_named(outcomes: dict[str, dict], case: str) -> None:
    got = outcomes[case]
    assert got["exception"] is None and got["code"] == 2, got
    assert USAGE_ERRORS[case][1] in got["stderr"] and "Traceback" not in got["stderr"]


def test_no_error_path_loads_a_model_or_chroma(outcomes: dict[str, dict]) -> None:
    assert {case: got["heavy"] for case, got in outcomes.items() if got["heavy"]} == {}
