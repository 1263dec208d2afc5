"""Issue 38: `index` embeds documents through the ONNX export (onnxruntime) on a CPU, at fp32 (FlagEmbedding's
vectors; onnxruntime's fused transformer graph, written in a child process for a model of 150M parameters or
more, gives the same ones) or, asked for, int8, in batches of like token counts; a BGE-M3 checkpoint goes through
the same path; `index` says how long it has left.

A BGE-M3 checkpoint here is a tiny random one with BGE-M3's vocabulary and heads (bench/embedder_cost.py's
stand-in at 2 layers x 64): what it checks is the code path (FlagEmbedding's BGE-M3 class, CLS pooling, 1,024
tokens, the export), never a recall. The speed figures are the bench's (reports/bench-embedder-cost.txt)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from bundle_checks import indexed_bundle

from retriever.embed import FlagEmbedder, _is_m3, get_embedder
from retriever.encoder import (
    INT8_MODEL_FILE,
    MODEL_FILE,
    SETTINGS_FILE,
    OnnxEmbedder,
    OnnxEncoder,
    Precision,
    encoder_dir,
    read_settings,
    token_batches,
)
from retriever.export import export_encoder, index_embedder
from retriever.index import index_bundle, open_table
from retriever.store import Eta

ROOT = Path(__file__).resolve().parents[1]
NOTES = {
    "People/Maren Voss.md": "Maren Voss keeps the lighthouse on the northern cape. She trades in lamp oil. " * 3,
    "Places/Cape Lighthouse.md": "The lighthouse on the northern cape was built by [[Maren Voss]]'s grandfather.",
    "Places/Greywater.md": "Greywater is a fishing harbour. Its bell tower rings at every high tide.",
    "Sessions/Session 1.md": "We reached [[Greywater]] and bought rope from a fisherman.",
    "Sessions/Session 2.md": "Maren Voss sold us lamp oil; the bell of [[Greywater]] rang at high tide.",
}

pytestmark = pytest.mark.slow


def _bench() -> object:
    spec = importlib.util.spec_from_file_location("embedder_cost", ROOT / "bench" / "embedder_cost.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["embedder_cost"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return indexed_bundle(tmp_path_factory.mktemp("cost"), NOTES)


@pytest.fixture(scope="module")
def m3_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("m3") / "standin"
    folder.mkdir()
    _bench().build_standin(folder, tiny=True)  # type: ignore[attr-defined]
    return folder


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


def _stored(bundle: Path) -> tuple[list[str], np.ndarray]:
    _, table, _ = open_table(bundle)
    return list(table.texts), np.asarray(table.vectors)


def _ops(folder: Path) -> set[str]:
    import onnx

    return {node.op_type for node in onnx.load(str(folder / MODEL_FILE), load_external_data=False).graph.node}


def test_index_embeds_through_the_onnx_export_with_flagembeddings_vectors(bundle: Path, minilm: FlagEmbedder) -> None:
    embedder, notice = index_embedder(bundle, "minilm")
    assert notice is None and isinstance(embedder, OnnxEmbedder)
    settings = read_settings(encoder_dir(bundle))
    assert settings is not None and not settings.fused  # the graph as traced: fusion measured slower on MiniLM
    assert "Attention" not in _ops(encoder_dir(bundle))
    texts, vectors = _stored(bundle)
    assert len(texts) >= 5
    assert _cosines(vectors, minilm.embed_documents(texts)).min() >= 0.9999


def test_the_standin_has_bge_m3s_shape() -> None:
    shape = _bench().STANDIN_SHAPE  # type: ignore[attr-defined]
    assert (shape["num_hidden_layers"], shape["hidden_size"], shape["num_attention_heads"]) == (24, 1024, 16)
    assert (shape["intermediate_size"], shape["max_position_embeddings"], shape["vocab_size"]) == (4096, 8194, 250_002)


def test_a_bge_m3_checkpoint_indexes_through_its_export(m3_folder: Path, tmp_path: Path) -> None:
    flag = get_embedder(str(m3_folder))
    assert isinstance(flag, FlagEmbedder) and _is_m3(flag.model) and flag.max_length == 1024
    assert len(flag.model.tokenizer) == 250_002
    copy = Path(shutil.copytree(indexed_bundle(tmp_path, NOTES), tmp_path / "m3"))
    result = index_bundle(copy, embedder_name=str(m3_folder), progress=False)
    assert result.notices == () and result.added == result.chunks
    settings = json.loads((encoder_dir(copy) / SETTINGS_FILE).read_text("utf-8"))
    assert (settings["pooling"], settings["max_length"], settings["precision"], settings["fused"]) == (
        "cls", 1024, "fp32", False,
    )  # fmt: skip
    texts, vectors = _stored(copy)
    assert _cosines(vectors, flag.embed_documents(texts)).min() >= 0.9999  # the export's vectors are torch's


def test_the_fused_graph_gives_the_traced_graphs_vectors(minilm: FlagEmbedder, tmp_path: Path) -> None:
    texts = [*NOTES.values(), "a", "Who keeps the lighthouse on the cape?", " "]
    vectors = {}
    for fusion in (True, False):
        folder = export_encoder(tmp_path / f"fusion-{fusion}", minilm, "fingerprint", fusion=fusion)
        settings = read_settings(folder)
        assert settings is not None and settings.fused is fusion
        vectors[fusion] = OnnxEmbedder("minilm", "minilm", OnnxEncoder(folder, settings)).embed_documents(texts)
    assert _cosines(vectors[True], vectors[False]).min() >= 0.9999


def test_a_fusion_that_changes_the_vectors_is_not_kept(
    minilm: FlagEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("retriever.export.FUSED_COSINE", 1.01)  # no fused vector can pass: the traced graph stays
    folder = export_encoder(tmp_path / "bundle", minilm, "fingerprint", fusion=True)
    settings = read_settings(folder)
    assert settings is not None and not settings.fused
    assert "Softmax" in _ops(folder) and "Attention" not in _ops(folder)
    assert {p.name for p in folder.iterdir()} == {MODEL_FILE, "tokenizer.json", SETTINGS_FILE}


def test_a_large_model_is_fused_by_default_in_a_child_process(
    m3_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("retriever.export.SMALL_MODEL", 1)  # the tiny stand-in counts as large: fusion by default
    flag = get_embedder(str(m3_folder))
    folder = export_encoder(tmp_path / "bundle", flag, "fingerprint")
    settings = read_settings(folder)
    assert settings is not None and settings.fused
    assert "Attention" in _ops(folder) and "Softmax" not in _ops(folder)
    assert {p.name for p in folder.iterdir()} == {MODEL_FILE, "tokenizer.json", SETTINGS_FILE}
    assert "onnxruntime.transformers.optimizer" not in sys.modules  # the optimiser ran in the child, not here
    texts = [*NOTES.values(), "Who keeps the lighthouse on the cape?"]
    onnx_vectors = OnnxEmbedder("m3", str(m3_folder), OnnxEncoder(folder, settings)).embed_documents(texts)
    assert _cosines(onnx_vectors, flag.embed_documents(texts)).min() >= 0.9999


def test_a_killed_fusion_leaves_the_traced_export_in_use(
    minilm: FlagEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    killed = (
        "import os, pathlib, signal, sys; staged = pathlib.Path(sys.argv[1]) / 'fused'; "
        "(staged / 'model.onnx').write_bytes(b'half a graph'); os.kill(os.getpid(), signal.SIGKILL)"
    )
    monkeypatch.setattr("retriever.export._fuse_command", lambda arguments: [sys.executable, "-c", killed, *arguments])
    folder = export_encoder(tmp_path / "bundle", minilm, "fingerprint", fusion=True)
    settings = read_settings(folder)
    assert settings is not None and not settings.fused
    assert "Softmax" in _ops(folder) and "Attention" not in _ops(folder)
    assert {p.name for p in folder.iterdir()} == {MODEL_FILE, "tokenizer.json", SETTINGS_FILE}
    texts = [*NOTES.values(), "Who keeps the lighthouse on the cape?"]
    onnx_vectors = OnnxEmbedder("minilm", "minilm", OnnxEncoder(folder, settings)).embed_documents(texts)
    assert _cosines(onnx_vectors, minilm.embed_documents(texts)).min() >= 0.9999


def test_documents_are_batched_by_token_count_within_a_token_budget() -> None:
    lengths = [5, 300, 3, 100, 1000, 4]
    assert token_batches(lengths, 3, 400) == [[2, 5, 0], [3], [1], [4]]  # at most 3; 2 x 300 > 400; 1000 alone
    assert token_batches(lengths, 32, 10_000) == [[2, 5, 0, 3, 1, 4]]
    assert token_batches([], 4, 100) == []


def test_batched_documents_come_back_in_input_order(bundle: Path) -> None:
    embedder, _ = index_embedder(bundle, "minilm")
    assert isinstance(embedder, OnnxEmbedder)
    texts = ["a long text about the lighthouse keeper and her lamp oil, " * 4, "short", "Greywater's bell"]
    alone = np.stack([embedder.embed_query(t) for t in texts])
    embedder.batch_size = 2
    assert _cosines(embedder.embed_documents(texts), alone).min() >= 0.9999


def test_the_store_orders_chunks_by_the_embedders_token_counts(bundle: Path) -> None:
    from retriever.chunk import Chunk
    from retriever.store import _by_length

    embedder, _ = index_embedder(bundle, "minilm")
    texts = ["lighthouselighthouselighthouse", "a b c d e f g", "cape"]  # characters 30, 13, 4; tokens 5, 9, 3
    chunks = [Chunk(f"c{i}", "n", "t", (), text, "", 0) for i, text in enumerate(texts)]
    counts = embedder.token_counts(texts)  # type: ignore[attr-defined]
    assert counts[2] < counts[0] < counts[1]
    assert [c.text for c in _by_length(chunks, embedder)] == [texts[2], texts[0], texts[1]]
    flag = get_embedder("minilm")  # no token counts: by characters, as before
    assert [c.text for c in _by_length(chunks, flag)] == [texts[2], texts[1], texts[0]]


def test_int8_is_asked_for_and_a_change_of_precision_embeds_everything_again(bundle: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(bundle, tmp_path / "bundle"))
    texts, fp32 = _stored(copy)
    result = index_bundle(copy, embedder_name="minilm", progress=False, precision=Precision.INT8)
    assert result.added == result.chunks == len(texts)
    assert {p.name for p in encoder_dir(copy).iterdir()} == {INT8_MODEL_FILE, "tokenizer.json", SETTINGS_FILE}
    again, int8 = _stored(copy)
    order = [again.index(t) for t in texts]
    cos = _cosines(fp32, int8[order])
    assert cos.min() >= 0.95 and cos.max() < 0.999999  # quantised: close to fp32, not the same vectors
    assert index_bundle(copy, embedder_name="minilm", progress=False, precision=Precision.INT8).added == 0
    back = index_bundle(copy, embedder_name="minilm", progress=False)
    assert back.added == back.chunks and (encoder_dir(copy) / MODEL_FILE).is_file()


def test_index_says_how_long_it_has_left(bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = Path(shutil.copytree(bundle, tmp_path / "bundle"))
    _, table, _ = open_table(copy)
    (copy / ".vault2okf" / "chroma").rename(copy / ".vault2okf" / "chroma-aside")  # every chunk is new again
    index_bundle(copy, embedder_name="minilm", progress=True, batch_size=1)
    err = capsys.readouterr().err
    assert f"embedding {len(table.ids)} chunks at " in err and " to go" in err
    assert err.count(" to go") == 1


def test_the_eta_waits_for_its_first_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([10.0, 12.0])
    monkeypatch.setattr("retriever.store.time.perf_counter", lambda: next(clock))
    eta = Eta(100)
    eta.done(10)  # the first batch ends at t = 10: its one-off costs are not measured
    assert eta.line() is None
    eta.done(10)
    assert eta.line() is None
    eta.done(10)  # two more batches: 20 chunks by t = 12, 70 left
    assert eta.line() == "embedding 100 chunks at 10.0 chunks/s (measured over 20): about 7 s to go"
    assert eta.line() is None  # once


def test_doctor_estimates_the_index_time_of_a_bundle(bundle: Path) -> None:
    from vault2okf.doctor import OK, index_time_check

    _, table, _ = open_table(bundle)
    check = index_time_check(bundle)
    assert check.status == OK and check.fix is None
    assert f"a first index with minilm: {len(table.ids)} chunks at " in check.detail
    assert "measured with the bundle's minilm encoder" in check.detail


def test_the_estimate_for_bge_m3_scales_minilms_measured_rate(bundle: Path) -> None:
    from retriever.estimate import BGE_M3_PER_MINILM, estimate_index

    estimate = estimate_index(bundle, spec="bge-m3")
    assert estimate.embedder == "bge-m3" and estimate.sample == estimate.chunks  # a small bundle: every chunk
    assert "MiniLM measured through onnxruntime" in estimate.basis and f"{BGE_M3_PER_MINILM:g}x" in estimate.basis
    assert 0 < estimate.rate < float("inf")


def test_doctor_bundle_must_be_a_bundle(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from vault2okf.cli import app

    result = CliRunner().invoke(app, ["doctor", "--bundle", str(tmp_path)])
    assert result.exit_code == 1 and "is not a bundle (no okf.duckdb)" in result.output


def test_index_precision_must_be_fp32_or_int8(bundle: Path) -> None:
    from typer.testing import CliRunner

    from vault2okf.cli import app

    result = CliRunner().invoke(app, ["index", str(bundle), "--embedder", "minilm", "--precision", "int4"])
    assert result.exit_code == 2 and "'int4' is not fp32 or int8" in result.output
