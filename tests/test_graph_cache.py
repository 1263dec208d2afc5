"""A cold search's shortcuts give what the slow way gives: the note graph cached as JSON beside the index (read
while it comes from this very okf.duckdb, else rebuilt), and the saved strings of the tables and BM25 indexes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pytest

import retriever.graph as graph_module
from retriever import cachefile
from retriever.cachefile import blob, unblob
from retriever.errors import RetrieverError
from retriever.graph import GRAPH_CACHE, NoteGraph, load_graph, read_graph
from retriever.okf import graph_rows
from vault2okf.convert import convert


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Mira.md").write_text("---\naliases: [The Ferrywoman]\n---\nMira knows [[Tam]].\n", "utf-8")
    (vault / "Tam.md").write_text("Tam runs the ferry with [[Mira|her]].\n", "utf-8")
    (vault / "Solo.md").write_text("No links, é and ünïcode.\n", "utf-8")
    convert(vault, tmp_path / "bundle")
    (tmp_path / "bundle" / ".vault2okf").mkdir(exist_ok=True)
    return tmp_path / "bundle"


def _database_graph(bundle: Path) -> NoteGraph:
    return graph_module._graph(*graph_rows(bundle))


def _same(a: NoteGraph, b: NoteGraph) -> bool:
    return a.concepts == b.concepts and a.neighbours == b.neighbours


def _no_database(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(bundle: Path) -> None:
        raise AssertionError("the graph was read from okf.duckdb")

    monkeypatch.setattr(graph_module, "graph_rows", refuse)


def test_the_cached_graph_is_the_databases(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_graph(bundle)
    assert (bundle / ".vault2okf" / GRAPH_CACHE).is_file()
    assert _same(first, _database_graph(bundle)) and first.neighbours
    _no_database(monkeypatch)
    again = load_graph(bundle)  # from the cache: the database is never read
    assert _same(again, first)
    assert again.concepts["Mira"].aliases == ("The Ferrywoman",)


def test_a_changed_database_is_read_again(bundle: Path) -> None:
    load_graph(bundle)
    with duckdb.connect(str(bundle / "okf.duckdb")) as con:  # in place, within the same timestamp tick or not
        con.execute("UPDATE concepts SET title = 'Tam the Ferryman' WHERE id = 'Tam'")
    assert load_graph(bundle).concepts["Tam"].title == "Tam the Ferryman"
    assert load_graph(bundle).concepts["Tam"].title == "Tam the Ferryman"  # and that is cached in turn


def test_a_schema_change_is_still_refused(bundle: Path) -> None:
    load_graph(bundle)
    with duckdb.connect(str(bundle / "okf.duckdb")) as con:
        con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    with pytest.raises(RetrieverError, match="older than"):
        load_graph(bundle)


@pytest.mark.parametrize("damage", [b"", b"{not json", b'{"key": 1}', b'{"key": null, "concepts": 3}', b"\xff\xfe"])
def test_a_damaged_cache_is_rebuilt(bundle: Path, damage: bytes) -> None:
    load_graph(bundle)
    cache = bundle / ".vault2okf" / GRAPH_CACHE
    cache.write_bytes(damage)
    assert _same(load_graph(bundle), _database_graph(bundle))
    assert cache.read_bytes() != damage


def test_a_wrong_key_is_not_read(bundle: Path) -> None:
    load_graph(bundle)
    cache = bundle / ".vault2okf" / GRAPH_CACHE
    text = cache.read_text("utf-8").replace('"Tam runs', '"Someone else runs')
    cache.write_text(text.replace(f'"key": [{graph_module.GRAPH_CACHE_FORMAT},', '"key": [0,', 1), "utf-8")
    assert _same(load_graph(bundle), _database_graph(bundle))


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_bundle_still_loads(bundle: Path) -> None:
    folder = bundle / ".vault2okf"
    folder.chmod(0o555)
    try:
        assert _same(load_graph(bundle), _database_graph(bundle))
        assert not (folder / GRAPH_CACHE).exists()
    finally:
        folder.chmod(0o755)


def test_an_unwritable_cache_is_no_error(bundle: Path) -> None:
    (bundle / ".vault2okf" / GRAPH_CACHE).mkdir()  # a folder where the file goes: the write fails
    assert _same(load_graph(bundle), _database_graph(bundle))
    assert not list((bundle / ".vault2okf").glob(f"{GRAPH_CACHE}.part-*"))


@pytest.mark.parametrize(
    "values",
    [[], [""], ["", ""], ["a", "b c", "é x", ""], ["x\x00y", "z"], ["\x00"], ["ünï", "c", "ödé"] * 1000],
)
def test_saved_strings_come_back(values: list[str]) -> None:
    data, ends = blob(values)
    assert unblob(data, ends) == values
    assert unblob(np.asarray(data), np.asarray(ends)) == values


# --- issue 39: the cache proves its body; any damage is one notice, the database's graph and a rewrite ----------


def _split(path: Path) -> tuple[bytes, bytes]:
    """(what comes before the JSON body, the body): the body is the file's last line."""
    data = path.read_bytes()
    head, _, body = data.rpartition(b"\n")
    return (head + b"\n" if head else b""), body


