import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from retriever.chunk import chunk_note
from retriever.errors import RetrieverError
from retriever.store import ChunkStore, SyncStats, collection_name, open_client

NOTES = {
    "People/Bob": ("Bob", "# Bob\nBob is a dwarven blacksmith who forges axes in the mountain town."),
    "Places/Caves": ("Caves", "# Caves\nThe goblin caves lie north of Phandalin, damp and full of bats."),
    "Sessions/Session 1": (
        "Session 1",
        "The party met in a tavern and agreed to escort a wagon of supplies.",
    ),
    "Sessions/Session 2": (
        "Session 2",
        "## Fight\nThe party fought wolves on the road.\n## Loot\nA silver ring.",
    ),
    "Lore/Dragon": ("Dragon", "An ancient red dragon sleeps beneath the volcano, hoarding gold coins."),
}


def make_chunks(notes=NOTES):
    return [chunk for nid, (title, body) in notes.items() for chunk in chunk_note(nid, title, body, min_tokens=5)]


@pytest.fixture
def store(tmp_path):
    return ChunkStore(open_client(tmp_path), collection_name("bundle", "minilm"))


@pytest.mark.parametrize(
    "bundle_id, embedder, expected",
    [
        ("abc123", "minilm", "v2o-abc123-minilm"),
        ("abc123", "dir-My Model!-1f2e", "v2o-abc123-dir-My-Model-1f2e"),
        ("abc", "..x..", "v2o-abc-.x"),
    ],
)
def test_collection_names(bundle_id, embedder, expected):
    assert collection_name(bundle_id, embedder) == expected


def test_long_collection_names_stay_valid_and_distinct():
    one, two = collection_name("b" * 12, "dir-" + "m" * 80), collection_name("b" * 12, "dir-" + "m" * 81)
    assert one != two and all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{1,61}[A-Za-z0-9]", n) for n in (one, two))


def test_persistent_client_lives_in_the_bundle(tmp_path):
    ChunkStore(open_client(tmp_path), "v2o-test")
    assert (tmp_path / ".vault2okf" / "chroma").is_dir()


@pytest.mark.parametrize("url", ["ftp://host:1", "http://"])
def test_bad_urls_are_refused(tmp_path, url):
    with pytest.raises(RetrieverError, match="Bad Chroma URL"):
        open_client(tmp_path, url=url)


@pytest.mark.slow
def test_sync_adds_then_is_a_no_op(store, minilm):
    chunks = make_chunks()
    assert store.sync(chunks, minilm, progress=False) == SyncStats(len(chunks), 0, 0)
    assert store.sync(chunks, minilm, progress=False) == SyncStats(0, 0, len(chunks))
    assert store.count() == len(chunks)


@pytest.mark.slow
def test_one_changed_chunk_is_replaced(store, minilm):
    chunks = make_chunks()
    store.sync(chunks, minilm, progress=False)
    notes = dict(NOTES, **{"People/Bob": ("Bob", "# Bob\nBob is a retired elven archer.")})
    stats = store.sync(make_chunks(notes), minilm, progress=False)
    assert (stats.added, stats.removed, stats.unchanged) == (1, 1, len(chunks) - 1)
    assert "elven archer" in store.get_note_chunks(["People/Bob"])["People/Bob"][0].text


@pytest.mark.slow
def test_a_deleted_note_leaves_nothing_stale(store, minilm):
    store.sync(make_chunks(), minilm, progress=False)
    notes = {k: v for k, v in NOTES.items() if k != "Sessions/Session 2"}
    stats = store.sync(make_chunks(notes), minilm, progress=False)
    assert stats.removed == 2 and stats.added == 0
    assert store.get_note_chunks(["Sessions/Session 2"]) == {}
    assert store.count() == len(make_chunks(notes))


@pytest.mark.slow
def test_an_interrupted_sync_resumes_without_duplicates(store, minilm):
    chunks = make_chunks()
    store.sync(chunks[:3], minilm, progress=False)  # as if the first run died after three chunks
    stats = store.sync(chunks, minilm, progress=False)
    assert (stats.added, stats.removed, stats.unchanged) == (len(chunks) - 3, 0, 3)
    assert store.count() == len(chunks)


@pytest.mark.slow
def test_query_finds_the_right_chunk_first(store, minilm):
    store.sync(make_chunks(), minilm, progress=False)
    hits = store.query(minilm.embed_query("Where do the goblins live?"), k=3)
    assert [h.note_id for h in hits][0] == "Places/Caves"
    assert hits[0].score > hits[1].score and 0 < hits[0].score <= 1.0001
    assert hits[0].text.startswith("Caves\n") and hits[0].tokens > 0


@pytest.mark.slow
def test_query_on_an_empty_collection_is_empty(store, minilm):
    assert store.query(minilm.embed_query("anything"), k=5) == []


