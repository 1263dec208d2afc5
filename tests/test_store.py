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
