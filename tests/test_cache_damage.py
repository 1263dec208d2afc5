"""The convert cache cannot lie (issue 26, point 2): any damage to it, a wrong shape or a special file in its place
is one note line and a full convert, never a crash, a hang or a bundle that differs from a full convert.

Each case damages the cache a convert of children-of-ash left, then converts again: incrementally into the same
bundle (the Twin of test_incremental compares it with a full convert into a fresh folder).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

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
    path.write_bytes(_replace_inside_body(path.read_bytes(), old, new))
    damaged = cache.load(twin.inc, key)
    assert damaged is not None and not damaged.intact()
    with pytest.raises(cache.CacheDamaged):
        damaged.loaded  # noqa: B018
    _edit_one_note(twin)
    result = twin.check()
    assert len(result.notices) == 1 and result.reused == 0


def test_a_body_of_the_wrong_shape_with_good_digests_is_damage(twin: Twin) -> None:
    """Digests prove the bytes are the ones written, not that the writer was this code: a wrong shape is
    damage too, never a traceback."""
    key = _key(twin)
    body = marshal.dumps(({"a.md": b"not a state"}, [], [], [], {}, {}, "k"))
    raw = cache.cache_path(twin.inc).read_bytes()
    size = int.from_bytes(raw[len(cache.MAGIC) : len(cache.MAGIC) + 8], "little")
    start = len(cache.MAGIC) + 40
    fields = list(marshal.loads(raw[start : start + size]))
    fields[-2:] = [len(body), hashlib.sha256(body).digest()]
    new_head = marshal.dumps(tuple(fields))
    cache.cache_path(twin.inc).write_bytes(
        cache.MAGIC + len(new_head).to_bytes(8, "little") + hashlib.sha256(new_head).digest() + new_head + body
    )
    found = cache.load(twin.inc, key)
    assert found is not None and found.intact()
    with pytest.raises(cache.CacheDamaged):
        found.loaded  # noqa: B018
    _edit_one_note(twin)
    result = twin.check()
    assert len(result.notices) == 1 and result.reused == 0


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