@pytest.mark.slow
def test_note_chunks_come_with_embeddings_in_order(store, minilm):
    store.sync(make_chunks(), minilm, progress=False)
    found = store.get_note_chunks(["Sessions/Session 2", "Lore/Dragon", "Missing"])
    assert sorted(found) == ["Lore/Dragon", "Sessions/Session 2"]
    assert [c.chunk_id for c in found["Sessions/Session 2"]] == [
        "Sessions/Session 2#0",
        "Sessions/Session 2#1",
    ]
    chunk = found["Lore/Dragon"][0]
    assert np.allclose(chunk.embedding, minilm.embed_documents([chunk.text])[0], atol=1e-4)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_heartbeat(url, process, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chroma run exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"no Chroma heartbeat at {url} after {timeout}s")


@pytest.fixture
def chroma_server(tmp_path, request):
    """A real `chroma run` server on a free local port, stopped when the test ends."""
    port = _free_port()
    command = [str(Path(sys.executable).parent / "chroma"), "run", "--path", str(tmp_path / "server")]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop():
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    request.addfinalizer(stop)
    url = f"http://127.0.0.1:{port}"
    _wait_for_heartbeat(url, process)
    return url


@pytest.mark.slow
def test_sync_and_query_through_a_chroma_server(tmp_path, chroma_server, minilm):
    store = ChunkStore(open_client(tmp_path, url=chroma_server), collection_name("bundle", minilm.name))
    chunks = make_chunks()
    assert store.sync(chunks, minilm, progress=False).added == len(chunks)
    assert store.sync(chunks, minilm, progress=False).unchanged == len(chunks)
    hits = store.query(minilm.embed_query("a dragon hoarding gold"), k=2)
    assert hits[0].note_id == "Lore/Dragon"
    assert not (tmp_path / ".vault2okf").exists()  # nothing written to the bundle in server mode


def test_an_unreachable_server_is_a_clear_error(tmp_path):
    with pytest.raises(RetrieverError, match="Cannot reach the Chroma server"):
        open_client(tmp_path, url=f"http://127.0.0.1:{_free_port()}")


class DiesAfter:
    """The real embedder, stopped after `batches` batches: what a kill during an index run does to a sync."""

    def __init__(self, embedder, batches):
        self.inner, self.left = embedder, batches
        self.name, self.spec = embedder.name, embedder.spec

    def embed_documents(self, texts):
        if self.left == 0:
            raise KeyboardInterrupt("killed")
        self.left -= 1
        return self.inner.embed_documents(texts)


LONG = {  # notes of several chunks each, so that a run stopped between batches leaves notes half written
    f"Sessions/Session {n}": (f"Session {n}", "\n".join(f"## Part {p}\nThe party did thing {p} of {n}." for p in "ABC"))
    for n in range(1, 5)
}


def hashes_of(notes):
    return {nid: f"hash of {title}{body}" for nid, (title, body) in notes.items()}


@pytest.mark.slow
def test_a_note_half_written_by_an_interrupted_sync_is_not_taken_as_done(store, minilm):
    chunks, hashes = make_chunks(LONG), hashes_of(LONG)
    with pytest.raises(KeyboardInterrupt):
        store.sync(chunks, DiesAfter(minilm, 2), batch_size=5, progress=False, note_hashes=hashes)
    stored = store.stored_metadata()
    per_note = {nid: sum(c.note_id == nid for c in chunks) for nid in LONG}
    written = {nid: sum(m["note_id"] == nid for m in stored.values()) for nid in LONG}
    assert any(0 < written[nid] < per_note[nid] for nid in LONG)  # the stop landed inside a note
    keep = store.unchanged_notes(hashes, stored)
    assert keep == {nid for nid in LONG if written[nid] == per_note[nid]}
    rest = [c for c in chunks if c.note_id not in keep]
    stats = store.sync(rest, minilm, progress=False, keep_notes=keep, note_hashes=hashes, stored=stored)
    assert stats.added == len(chunks) - len(stored) and store.count() == len(chunks)
    assert store.unchanged_notes(hashes, store.stored_metadata()) == set(LONG)


@pytest.mark.slow
def test_an_index_from_before_chunk_counts_is_completed_without_reembedding(store, minilm):
    chunks, hashes = make_chunks(LONG), hashes_of(LONG)
    store.sync(chunks, minilm, progress=False, note_hashes=hashes)
    rows = list(store.rows(["documents", "metadatas", "embeddings"]))  # rewritten as an older index wrote them:
    store.collection.delete(ids=[r.chunk_id for r in rows])
    store.collection.add(
        ids=[r.chunk_id for r in rows],
        documents=[r.document for r in rows],
        embeddings=np.array([r.embedding for r in rows]),
        metadatas=[{k: v for k, v in r.metadata.items() if k != "note_chunks"} for r in rows],
    )
    assert store.unchanged_notes(hashes, store.stored_metadata()) == set()
    stats = store.sync(chunks, minilm, progress=False, note_hashes=hashes)
    assert (stats.added, stats.removed) == (0, 0)
    assert store.unchanged_notes(hashes, store.stored_metadata()) == set(LONG)


