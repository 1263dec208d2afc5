"""The question encoder (issue 24): `index` exports the embedder to ONNX, a search embeds its question with it and
never imports torch, the vectors and the search's notes are FlagEmbedding's, and a missing, stale or damaged
export falls back to FlagEmbedding with one note.

A sample of the golden questions runs here; bench/onnx_parity.py checks every one and the search order on the
shared vaults (reports/onnx-parity.txt)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bundle_checks import indexed_bundle

from retriever.embed import FlagEmbedder, embedder_fingerprint
from retriever.encoder import MODEL_FILE, SETTINGS_FILE, TOKENIZER_FILE, Pooling, QuestionEmbedder, encoder_dir
from retriever.graph import load_graph
from retriever.index import index_bundle, lexical_path, open_table
from retriever.retrieve import DEFAULT_SPEC, Retriever

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "golden"
NOTES = {
    "People/Maren Voss.md": "Maren Voss keeps the lighthouse on the northern cape. She trades in lamp oil.",
    "Places/Cape Lighthouse.md": "The lighthouse on the northern cape was built by [[Maren Voss]]'s grandfather.",
    "Places/Greywater.md": "Greywater is a fishing harbour. Its bell tower rings at every high tide.",
    "Sessions/Session 1.md": "We reached [[Greywater]] and bought rope from a fisherman.",
    "Sessions/Session 2.md": "Maren Voss sold us lamp oil; the bell of [[Greywater]] rang at high tide.",
}
QUESTIONS = ["Who keeps the lighthouse on the cape?", "What rings at high tide?", "Where did we buy rope?"]
NO_TORCH = ("torch", "transformers", "FlagEmbedding", "onnx")  # onnx (the exporter's package) is index work too


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return indexed_bundle(tmp_path_factory.mktemp("encoder"), NOTES)


@pytest.fixture
def copy(bundle: Path, tmp_path: Path) -> Path:
    """A copy of the indexed bundle to damage (its saved table names its Chroma folder relative to the bundle)."""
    return Path(shutil.copytree(bundle, tmp_path / "bundle"))


def _flag_retriever(bundle: Path, minilm: FlagEmbedder) -> Retriever:
    info, table, _ = open_table(bundle)
    return Retriever(bundle, None, minilm, load_graph(bundle), table, lexical_path(bundle, info.collection))


def _golden_sample(every: int = 4) -> list[str]:
    questions = []
    for path in sorted(GOLDEN.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]
        questions += [row["question"] for row in rows[::every]]
    return questions


def test_index_writes_the_encoder_beside_the_index(bundle: Path) -> None:
    folder = encoder_dir(bundle)
    assert {p.name for p in folder.iterdir()} == {MODEL_FILE, TOKENIZER_FILE, SETTINGS_FILE}
    settings = json.loads((folder / SETTINGS_FILE).read_text("utf-8"))
    assert settings["embedder"] == settings["embedder_spec"] == "minilm"
    assert (settings["pooling"], settings["normalize"], settings["max_length"], settings["dim"]) == (
        "mean",
        True,
        256,
        384,
    )
    assert settings["fingerprint"] == embedder_fingerprint("minilm")
    assert [p.name for p in folder.parent.iterdir() if p.name.startswith("encoder.")] == []  # no temp folder left


def test_onnx_question_vectors_are_flagembeddings(bundle: Path, minilm: FlagEmbedder) -> None:
    retriever = Retriever.open(bundle)
    assert isinstance(retriever.embedder, QuestionEmbedder) and retriever.notices == ()
    assert retriever.embedder.encoder.settings.pooling is Pooling.MEAN
    odd = ["", "   ", "lamp " * 400, "Ünïcödé — 東京? «Maren»", "Who?\n\nWhat?\t"]  # empty, truncated, non-ASCII
    questions = _golden_sample() + odd
    assert len(questions) > 50
    cosines = [float(retriever.embed(q) @ minilm.embed_query(q)) for q in questions]
    assert min(cosines) >= 0.9999, questions[int(np.argmin(cosines))]


def test_the_search_returns_flagembeddings_notes_in_order(bundle: Path, minilm: FlagEmbedder) -> None:
    onnx, flag = Retriever.open(bundle), _flag_retriever(bundle, minilm)
    for question in QUESTIONS:
        ours = [(h.note_id, h.via) for h in onnx.search(question, DEFAULT_SPEC).hits]
        assert ours == [(h.note_id, h.via) for h in flag.search(question, DEFAULT_SPEC).hits], question


def _search(bundle: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, *options, "-m", "vault2okf", "search", str(bundle), QUESTIONS[0], "--json"]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=bundle.parent, env=env)


def test_a_fresh_search_imports_neither_torch_transformers_nor_flagembedding(bundle: Path, minilm) -> None:  # noqa: ANN001
    done = _search(bundle, "-X", "importtime")
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "onnxruntime" in imported and "tokenizers" in imported  # the ONNX path ran
    assert sorted(m for m in imported if m.split(".")[0] in NO_TORCH) == []
    assert [line for line in done.stderr.splitlines() if not line.startswith("import time:")] == []
    hits = [h["note_id"] for h in json.loads(done.stdout)["hits"]]
    assert hits == [h.note_id for h in _flag_retriever(bundle, minilm).search(QUESTIONS[0], DEFAULT_SPEC).hits]


TOOL_PROBE = """
import json, sys
from pathlib import Path
from retriever.agent.tools import BundleTools
hits = BundleTools(Path(sys.argv[1])).search(sys.argv[2])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[3].split(","))
print(json.dumps({"loaded": loaded, "onnxruntime": "onnxruntime" in sys.modules, "hits": hits}))
"""


def test_the_agents_search_tool_embeds_without_torch(bundle: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-c", TOOL_PROBE, str(bundle), QUESTIONS[0], ",".join(NO_TORCH)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["loaded"] == [] and found["onnxruntime"] and found["hits"]


def test_index_exports_only_when_the_encoder_is_missing_or_stale(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from retriever import index as index_module

    model = encoder_dir(copy) / MODEL_FILE
    before = model.stat()
    loads: list[str] = []
    real = index_module.get_embedder
    monkeypatch.setattr(index_module, "get_embedder", lambda spec, **kw: loads.append(spec) or real(spec, **kw))
    index_bundle(copy, embedder_name="minilm", progress=False)
    assert loads == [] and (model.stat().st_ino, model.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    shutil.rmtree(encoder_dir(copy))
    result = index_bundle(copy, embedder_name="minilm", progress=False)
    assert loads == ["minilm"] and result.added == 0 and model.is_file()  # exported, nothing re-embedded
    settings = encoder_dir(copy) / SETTINGS_FILE
    settings.write_text(settings.read_text("utf-8").replace(embedder_fingerprint("minilm") or "?", "0" * 16), "utf-8")
    index_bundle(copy, embedder_name="minilm", progress=False)
    assert loads == ["minilm", "minilm"] and json.loads(settings.read_text("utf-8"))["fingerprint"] != "0" * 16
    (encoder_dir(copy) / MODEL_FILE).write_bytes(b"not a model")  # damaged: loaded, found wanting, exported again
    index_bundle(copy, embedder_name="minilm", progress=False)
    assert len(loads) == 3 and Retriever.open(copy).notices == ()


def _fingerprint(folder: Path) -> None:
    path = folder / SETTINGS_FILE
    path.write_text(json.dumps({**json.loads(path.read_text("utf-8")), "fingerprint": "0" * 16}), "utf-8")


def _set_dim(folder: Path) -> None:
    path = folder / SETTINGS_FILE
    path.write_text(json.dumps({**json.loads(path.read_text("utf-8")), "dim": 5}), "utf-8")


DAMAGE = {
    "missing": (lambda folder: shutil.rmtree(folder), "no question encoder"),
    "stale": (_fingerprint, "is stale"),
    "model": (lambda folder: (folder / MODEL_FILE).write_bytes(b"\x00garbage"), "is damaged"),
    "tokenizer": (lambda folder: (folder / TOKENIZER_FILE).write_text('{"version": ', "utf-8"), "is damaged"),
    "settings": (lambda folder: (folder / SETTINGS_FILE).write_text("{", "utf-8"), "is damaged"),
    "dim": (_set_dim, "is damaged (a probe question came out as shape (384,), not (5,))"),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_a_missing_stale_or_damaged_encoder_falls_back_to_flagembedding(copy: Path, minilm, kind: str) -> None:  # noqa: ANN001
    damage, says = DAMAGE[kind]
    damage(encoder_dir(copy))
    retriever = Retriever.open(copy)
    assert retriever.embedder is minilm and len(retriever.notices) == 1
    (notice,) = retriever.notices
    assert says in notice and f"run `vault2okf index {copy}`" in notice
    assert np.array_equal(retriever.embed(QUESTIONS[1]), minilm.embed_query(QUESTIONS[1]))


def test_the_command_says_so_in_one_note_and_still_answers(copy: Path, minilm) -> None:  # noqa: ANN001
    (encoder_dir(copy) / MODEL_FILE).write_bytes(b"\x00garbage")
    done = _search(copy)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("note: the question encoder in") and "is damaged" in lines[0]
    hits = [h["note_id"] for h in json.loads(done.stdout)["hits"]]
    assert hits == [h.note_id for h in _flag_retriever(copy, minilm).search(QUESTIONS[0], DEFAULT_SPEC).hits]


def test_the_same_export_is_loaded_once_a_process_and_a_new_one_again(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`watch --index` indexes after every edit: the export's session opens once, not three times an edit; a
    re-export (new files) or a damaged file is a new key, loaded and probed again."""
    from retriever import encoder as encoder_module

    made: list[Path] = []
    real = encoder_module.OnnxEncoder.__init__
    monkeypatch.setattr(
        encoder_module.OnnxEncoder,
        "__init__",
        lambda self, folder, *a, **kw: made.append(folder) or real(self, folder, *a, **kw),
    )
    index_bundle(copy, embedder_name="minilm", progress=False)
    first = len(made)
    assert first >= 1
    index_bundle(copy, embedder_name="minilm", progress=False)
    index_bundle(copy, embedder_name="minilm", progress=False)
    assert len(made) == first  # nothing changed: the loaded sessions served both runs
    (encoder_dir(copy) / MODEL_FILE).write_bytes(b"\x00garbage")  # damaged: loaded again, found wanting, exported
    index_bundle(copy, embedder_name="minilm", progress=False)
    assert len(made) > first and Retriever.open(copy).notices == ()


