"""Incremental convert (issue 14): a re-convert redoes only what changed, and its bundle is the one a full
convert writes: every file byte for byte, every table row for row in the same order.

Each case edits a temp copy of a vault, converts it into the same bundle (incremental, from the cache the
last convert left) and into a fresh folder with ``full=True``, and compares the two.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from hostile import build_hostile_vault

from vault2okf import cache
from vault2okf.config import load_config
from vault2okf.convert import ConvertResult, Kept, convert

VAULTS = Path(__file__).resolve().parents[2] / "shared" / "vaults"


def bundle_files(root: Path) -> dict[str, bytes]:
    """Every file of a bundle but its database and its state (the index, the cache), as bytes."""
    found = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            if rel == "okf.duckdb" or (rel.startswith(".vault2okf/") and rel != ".vault2okf/bundle.json"):
                continue
            found[rel] = path.read_bytes()
    return found


def table_rows(bundle: Path) -> dict[str, list[tuple]]:
    """Every table's rows in the order a plain SELECT returns them (insertion order): order counts too."""
    con = duckdb.connect(str(bundle / "okf.duckdb"), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT * FROM {t}").fetchall()
            for t in ("meta", "concepts", "links", "mentions", "analytics")
        }
    finally:
        con.close()


def outputs(root: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of every bundle file: what a convert that wrote nothing leaves as it was."""
    return {p.relative_to(root).as_posix(): (p.stat().st_ino, p.stat().st_mtime_ns) for p in root.rglob("*")}


class Twin:
    """A vault copy converted two ways after every change: incrementally, and in full into a fresh folder."""

    def __init__(self, vault: Path, tmp: Path) -> None:
        self.vault, self.inc, self.tmp, self.runs = vault, tmp / "inc", tmp, 0
        first = convert(self.vault, self.inc)
        assert first.reused == 0 and not first.unchanged

    def check(self) -> ConvertResult:
        result = convert(self.vault, self.inc)
        self.runs += 1
        full_out = self.tmp / f"full{self.runs}"
        full = convert(self.vault, full_out, full=True)
        assert full.reused == 0
        assert bundle_files(self.inc) == bundle_files(full_out)
        assert table_rows(self.inc) == table_rows(full_out)
        assert result.report.to_json() == full.report.to_json()
        return result

    def notes(self) -> list[Path]:
        return sorted(self.vault.rglob("*.md"))


@pytest.fixture
def twin(tmp_path: Path) -> Twin:
    source = VAULTS / "children-of-ash"
    if not source.is_dir():
        pytest.skip(f"{source} not present")
    shutil.copytree(source, tmp_path / "vault")
    return Twin(tmp_path / "vault", tmp_path)


def test_nothing_changed_writes_nothing_and_says_so(twin: Twin) -> None:
    before = outputs(twin.inc)
    result = twin.check()
    assert result.unchanged
    assert outputs(twin.inc) == before  # not one file rewritten, not even the marker


PROBE = """
import json, sys
from vault2okf.cli import app
try:
    app(sys.argv[1:], prog_name="vault2okf")
except SystemExit as exit:
    assert not exit.code, exit.code
print("MODULES " + json.dumps([m for m in ("duckdb", "markdown_it") if m in sys.modules]))
"""


def test_a_convert_that_finds_nothing_changed_loads_no_database_or_parser(twin: Twin) -> None:
    """The modules a convert with something to do needs, and one with nothing to do must not pay for at start."""

    def convert_command() -> tuple[str, list[str]]:
        args = [sys.executable, "-c", PROBE, "convert", str(twin.vault), "-o", str(twin.inc)]
        done = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        out, modules = done.stdout.rsplit("MODULES ", 1)
        return out, json.loads(modules)

    out, loaded = convert_command()
    assert "nothing changed" in out and loaded == []
    note = twin.notes()[0]
    note.write_text(note.read_text("utf-8") + "\nAn edit.\n", "utf-8")
    out, loaded = convert_command()
    assert "nothing changed" not in out and loaded == ["duckdb", "markdown_it"]  # the probe sees both imports


def _edit(note: Path, n: int) -> None:
    note.write_text(note.read_text("utf-8") + f"\nEdit {n}.\n", "utf-8")


def _body(twin: Twin) -> cache.Body:
    vault = twin.vault.resolve()
    found = cache.load(twin.inc.resolve(), cache.cache_key(vault, vault.name, load_config(vault)))
    assert found is not None
    return found.loaded


def test_an_edit_links_the_base_of_states_and_saves_only_what_changed(twin: Twin) -> None:
    """Format 5: the notes' states are in a base file that the next convert hard-links into the new generation
    (the same inode: not written again) while the states not in it stay under 1/COMPACT of it; the cache's body
    holds those alone (the delta). Past that a new base holds every state. Each bundle is a full convert's."""
    base = cache.base_path(twin.inc)
    first = base.stat().st_ino
    notes = twin.notes()
    rel = [n.relative_to(twin.vault).as_posix() for n in notes]
    _edit(notes[0], 0)
    twin.check()
    assert base.stat().st_ino == first and list(_body(twin).delta()) == rel[:1]
    most = len(notes) // cache.COMPACT
    for i in range(most):
        _edit(notes[i], 1)
    twin.check()
    assert base.stat().st_ino == first and list(_body(twin).delta()) == rel[:most]
    _edit(notes[most], 2)
    twin.check()
    assert base.stat().st_ino != first and _body(twin).delta() == {}


def test_a_base_that_is_not_the_one_read_is_written_anew(twin: Twin) -> None:
    """The base is linked only while it is the file the last cache was read from or saved with (its signature):
    touched since (here under a watcher, which keeps what it saved), every state is written into a new one."""
    kept = Kept()
    _edit(twin.notes()[0], 0)
    convert(twin.vault, twin.inc, kept=kept)
    base = cache.base_path(twin.inc)
    first = base.stat().st_ino
    os.utime(base, ns=(0, 0))
    _edit(twin.notes()[1], 1)
    convert(twin.vault, twin.inc, kept=kept)
    assert kept.used and base.stat().st_ino != first and _body(twin).delta() == {}
    _edit(twin.notes()[2], 2)
    convert(twin.vault, twin.inc, kept=kept)
    assert kept.used and _body(twin).delta() != {}  # linked again: the base is the one it saved
    kept.settle()
    assert twin.check().unchanged


def test_every_kind_of_change_gives_the_full_convert(twin: Twin) -> None:
    notes = twin.notes()
    total = len(notes)
    a, b, c, d, e = notes[3], notes[7], notes[11], notes[15], notes[19]
    a.write_text(a.read_text("utf-8") + f"\nAn edit linking [[{b.stem}]] and [[Nowhere At All]].\n", "utf-8")
    edited = twin.check()
    assert not edited.unchanged and edited.reused >= total - 3  # the note, and those whose links it changed

    text = b.read_text("utf-8")
    b.write_text(text.replace("---\n", "---\naliases: [Zed Alias]\n", 1) if text.startswith("---\n") else
                 f"---\naliases: [Zed Alias]\n---\n{text}", "utf-8")  # fmt: skip
    twin.check()
    (twin.vault / "A New Note.md").write_text(f"# New\nSee [[Zed Alias]] and [[{c.stem}]].\n", "utf-8")
    twin.check()
    c.rename(c.with_name(f"Renamed {c.name}"))  # links to it break; its doc moves
    twin.check()
    d.unlink()
    twin.check()
    os.utime(e, None)  # same content, new mtime: the timestamp may change, nothing else
    twin.check()
    (twin.vault / "pic.png").write_bytes(b"\x89PNG not really")
    (twin.vault / "A New Note.md").write_text("![[pic.png]] and ![[gone.png]]\n", "utf-8")
    twin.check()
    (twin.vault / "pic.png").write_bytes(b"\x89PNG another picture, longer")
    twin.check()
    (twin.vault / "vault2okf.toml").write_text('[walk]\nexclude = ["Templates", "Renamed*"]\n', "utf-8")
    twin.check()


def test_a_damaged_bundle_is_made_whole_again(twin: Twin) -> None:
    doc = next((twin.inc / "concepts").rglob("*.md"))
    doc.write_text("edited by hand", "utf-8")
    repaired = twin.check()
    assert not repaired.unchanged and repaired.reused > 0
    (twin.inc / "link-health.md").unlink()
    twin.check()
    con = duckdb.connect(str(twin.inc / "okf.duckdb"))
    con.execute("DELETE FROM links")
    con.close()
    assert twin.check().reused == 0  # rows are never carried from a database that is not as written


def test_a_cache_that_cannot_be_read_is_no_cache(twin: Twin) -> None:
    cache.cache_path(twin.inc).write_bytes(b"not a pickle")
    result = twin.check()
    assert result.reused == 0 and not result.unchanged
    assert twin.check().unchanged  # and the convert wrote a good one


def test_a_file_rewritten_with_its_size_and_mtime_is_read_again(twin: Twin) -> None:
    """Same size, mtime put back: its ctime moved, and it was written within the last run's racy window."""
    note = twin.notes()[5]
    info = note.stat()
    text = note.read_text("utf-8")
    swapped = text.replace("e", "a", 1) if "e" in text else text + "x"
    note.write_text(swapped[: len(text)] if len(swapped.encode()) == len(text.encode()) else swapped, "utf-8")
    os.utime(note, ns=(info.st_atime_ns, info.st_mtime_ns))
    result = twin.check()
    assert not result.unchanged


def test_the_hostile_vault_converts_incrementally(tmp_path: Path) -> None:
    vault, _ = build_hostile_vault(tmp_path / "src")
    twin = Twin(vault, tmp_path)
    assert twin.check().unchanged
    ordinary = sorted(p for p in vault.rglob("*.md") if p.is_file() and not p.is_symlink() and p.stat().st_size < 5000)
    target = ordinary[0]
    target.write_bytes(target.read_bytes() + b"\n[[Another Missing Note]] \xff\n")  # a bad byte too
    assert not twin.check().unchanged


def test_the_walk_digest_is_the_same_for_the_same_vault_in_any_process_and_moves_with_a_file(tmp_path: Path) -> None:
    """``cache.walk_digest`` (every file's path, signature and mtime): two walks of the same vault give one digest,
    whatever strings of theirs are shared or interned, and a fresh process gives it too; a file touched moves it."""
    from vault2okf.walk import walk_vault

    vault = tmp_path / "vault"
    shutil.copytree(VAULTS / "children-of-ash", vault)
    first, second = walk_vault(vault), walk_vault(vault)
    for f in second.notes:
        sys.intern(f.path)
    digest = cache.walk_digest(first)
    assert cache.walk_digest(second) == digest
    code = "import sys; from pathlib import Path; from vault2okf import cache; from vault2okf.walk import walk_vault; "
    code += "print(cache.walk_digest(walk_vault(Path(sys.argv[1]))))"
    done = subprocess.run([sys.executable, "-c", code, str(vault)], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == digest
    note = first.notes[0].abs_path
    os.utime(note, ns=(note.stat().st_atime_ns, note.stat().st_mtime_ns + 1_000_000))
    assert cache.walk_digest(walk_vault(vault)) != digest