def _with_body(path: Path, body: bytes) -> None:
    """``body`` in place of the cache's body, its head made to vouch for it (length and sha256), as a writer
    that knows the format would: the check must then be the body's own shape."""
    import hashlib
    import json

    before, _ = _split(path)
    if before:
        magic, line, _ = before.split(b"\n", 2)
        head = json.loads(line)
        head.update(body_size=len(body), body_sha256=hashlib.sha256(body).hexdigest())
        before = magic + b"\n" + json.dumps(head, sort_keys=True).encode() + b"\n"
    path.write_bytes(before + body)


def _ids_changed(path: Path) -> None:
    """Two note ids changed by one letter each where they are keys of the neighbours: the body still parses."""
    before, body = _split(path)
    body = body.replace(b'"Tam": {', b'"Tan": {', 1).replace(b'"Mira": [', b'"Mora": [', 1)
    path.write_bytes(before + body)


def _no_neighbours(path: Path) -> None:
    before, body = _split(path)
    at = body.index(b'"neighbours": ')
    path.write_bytes(before + body[:at] + b'"neighbours": {}}')


def _special(kind: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dev-zero":
            path.symlink_to("/dev/zero")
        else:
            path.mkdir()

    return damage


GRAPH_DAMAGE: dict[str, Callable[[Path], None]] = {
    "two ids changed by one letter": _ids_changed,
    "neighbours emptied": _no_neighbours,
    "nested 100000 deep, vouched for": lambda p: _with_body(p, b"[" * 100_000 + b"]" * 100_000),
    "nested in a value, vouched for": lambda p: _with_body(
        p, b'{"concepts": [], "neighbours": {"a": {"b": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}}"
    ),
    "wrong value types, vouched for": lambda p: _with_body(
        p, b'{"concepts": [[1, 2, 3, 4, 5, 6, 7, 8]], "neighbours": {"Tam": ["Mira"]}}'
    ),
    "aliases not a list, vouched for": lambda p: _with_body(
        p, b'{"concepts": [["Tam", "Tam", "Tam.md", "concepts/Tam.md", "note", 5, null, null]], "neighbours": {}}'
    ),
    "a FIFO in its place": _special("fifo"),
    "a symlink to /dev/zero": _special("dev-zero"),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
}


@pytest.mark.parametrize("kind", list(GRAPH_DAMAGE))
def test_any_damage_is_one_notice_the_databases_graph_and_a_rewrite(
    bundle: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_graph(bundle)
    cache = bundle / ".vault2okf" / GRAPH_CACHE
    GRAPH_DAMAGE[kind](cache)
    graph, notices = read_graph(bundle)
    assert _same(graph, _database_graph(bundle)) and graph.neighbours
    assert len(notices) == 1 and "graph cache was damaged" in notices[0], notices
    assert cache.is_file() and not cache.is_symlink()  # written again, whole
    _no_database(monkeypatch)
    again, notices = read_graph(bundle)  # from the rewritten cache, with nothing to say
    assert _same(again, graph) and notices == ()


def test_a_folder_in_its_place_is_one_notice_each_time(bundle: Path) -> None:
    cache = bundle / ".vault2okf" / GRAPH_CACHE
    cache.mkdir()  # cannot be written over: said on each read, the graph is the database's
    for _ in range(2):
        graph, notices = read_graph(bundle)
        assert _same(graph, _database_graph(bundle))
        assert len(notices) == 1 and "not a regular file" in notices[0], notices


def test_a_missing_or_stale_cache_says_nothing(bundle: Path) -> None:
    assert read_graph(bundle)[1] == ()  # none yet
    with duckdb.connect(str(bundle / "okf.duckdb")) as con:
        con.execute("UPDATE concepts SET title = 'Tam the Ferryman' WHERE id = 'Tam'")
    graph, notices = read_graph(bundle)  # another database: rebuilt, nothing damaged
    assert notices == () and graph.concepts["Tam"].title == "Tam the Ferryman"


def test_an_oversized_cache_is_not_read(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_graph(bundle)
    cache = bundle / ".vault2okf" / GRAPH_CACHE
    monkeypatch.setattr(cachefile, "MIN_LIMIT", 16)  # a bound under the file's size: a sparse giant, say
    monkeypatch.setattr(graph_module, "size_limit", lambda b: 16)
    graph, notices = read_graph(bundle)
    assert _same(graph, _database_graph(bundle)) and len(notices) == 1 and "over the 16" in notices[0]
    assert cache.is_file()


@pytest.mark.parametrize("kind", ["truncated", "a FIFO in its place", "a symlink to /dev/zero", "vouched-for rows"])
def test_damaged_link_context_vectors_are_embedded_again(bundle: Path, kind: str, minilm) -> None:  # noqa: ANN001
    """`contexts-*.npz` (the link sentences' vectors, read by the context rankers) proves its body too."""
    from retriever.memory import ContextVectors

    graph = load_graph(bundle)
    folder = bundle / ".vault2okf"
    first = ContextVectors.build(graph, minilm, folder)
    (path,) = folder.glob("contexts-*.npz")
    if kind == "vouched-for rows":  # the right sha256 over a body with one vector too few
        import io

        body = io.BytesIO()
        np.savez(body, vectors=first.vectors[:-1])
        _with_body(path, body.getvalue())
    else:
        GRAPH_DAMAGE[kind](path)
    again = ContextVectors.build(graph, minilm, folder)
    assert again.row == first.row and np.allclose(again.vectors, first.vectors, atol=1e-6)
    assert path.is_file() and not path.is_symlink()
