"""A cold search's shortcuts give what the slow way gives: the note graph cached as JSON beside the index (read
while it comes from this very okf.duckdb, else rebuilt), and the saved strings of the tables and BM25 indexes."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import numpy as np
import pytest

import retriever.graph as graph_module
from retriever.errors import RetrieverError
from retriever.graph import GRAPH_CACHE, GRAPH_CACHE_FORMAT, NoteGraph, load_graph
from retriever.memory import _blob, _unblob
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
    cache.write_text(text.replace(f'"key": [{GRAPH_CACHE_FORMAT},', '"key": [0,', 1), "utf-8")
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
    blob, ends = _blob(values)
    assert _unblob(blob, ends) == values
    assert _unblob(np.asarray(blob), np.asarray(ends)) == values