def test_watch_index_opens_the_index_at_start_and_writes_none_of_it(bundle: Path, copy: Path, tmp_path: Path) -> None:
    """`watch --index` opens, after its first index, what its first edit's index would open (issue 38: Chroma
    loading its vector index cost that edit some 7 s at 13k notes): the watcher holds the recorded collection,
    opened, and the saved table is kept in memory; nothing of the index is written by it (Chroma's fingerprint and
    the table file as they were), and the edit's index after it leaves the table matching Chroma."""
    from retriever.index import Warmed, _kept_table, read_index_info, table_path, warm_index
    from retriever.store import chroma_fingerprint, default_chroma_path
    from vault2okf.watch import Watcher

    vault = Path(shutil.copytree(bundle.parent / "vault", tmp_path / "vault"))
    info = read_index_info(copy)
    table = table_path(copy, info.collection)
    before = (chroma_fingerprint(default_chroma_path(copy), info.collection), table.stat().st_ino, table.stat().st_size)
    lines: list[str] = []
    options = {"embedder_name": "minilm", "device": "cpu"}
    w = Watcher(vault, copy, indexer=index_bundle, warmer=warm_index, index_options=options, echo=lines.append)
    w.start()
    assert "index opened" in lines[-1], lines[-1]
    assert isinstance(w.warmed, Warmed) and w.warmed.store.name == info.collection
    assert w.warmed.chunks == info.chunks == w.warmed.store.count()
    assert _kept_table(table) is not None
    after = (chroma_fingerprint(default_chroma_path(copy), info.collection), table.stat().st_ino, table.stat().st_size)
    assert after == before
    note = vault / "Places" / "Greywater.md"
    note.write_text(note.read_text("utf-8") + "A ferry leaves for the isles at dawn.\n", "utf-8")
    assert w.rebuild(1, [str(note)]), lines[-1]
    assert "1 embedded" in lines[-1] and "index failed" not in lines[-1], lines[-1]
    _, saved, store = open_table(copy)
    assert store is None  # the saved table matches Chroma
    assert any("ferry leaves for the isles" in text for text in saved.texts)
    w.kept.close()


def test_a_watch_without_index_opens_no_index(tmp_path: Path) -> None:
    from vault2okf.watch import Watcher

    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "A.md").write_text("# A\n", "utf-8")
    opened: list[Path] = []
    w = Watcher(tmp_path / "vault", tmp_path / "out", warmer=lambda out, **_: opened.append(out), echo=print)
    w.start()
    assert opened == [] and w.warmed is None
    w.kept.close()
