"""The consumer's one bundle reader: read-only, and it refuses a schema it does not know, saying what to do."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from retriever.errors import RetrieverError
from retriever.graph import load_graph
from retriever.okf import SCHEMA_VERSION, concept_hashes, concept_texts, read_bundle
from vault2okf.convert import convert
from vault2okf.db import SCHEMA_VERSION as WRITTEN_VERSION


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Mira.md").write_text("Mira knows [[Tam]].\n", "utf-8")
    (vault / "Tam.md").write_text("Tam runs the ferry.\n", "utf-8")
    convert(vault, tmp_path / "bundle")
    return tmp_path / "bundle"


def _set_version(bundle: Path, version: str | None) -> None:
    with duckdb.connect(str(bundle / "okf.duckdb")) as con:
        con.execute("DELETE FROM meta WHERE key = 'schema_version'")
        if version is not None:
            con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [version])


def test_the_reader_knows_the_version_the_producer_writes(bundle: Path) -> None:
    assert SCHEMA_VERSION == WRITTEN_VERSION
    assert [c.id for c in concept_texts(bundle)] == ["Mira", "Tam"]
    assert set(load_graph(bundle).neighbours["Tam"]) == {"Mira"}  # a backlink is a neighbour too


def test_duckdb_hashes_each_note_as_index_does(bundle: Path) -> None:
    from retriever.index import note_hash

    with duckdb.connect(str(bundle / "okf.duckdb")) as con:  # an empty title, text past ASCII, a NUL, a folder
        con.execute("UPDATE concepts SET title = '', body = 'Ünïcode — ☃ \x00 and 🌊' WHERE id = 'Tam'")
        con.execute("INSERT INTO concepts SELECT * REPLACE ('Folder/Ash' AS id, '' AS title) FROM concepts LIMIT 1")
    hashes, names, _ = concept_hashes(bundle)
    texts = concept_texts(bundle)
    assert hashes == {c.id: note_hash(c.title, c.body) for c in texts} and len(hashes) == 3
    assert [c.title for c in texts] == ["Ash", "Mira", "Tam"]  # the file name where the title is empty
    assert names is not None and names["Tam"] == ("", ())  # as the graph holds it
    assert [c.id for c in concept_texts(bundle, ["Tam", "Nobody", "Folder/Ash"])] == ["Folder/Ash", "Tam"]


def test_the_connection_is_read_only(bundle: Path) -> None:
    with read_bundle(bundle) as con, pytest.raises(duckdb.Error, match="read-only"):
        con.execute("DELETE FROM concepts")


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (None, rf"schema unknown, older than the {SCHEMA_VERSION} this vault2okf reads: re-convert it with `vault2okf"),
        ("0", r"schema 0, older .* re-convert it"),
        ("1", rf"schema 1, older than the {SCHEMA_VERSION} .* re-convert it"),  # before the mentions table
        ("2", r"schema 2, older than the 3 .* re-convert it"),  # before the analytics table and sessions view
        (
            str(SCHEMA_VERSION + 1),
            rf"schema {SCHEMA_VERSION + 1}, newer than the {SCHEMA_VERSION} .*: upgrade vault2okf",
        ),
    ],
)
def test_an_unknown_schema_is_refused_with_what_to_do(bundle: Path, version: str | None, message: str) -> None:
    _set_version(bundle, version)
    with pytest.raises(RetrieverError, match=message):
        concept_texts(bundle)
    with pytest.raises(RetrieverError, match=message):
        load_graph(bundle)


def test_a_missing_bundle_and_a_missing_database_are_told_apart(tmp_path: Path) -> None:
    with pytest.raises(RetrieverError, match="does not exist"):
        concept_texts(tmp_path / "nope")
    with pytest.raises(RetrieverError, match="no okf.duckdb in .*: run `vault2okf convert VAULT -o"):
        concept_texts(tmp_path)


def test_a_damaged_database_is_an_error_not_a_crash(bundle: Path) -> None:
    (bundle / "okf.duckdb").write_bytes(b"this is not a duckdb file" * 100)
    with pytest.raises(RetrieverError, match="cannot be opened"):
        concept_texts(bundle)


def test_only_notes_whose_key_changed_are_hashed_again(bundle: Path) -> None:
    """A note keeps the hash ``known`` gives it while its key (its doc's sha256, its body's length) is the one known
    with it: the fake hashes below come back for those, and the notes whose key moved are hashed for real."""
    from retriever.index import note_hash

    hashes, _, keys = concept_hashes(bundle)
    assert set(keys) == set(hashes) == {"Mira", "Tam"} and len(set(keys.values())) == 2
    assert concept_hashes(bundle, {note: (keys[note], "fake") for note in keys})[0] == {"Mira": "fake", "Tam": "fake"}
    with duckdb.connect(str(bundle / "okf.duckdb")) as con:  # a new line at the end: the doc's bytes are the same
        con.execute("UPDATE concepts SET body = body || chr(10) WHERE id = 'Tam'")
    found, _, moved = concept_hashes(bundle, {note: (keys[note], "fake") for note in keys})
    tam = next(c for c in concept_texts(bundle) if c.id == "Tam")
    assert found == {"Mira": "fake", "Tam": note_hash(tam.title, tam.body)} and moved["Tam"] != keys["Tam"]
    with duckdb.connect(str(bundle / "okf.duckdb")) as con:  # another doc (a retitled note)
        con.execute("UPDATE concepts SET title = 'Mira of the Cape', content_hash = 'other' WHERE id = 'Mira'")
    found, _, _ = concept_hashes(bundle, {note: (keys[note], "fake") for note in keys})
    assert found["Mira"] == note_hash("Mira of the Cape", next(c.body for c in concept_texts(bundle) if c.id == "Mira"))
