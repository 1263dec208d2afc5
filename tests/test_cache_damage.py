"""The convert cache cannot lie (issue 26, point 2): any damage to it, a wrong shape or a special file in its place
is one note line and a full convert, never a crash, a hang or a bundle that differs from a full convert.

Each case damages the cache a convert of children-of-ash left, then converts again: incrementally into the same
bundle (the Twin of test_incremental compares it with a full convert into a fresh folder).
"""

from __future__ import annotations

import hashlib
import json
import marshal
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_incremental import VAULTS, Twin

from vault2okf import cache


@pytest.fixture
def twin(tmp_path: Path) -> Twin:
    shutil.copytree(VAULTS / "children-of-ash", tmp_path / "vault")
    return Twin(tmp_path / "vault", tmp_path)


def _edit_one_note(twin: Twin) -> None:
    note = twin.notes()[4]
    note.write_text(note.read_text("utf-8") + "\nOne more line.\n", "utf-8")


def _replace_inside_body(data: bytes, old: bytes, new: bytes) -> bytes:
    """``old`` -> ``new`` (same length) at its last place in the file: inside the body, still valid marshal."""
    assert len(old) == len(new)
    at = data.rindex(old)
    return data[:at] + new + data[at + len(old) :]


def _key(twin: Twin) -> str:
    head = cache.cache_path(twin.inc).read_bytes()
    size = int.from_bytes(head[len(cache.MAGIC) : len(cache.MAGIC) + 8], "little")
    start = len(cache.MAGIC) + 8 + 32
    return marshal.loads(head[start : start + size])[1]


def _cache_parts(twin: Twin) -> tuple[list[Any], list[Any]]:
    """The convert cache file's head fields and its body (the delta), decoded."""
    raw = cache.cache_path(twin.inc).read_bytes()
    size = int.from_bytes(raw[len(cache.MAGIC) : len(cache.MAGIC) + 8], "little")
    start = len(cache.MAGIC) + 40
    return list(marshal.loads(raw[start : start + size])), list(marshal.loads(raw[start + size :]))


def _write_body(twin: Twin, body: bytes) -> None:
    """The convert cache file with ``body`` under good digests: its head's size and sha256 of the body set anew."""
    fields, _ = _cache_parts(twin)
    fields[-2:] = [len(body), hashlib.sha256(body).digest()]
    head = marshal.dumps(tuple(fields))
    cache.cache_path(twin.inc).write_bytes(
        cache.MAGIC + len(head).to_bytes(8, "little") + hashlib.sha256(head).digest() + head + body
    )


def _base_states(twin: Twin) -> dict[str, Any]:
    """Every note's state as the cache's base file holds it."""
    return marshal.loads(cache.base_path(twin.inc).read_bytes()[len(cache.BASE_MAGIC) :])


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "truncated to half": lambda data: data[: len(data) // 2],
    "bytes flipped near the end": lambda data: data[:-40] + bytes(b ^ 0x5A for b in data[-40:-20]) + data[-20:],
    "bytes flipped in the head": lambda data: data[:60] + bytes(b ^ 0x5A for b in data[60:70]) + data[70:],
    "a byte appended": lambda data: data + b"\0",
    "emptied": lambda data: b"",
    "the magic line of another format": lambda data: b"vault2okf convert cache 2\n" + data[len(cache.MAGIC) :],
}


@pytest.mark.parametrize("kind", list(DAMAGE))
@pytest.mark.parametrize("edited", [False, True], ids=["nothing-changed", "one-note-edited"])
def test_damage_is_a_note_and_a_full_convert(twin: Twin, kind: str, edited: bool) -> None:
    path = cache.cache_path(twin.inc)
    path.write_bytes(DAMAGE[kind](path.read_bytes()))
    if edited:
        _edit_one_note(twin)
    result = twin.check()  # equals a full convert into a fresh folder, file for file and row for row
    assert result.reused == 0 and not result.unchanged
    assert len(result.notices) == 1 and "convert cache was damaged" in result.notices[0], result.notices
    assert twin.check().unchanged  # and the cache it wrote is whole again