def test_rows_reads_every_row_a_page_at_a_time(store):
    ids = [f"Note {i // 3}#{i % 3}" for i in range(2500)]  # more than two pages of 1,000
    vectors = np.random.default_rng(13).random((len(ids), 4), dtype=np.float32)
    metas = [{"note_id": cid.split("#")[0]} for cid in ids]
    for start in range(0, len(ids), 1000):
        end = start + 1000
        store.collection.add(ids=ids[start:end], embeddings=vectors[start:end], metadatas=metas[start:end])
    rows = list(store.rows(["metadatas", "embeddings"]))
    assert sorted(r.chunk_id for r in rows) == sorted(ids) and rows[0].document is None
    by_id = {r.chunk_id: r for r in rows}
    assert np.allclose(by_id["Note 7#1"].embedding, vectors[22]) and by_id["Note 7#1"].metadata == metas[22]
    picked = store.rows(["metadatas"], where={"note_id": {"$in": ["Note 7", "Note 500"]}})
    assert sorted(r.chunk_id for r in picked) == [
        "Note 500#0",
        "Note 500#1",
        "Note 500#2",
        "Note 7#0",
        "Note 7#1",
        "Note 7#2",
    ]


def _fingerprint(tmp_path, store):
    from retriever.store import chroma_fingerprint, default_chroma_path

    return chroma_fingerprint(default_chroma_path(tmp_path), store.name)


@pytest.mark.slow
def test_fingerprint_changes_with_every_write_and_not_with_reads(tmp_path, store, minilm):
    from retriever.store import chroma_fingerprint, default_chroma_path

    assert chroma_fingerprint(default_chroma_path(tmp_path), "no-such-collection") is None
    assert chroma_fingerprint(tmp_path / "nowhere", store.name) is None
    chunks = make_chunks()
    store.sync(chunks, minilm, progress=False)
    after_add = _fingerprint(tmp_path, store)
    assert after_add is not None
    store.query(minilm.embed_query("dragon"), k=2)
    list(store.rows(["embeddings"]))
    assert _fingerprint(tmp_path, store) == after_add  # reading through chromadb changes nothing it reports
    edited = {**NOTES, "Lore/Dragon": ("Dragon", "A blue dragon.")}
    store.sync(make_chunks(edited), minilm, progress=False)
    after_edit = _fingerprint(tmp_path, store)
    assert after_edit not in (None, after_add)
    store.collection.update(ids=[chunks[0].chunk_id], metadatas=[{"note_id": "x", "tokens": 1}])
    assert _fingerprint(tmp_path, store) not in (None, after_edit)  # a metadata-only write counts too


@pytest.mark.slow
def test_exact_top_k_over_the_table_matches_chroma(store, minilm):
    from retriever.memory import ChunkTable

    store.sync(make_chunks(), minilm, progress=False)
    table = ChunkTable.from_store(store)
    for question in ("Where do the goblins live?", "a dragon hoarding gold", "silver ring loot", "axes"):
        qvec = minilm.embed_query(question)
        for k in (1, 3, 100):
            exact, hnsw = table.nearest(qvec, k), store.query(qvec, k)
            assert [h.chunk_id for h in exact] == [h.chunk_id for h in hnsw]
            assert np.allclose([h.score for h in exact], [h.score for h in hnsw], atol=1e-5)
            assert [(h.note_id, h.text, h.tokens) for h in exact] == [(h.note_id, h.text, h.tokens) for h in hnsw]
    assert table.nearest(qvec, 0) == []


@pytest.mark.slow
def test_a_saved_table_loads_back_the_same(tmp_path, store, minilm):
    from retriever.cachefile import CacheDamaged
    from retriever.memory import ChunkTable

    store.sync(make_chunks(), minilm, progress=False)
    table = ChunkTable.from_store(store)
    path = tmp_path / "t.npz"
    table.save(path, {"what": "ü ünicode"})
    loaded, meta = ChunkTable.load(path)
    assert meta["what"] == "ü ünicode"
    assert (loaded.ids, loaded.note_ids, loaded.texts, loaded.rows_of) == (
        table.ids, table.note_ids, table.texts, table.rows_of
    )  # fmt: skip
    assert np.array_equal(loaded.vectors, table.vectors) and np.array_equal(loaded.tokens, table.tokens)
    assert not list(tmp_path.glob("*.part-*"))
    path.write_bytes(path.read_bytes()[:100])  # a truncated file is damage, said as such (the index reads Chroma)
    with pytest.raises(CacheDamaged):
        ChunkTable.load(path)
    assert ChunkTable.load(tmp_path / "missing.npz") is None


@pytest.mark.slow
def test_the_embed_bar_is_drawn_only_on_a_terminal_or_when_asked(store, minilm, capfd, monkeypatch):
    monkeypatch.delenv("VAULT2OKF_PROGRESS", raising=False)
    store.sync(make_chunks(), minilm, progress=True)
    assert "chunk" not in capfd.readouterr().err  # pytest's stderr is no terminal
    monkeypatch.setenv("VAULT2OKF_PROGRESS", "1")
    store.sync(make_chunks({**NOTES, "Lore/Dragon": ("Dragon", "A blue dragon.")}), minilm, progress=True)
    assert re.search(r"embed: 100%.*1/1", capfd.readouterr().err)
