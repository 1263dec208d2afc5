"""A lean cold start (issue 9): what a fresh ``search`` imports, the BM25 indexes `index` saves beside the table,
one pass of the network per question, and the ``--verbose`` / ``--download`` switches of the console command.

Speed itself is measured by bench/ask_bench.py; these tests check the mechanisms that make it, each of which
could silently stop working (a module imported again at start, a stale index loaded, a second forward pass)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bundle_checks import indexed_bundle

from retriever.cachefile import read_cache
from retriever.graph import Concept, NoteGraph
from retriever.memory import LEXICAL_MAGIC, Base, Bm25, ChunkTable, Lexical, save_npz, words

CLI = [sys.executable, "-c", "from vault2okf.cli import app; app(prog_name='vault2okf')"]
NOTES = {
    "People/Maren Voss.md": "Maren Voss keeps the lighthouse on the northern cape. She trades in lamp oil.",
    "Places/Cape Lighthouse.md": "The lighthouse on the northern cape was built by [[Maren Voss]]'s grandfather.",
    "Places/Greywater.md": "Greywater is a fishing harbour. Its bell tower rings at every high tide.",
    "Sessions/Session 1.md": "We reached [[Greywater]] and bought rope from a fisherman.",
}
QUESTION = "Who keeps the lighthouse on the cape?"
# Modules a search must not import: the Chroma client (the saved table suffices), chunking (markdown-it), BM25
# building (bm25s: the saved indexes suffice), the other commands (convert, the tools and MCP server, eval) and
# FlagEmbedding's package __init__ (with its fine-tuning code: peft), and the modules of the other commands; and,
# since the question goes through the ONNX encoder (issue 24), neither torch, transformers, FlagEmbedding's encoder
# nor onnx (the exporter's package).
NOT_FOR_A_SEARCH = (
    "torch",
    "transformers",
    "FlagEmbedding.inference.embedder.encoder_only.base",
    "onnx",
    "chromadb",
    "markdown_it",
    "bm25s",
    "vault2okf.convert",
    "vault2okf.cli.convert",
    "vault2okf.cli.ask",
    "vault2okf.cli.eval",
    "vault2okf.cli.mcp",
    "vault2okf.cli.watch",
    "retriever.agent.tools",
    "retriever.agent.mcp_server",
    "eval",
    "FlagEmbedding",
    "peft",
)
PROBE = """
import json, sys
from vault2okf.cli import app
try:
    app(sys.argv[2:], prog_name="vault2okf")
except SystemExit as exit:
    assert not exit.code, exit.code