@pytest.mark.parametrize("what", ["a description word", "a note's path"])
def test_a_change_inside_a_still_valid_body_is_caught(twin: Twin, what: str) -> None:
    """The body still decodes, with other words in it: without its digest the altered text would be copied
    into the new bundle (a folder index carries descriptions)."""
    key = _key(twin)
    found = cache.load(twin.inc, key)
    assert found is not None
    states = found.notes
    if what == "a description word":
        described = (w for s in states.values() for w in (s.doc.description or "").split())
        word = next(w for w in described if len(w) >= 6 and w.isalpha())
        old = word.encode()
        new = old[::-1] if old[::-1] != old else old.upper()
    else:  # the same length, one letter before ".md" changed: a path no note has
        old = next(p for p in states if len(p) > 4).encode()
        new = old[:-4] + (b"Q" if old[-4:-3] != b"Q" else b"R") + old[-3:]
    path = cache.cache_path(twin.inc)
    if old not in path.read_bytes()[-len(path.read_bytes()) // 2 :]:  # not in the body: in the base of the states
        path = cache.base_path(twin.inc)
    path.write_bytes(_replace_inside_body(path.read_bytes(), old, new))
    damaged = cache.load(twin.inc, key)
    assert damaged is not None and not damaged.intact()
    with pytest.raises(cache.CacheDamaged):
        damaged.loaded  # noqa: B018
    _edit_one_note(twin)
    result = twin.check()
    assert len(result.notices) == 1 and result.reused == 0


@pytest.mark.parametrize("kind", [*DAMAGE, "removed", "a named pipe"])
def test_a_damaged_base_is_a_note_and_a_full_convert(twin: Twin, kind: str) -> None:
    """The base file of the notes' states (format 5) is checked as the cache file is: any damage, its loss or a
    special file in its place is one note and a full convert."""
    path = cache.base_path(twin.inc)
    if kind == "removed":
        path.unlink()
    elif kind == "a named pipe":
        path.unlink()
        os.mkfifo(path)
    else:
        path.write_bytes(DAMAGE[kind](path.read_bytes()))
    _edit_one_note(twin)
    result = twin.check()
    assert result.reused == 0 and len(result.notices) == 1 and "convert cache was damaged" in result.notices[0]
    assert path.is_file() and twin.check().unchanged


def test_a_body_of_the_wrong_shape_with_good_digests_is_damage(twin: Twin) -> None:
    """Digests prove the bytes are the ones written, not that the writer was this code: a wrong shape is
    damage too, never a traceback."""
    key = _key(twin)
    body = marshal.dumps(({"a.md": b"not a state"}, [], [], [], {}, {}, "k"))
    _write_body(twin, body)
    found = cache.load(twin.inc, key)
    assert found is not None and found.intact()
    with pytest.raises(cache.CacheDamaged):
        found.loaded  # noqa: B018
    _edit_one_note(twin)
    result = twin.check()
    assert len(result.notices) == 1 and result.reused == 0


def test_saved_words_that_do_not_decode_are_damage_found_when_read(twin: Twin) -> None:
    """A note's words are decoded only when read (``suggest.StoredWords``, format 6), after the run began: saved
    words that do not decode, under good digests, are still one note line and a full convert, found when the
    edited note's words are compared with its last ones."""
    _, data = _cache_parts(twin)
    note = twin.notes()[4]
    path = note.relative_to(twin.vault).as_posix()
    state = list(_base_states(twin)[path])
    state[6] = b"not marshal"  # the words
    data[0] = {**data[0], path: tuple(state)}
    _write_body(twin, marshal.dumps(tuple(data)))
    note.write_text(note.read_text("utf-8") + "\nOne more line.\n", "utf-8")
    result = twin.check()  # the full convert's bundle, file for file
    assert result.reused == 0 and len(result.notices) == 1, result.notices
    assert "convert cache was damaged" in result.notices[0] and "saved words" in result.notices[0]
    assert twin.check().unchanged


def test_a_named_pipe_in_its_place_does_not_hang_the_convert(twin: Twin, tmp_path: Path) -> None:
    path = cache.cache_path(twin.inc)
    path.unlink()
    os.mkfifo(path)
    exe = Path(sys.executable).with_name("vault2okf")
    done = subprocess.run([str(exe), "convert", str(twin.vault), "-o", str(twin.inc)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "not a regular file" in notes[0], done.stderr
    assert path.is_file() and twin.check().unchanged


# --- issue 39: the search path's caches prove their bodies too ----------------------------------------------------
# The note graph (graph-cache.json), the chunk table (table-*.npz) and the BM25 indexes (lexical-*.npz) of an
# indexed bundle, each damaged in every way a probe found: one `note:` line, the same results as the undamaged
# bundle, and the cache written again (the next open says nothing).

SEARCH_NOTES = {
    "People/Mira.md": "Mira keeps the ferry across the Greywater. She knows [[Tam]] and [[Old Bell]].",
    "People/Tam.md": "Tam mends nets in the harbour and sings at the [[Old Bell]] each high tide.",
    "Places/Old Bell.md": "The Old Bell hangs in the tower above the harbour; its rope is tarred hemp.",
    "Places/Greywater.md": "Greywater is a cold river. The ferry crosses it twice a day.",
    "Items/Lantern.md": "A brass lantern Mira carries on night crossings, gift of [[Tam]].",
}
QUESTIONS = ("Who keeps the ferry across the Greywater?", "What is the bell rope made of?", "lantern gift")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bundle_checks import indexed_bundle

    return indexed_bundle(tmp_path_factory.mktemp("search-caches"), SEARCH_NOTES)


def _results(bundle: Path) -> tuple[list[list[tuple[str, str, float]]], tuple[str, ...]]:
    from retriever.retrieve import Retriever, SearchSpec

    spec = SearchSpec("graph", seeds="hybrid", phrases=True)
    retriever = Retriever.open(bundle)
    notices = retriever.notices
    retriever.prepare(spec)
    found = [[(h.note_id, h.via, round(h.score, 5)) for h in retriever.search(q, spec).hits] for q in QUESTIONS]
    return found, notices


def _search_cache(bundle: Path, which: str) -> Path:
    if which == "graph":
        return bundle / ".vault2okf" / "graph-cache.json"
    (path,) = (bundle / ".vault2okf").glob(f"{which}-*.npz")
    return path


def _same_length_swap(old: bytes, new: bytes) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        data = path.read_bytes()
        assert old in data, (old, path.name)
        path.write_bytes(data.replace(old, new))

    return damage


def _replace_with(kind: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "dev-zero":
            path.symlink_to("/dev/zero")
        elif kind == "folder":
            path.mkdir()

    return damage


SEARCH_DAMAGE: dict[str, Callable[[Path], None]] = {
    "two ids changed by one letter": _same_length_swap(b"People/Tam", b"People/Tum"),
    "a word changed by one letter": _same_length_swap(b"harbour", b"harbovr"),
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3]),
    "a FIFO in its place": _replace_with("fifo"),
    "a symlink to /dev/zero": _replace_with("dev-zero"),
}
CASES = [
    (which, kind)
    for which in ("graph", "table", "lexical")
    for kind in SEARCH_DAMAGE
    if not (which == "lexical" and kind == "two ids changed by one letter")  # BM25 holds words, not ids
] + [("graph", "neighbours emptied"), ("graph", "nested too deep"), ("graph", "wrong value types")]
NAMES = {"graph": "graph cache", "table": "chunk table", "lexical": "BM25 indexes"}


def _graph_body_damage(kind: str) -> Callable[[Path], None]:
    def damage(path: Path) -> None:
        from test_graph_cache import _no_neighbours, _with_body

        if kind == "neighbours emptied":
            _no_neighbours(path)
        elif kind == "nested too deep":
            _with_body(path, b'{"concepts": ' + b"[" * 100_000 + b"]" * 100_000 + b', "neighbours": {}}')
        else:
            _with_body(path, b'{"concepts": {"People/Tam": 3}, "neighbours": [1]}')

    return damage


@pytest.mark.slow
@pytest.mark.parametrize(("which", "kind"), CASES)
def test_a_damaged_search_cache_is_one_note_and_the_same_results(indexed: Path, which: str, kind: str) -> None:
    baseline, quiet = _results(indexed)
    assert quiet == ()  # the bundle as `index` left it has nothing to say
    path = _search_cache(indexed, which)
    intact = path.read_bytes()
    damage = SEARCH_DAMAGE.get(kind) or _graph_body_damage(kind)
    try:
        damage(path)
        found, notices = _results(indexed)
        assert found == baseline
        assert len(notices) == 1 and NAMES[which] in notices[0] and "damaged" in notices[0], notices
        assert path.is_file() and not path.is_symlink()  # written again
        again, notices = _results(indexed)
        assert again == baseline and notices == ()
    finally:
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        path.unlink(missing_ok=True)
        path.write_bytes(intact)


@pytest.mark.slow
def test_special_files_in_place_of_the_caches_do_not_hang_or_exhaust_search(indexed: Path, tmp_path: Path) -> None:
    """Through the CLI: a FIFO as the graph cache (a read would wait forever) and /dev/zero as the BM25 indexes
    (a read would never end): two `note:` lines, and the hits of the undamaged bundle."""
    exe = [sys.executable, "-c", "from vault2okf.cli import app; app(prog_name='vault2okf')"]
    args = [*exe, "search", str(indexed), QUESTIONS[0], "--json"]
    before = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert before.returncode == 0, before.stderr
    graph, lexical = _search_cache(indexed, "graph"), _search_cache(indexed, "lexical")
    saved = {p: p.read_bytes() for p in (graph, lexical)}
    try:
        _replace_with("fifo")(graph)
        _replace_with("dev-zero")(lexical)
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        notes = [line for line in done.stderr.splitlines() if line.startswith("note: ")]
        assert len(notes) == 2 and all("not a regular file" in n for n in notes), done.stderr
        assert json.loads(done.stdout)["hits"] == json.loads(before.stdout)["hits"]
        assert graph.is_file() and lexical.is_file() and not lexical.is_symlink()
    finally:
        for path, data in saved.items():
            path.unlink(missing_ok=True)
            path.write_bytes(data)


def test_the_body_is_decoded_in_one_call_from_the_mapped_file(twin: Twin, monkeypatch: pytest.MonkeyPatch) -> None:
    """The body is hashed and unmarshalled from the mapped file (one ``marshal.loads``), never streamed through
    ``marshal.load`` and a Python reader (a call per string: 0.3 s of a one-edit convert at 4.3k notes)."""

    def streamed(*_: object) -> None:
        raise AssertionError("the cache body was streamed through marshal.load")

    monkeypatch.setattr(marshal, "load", streamed)
    _edit_one_note(twin)
    result = twin.check()  # a streamed body would be damaged (the error): every note converted again
    assert result.reused == len(twin.notes()) - 1 and not result.notices


def test_saved_links_are_the_links_parsed_and_an_unknown_syntax_is_damage(twin: Twin) -> None:
    """Each saved link comes back with its fields read when first asked for (``cache._StoredLink``): equal to
    the note's links parsed anew, either way round, with the same hashes and fields (``context`` too, which
    ``Link`` defaults). A saved link of a syntax this code does not know, under good digests, is damage found
    on load: one note line and a full convert."""
    from vault2okf.parse import parse_note

    loaded = cache.load(twin.inc, _key(twin))
    assert loaded is not None
    checked = 0
    for path, state in loaded.notes.items():
        parsed = parse_note(path, (twin.vault / path).read_bytes()).links
        assert parsed == state.links and state.links == parsed
        assert [hash(k) for k in parsed] == [hash(k) for k in state.links]
        assert [(k.context, k.syntax, k.anchor) for k in parsed] == [
            (k.context, k.syntax, k.anchor) for k in state.links
        ]
        checked += len(parsed)
    assert checked > 100
    _, data = _cache_parts(twin)
    states = _base_states(twin)
    path = next(p for p, s in states.items() if s[4])
    state = list(states[path])
    state[4] = ((*state[4][0][:7], "telepathy", state[4][0][8]), *state[4][1:])  # the first link's syntax
    data[0] = {**data[0], path: tuple(state)}
    _write_body(twin, marshal.dumps(tuple(data)))
    with pytest.raises(cache.CacheDamaged, match="telepathy"):
        cache.load(twin.inc, _key(twin)).loaded  # noqa: B018
    _edit_one_note(twin)
    result = twin.check()
    assert result.reused == 0 and len(result.notices) == 1, result.notices