from threadpoolctl import threadpool_info
blas = [pool["num_threads"] for pool in threadpool_info() if pool["internal_api"] == "openblas"]
print("MODULES " + json.dumps({"modules": {m: m in sys.modules for m in sys.argv[1].split(",")}, "blas": blas}))
"""


# --- BM25: our scorer over bm25s's index, saved and loaded -------------------------------------------------------


def _docs() -> list[list[str]]:
    texts = [
        "The lighthouse keeper trades lamp oil on the northern cape.",
        "Greywater harbour: fishing boats, a bell tower, the high tide.",
        "The keeper's grandfather built the lighthouse; the keeper keeps it.",
        "",  # a chunk of stop words only
        "Rope, nets and lamp oil from the harbour market.",
    ]
    return [words(t) for t in texts]


def test_bm25_scores_are_bm25s_scores() -> None:
    import bm25s

    docs = _docs()
    reference = bm25s.BM25()
    reference.index(docs, show_progress=False)
    ours = Bm25.build(docs)
    for query in (["lighthouse", "keeper"], ["lamp", "oil", "oil"], ["harbour"], ["nowhere"], ["keeper", "nowhere"]):
        known = [t for t in query if t in reference.vocab_dict]
        expected = reference.get_scores(known) if known else np.zeros(len(docs), dtype=np.float32)
        assert np.array_equal(ours.get_scores(query), expected), query
    assert ours.get_scores(["lighthouse"])[0] > 0 and ours.get_scores(["nowhere"]).sum() == 0


def _table(stamp: str | None = "chroma-id:7:3") -> ChunkTable:
    """A saved table (its own base, generation ``stamp``), or with no stamp one read from Chroma (no base)."""
    texts = ["Maren Voss keeps the lighthouse.", "The lighthouse stands on the cape.", "Greywater rings its bell."]
    notes = ["People/Maren Voss", "Places/Cape Lighthouse", "Places/Greywater"]
    return ChunkTable(
        ids=[f"{n}#0" for n in notes],
        note_ids=notes,
        texts=texts,
        tokens=np.array([6, 7, 5]),
        vectors=np.eye(3, dtype=np.float32),
        rows_of={n: [i] for i, n in enumerate(notes)},
        stamp=stamp,
        base=Base(stamp, notes) if stamp else None,
    )


def _graph(alias: str = "the keeper") -> NoteGraph:
    def concept(note: str, aliases: tuple[str, ...] = ()) -> Concept:
        return Concept(note, note.split("/")[-1], f"{note}.md", f"concepts/{note}.md", "note", aliases, None, None)

    notes = ["People/Maren Voss", "Places/Cape Lighthouse", "Places/Greywater"]
    return NoteGraph({n: concept(n, (alias,) if n == notes[0] else ()) for n in notes})


def test_saved_indexes_load_and_score_the_same(tmp_path: Path) -> None:
    path = tmp_path / "lexical-c.npz"
    built = Lexical(_table(), _graph())
    built.save(path)
    loaded = Lexical(_table(), _graph(), path)
    assert loaded.base is not None and not loaded.stale
    assert set(loaded.base.kinds) == {"chunks", "notes", "chunk_pairs", "note_pairs"}
    for question in ("who keeps the lighthouse", "the keeper", "bell of Greywater", "of the"):
        for phrases in (False, True):
            assert np.array_equal(
                loaded.chunk_scores(question, phrases=phrases), built.chunk_scores(question, phrases=phrases)
            )
            assert loaded.note_scores(question, phrases=phrases) == built.note_scores(question, phrases=phrases)


def test_a_saved_index_without_the_pair_indexes_gives_the_others_and_is_stale(tmp_path: Path) -> None:
    path = tmp_path / "lexical-c.npz"
    Lexical(_table(), _graph()).save(path)
    found = read_cache(path, LEXICAL_MAGIC, 1 << 30)
    assert found is not None
    with np.load(io.BytesIO(found[1])) as data:  # a file written before the pair indexes
        save_npz(path, LEXICAL_MAGIC, found[0], {k: data[k] for k in data.files if "_pairs_" not in k})
    old = Lexical(_table(), _graph(), path)
    assert old.base is not None and set(old.base.kinds) == {"chunks", "notes"} and old.stale
    assert old.note_scores("keeps the lighthouse", phrases=True) == Lexical(_table(), _graph()).note_scores(
        "keeps the lighthouse", phrases=True
    )


def test_a_saved_index_of_another_table_is_not_used_and_other_aliases_are_scored_apart(tmp_path: Path) -> None:
    path = tmp_path / "lexical-c.npz"
    Lexical(_table(), _graph()).save(path)
    other_table = Lexical(_table("chroma-id:8:3"), _graph(), path)  # another base: nothing is loaded
    assert other_table.base is None and other_table.stale
    renamed = Lexical(_table(), _graph(alias="the warden"), path)  # convert changed an alias: that note apart
    assert renamed.base is not None and not renamed.stale
    built = Lexical(_table(), _graph(alias="the warden"))
    assert renamed.note_scores("the warden")["People/Maren Voss"] > 0
    for question in ("the warden", "the keeper", "who keeps the lighthouse"):
        assert renamed.note_scores(question, phrases=True) == built.note_scores(question, phrases=True)
    assert Lexical(_table(), _graph(), path).note_scores("the warden")["People/Maren Voss"] == 0
    unstamped = Lexical(_table(stamp=None), _graph(), path)  # a table read from Chroma: no base to match
    assert unstamped.base is None and not unstamped.stale
    unstamped.save(tmp_path / "never.npz")
    assert not (tmp_path / "never.npz").exists()


def test_a_damaged_saved_index_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "lexical-c.npz"
    Lexical(_table(), _graph()).save(path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # a file cut short
    damaged = Lexical(_table(), _graph(), path)
    assert damaged.base is None and damaged.stale
    assert np.array_equal(damaged.chunk_scores("lighthouse"), Lexical(_table(), _graph()).chunk_scores("lighthouse"))


# --- A real bundle: index saves the indexes, a fresh search loads them and imports little -------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return indexed_bundle(tmp_path_factory.mktemp("coldstart"), NOTES)


def _run(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
def test_index_saves_the_bm25_indexes_of_its_table(bundle: Path) -> None:
    from retriever.index import lexical_path, open_table, read_index_info

    info, table, store = open_table(bundle)
    assert store is None and table.stamp  # the saved table, stamped with Chroma's fingerprint
    path = lexical_path(bundle, info.collection)
    found = read_cache(path, LEXICAL_MAGIC, 1 << 30)
    assert found is not None
    saved = found[0]
    assert table.base is not None and saved["table"] == table.base.generation
    assert len(table.ids) == read_index_info(bundle).chunks


@pytest.mark.slow
def test_a_fresh_search_imports_only_what_it_needs(bundle: Path, minilm) -> None:  # noqa: ANN001
    from retriever.graph import load_graph
    from retriever.index import open_table
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    pytest.importorskip("threadpoolctl")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(NOT_FOR_A_SEARCH), "search", str(bundle), QUESTION, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # quiet: no "Loading weights" bar, no warnings
    out, probe = done.stdout.rsplit("MODULES ", 1)
    found = json.loads(probe)
    assert [m for m, loaded in found["modules"].items() if loaded] == []
    assert set(found["blas"]) == {1}  # numpy's and scipy's OpenBLAS on one thread each
    hits = [h["vault_path"] for h in json.loads(out)["hits"]]
    _, table, _ = open_table(bundle)
    built = Retriever(bundle, None, minilm, load_graph(bundle), table)  # BM25 built here, nothing loaded
    assert hits == [h.vault_path for h in built.search(QUESTION, DEFAULT_SPEC).hits]
    assert hits[0] in {"People/Maren Voss.md", "Places/Cape Lighthouse.md"}


@pytest.mark.slow
def test_a_search_rewrites_a_damaged_bm25_file(bundle: Path) -> None:
    from retriever.index import lexical_path, read_index_info
    from retriever.retrieve import DEFAULT_SPEC, Retriever

    path = lexical_path(bundle, read_index_info(bundle).collection)
    good = path.read_bytes()
    before = [h.note_id for h in Retriever.open(bundle).search(QUESTION, DEFAULT_SPEC).hits]
    path.write_bytes(b"not a zip file")
    retriever = Retriever.open(bundle)
    assert retriever.lexical.stale
    retriever.prepare(DEFAULT_SPEC)  # builds both indexes and saves them again
    assert [h.note_id for h in retriever.search(QUESTION, DEFAULT_SPEC).hits] == before
    assert not Retriever.open(bundle).lexical.stale and path.read_bytes() != b"not a zip file"
    path.write_bytes(good)


@pytest.mark.slow
def test_verbose_lets_the_model_libraries_talk(bundle: Path, tmp_path: Path) -> None:
    from retriever.encoder import encoder_dir

    flagged = Path(shutil.copytree(bundle, tmp_path / "bundle"))
    shutil.rmtree(encoder_dir(flagged))  # no question encoder: the search loads FlagEmbedding (and says so)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VAULT2OKF_", "HF_HUB_DISABLE", "TRANSFORMERS_"))}
    loud = _run("--verbose", "search", flagged, QUESTION, env=env)
    assert loud.returncode == 0, loud.stderr
    assert "Loading weights" in loud.stderr  # transformers' bar, which is off without --verbose (test above)


@pytest.mark.slow
def test_download_lets_the_embedder_go_past_the_cache_check(bundle: Path, tmp_path: Path) -> None:
    """No BGE-M3 in an empty cache: without --download the cache check refuses at once, saying how to allow it;
    with it the loader runs (and, the hub being offline here, fails with its own error)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VAULT2OKF_")}
    env |= {"HF_HOME": str(tmp_path / "empty-hf-home"), "HF_HUB_OFFLINE": "1"}
    refused = _run("index", bundle, env=env)
    assert refused.returncode == 1 and "vault2okf --download" in refused.stderr and "2.3 GB" in refused.stderr
    tried = _run("--download", "index", bundle, env=env)
    assert tried.returncode == 1 and "Could not load BGE-M3" in tried.stderr, tried.stderr
    assert "2.3 GB" not in tried.stderr and "Traceback" not in tried.stderr


@pytest.mark.slow
def test_a_question_is_one_pass_of_the_network(minilm) -> None:  # noqa: ANN001
    passes: list[int] = []
    hook = minilm.model.model.register_forward_hook(lambda *_: passes.append(1))
    try:
        vector = minilm.embed_query(QUESTION)
        assert len(passes) == 1
        encoded = np.asarray(minilm.model.encode([QUESTION]), dtype=np.float32)[0]  # FlagEmbedding's own path
        assert len(passes) == 3  # encode: its out-of-memory probe, then the batch
    finally:
        hook.remove()
    assert np.allclose(vector, encoded / np.linalg.norm(encoded), atol=1e-6)
