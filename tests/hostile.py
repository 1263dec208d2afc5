"""A hostile vault, built in a temp folder: every input that once crashed, hung or took quadratic time.

    vault = build_hostile_vault(tmp_path)           # everything below, in tmp_path/hostile
    EXPECTED                                         # what link-health.json must list for it

Each builder writes one group of files into the vault and returns what the report must say about them, so a
test can also build one group alone. Nothing here reads or writes outside ``root``.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vault2okf.config import Config

REPEATS = 20_000  # long enough that quadratic code takes minutes, linear code well under a second
MTIME = 1_700_000_000


@dataclass(frozen=True)
class Expect:
    """An entry link-health.json must hold: ``section`` is "problems", "skipped" or "notes"."""

    section: str
    path: str  # vault path as the report writes it (NFC, bad bytes as U+FFFD)
    text: str = ""  # a piece of the problem's kind or message, or the skip reason (case-insensitive)


def _write(vault: Path, rel: str | bytes, data: str | bytes) -> Path:
    path = Path(os.fsdecode(os.path.join(os.fsencode(vault), os.fsencode(rel))))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    os.utime(path, (MTIME, MTIME))
    return path


def collisions(vault: Path) -> list[Expect]:
    """Names that map to one doc path or one concept id, and a name that is not valid UTF-8."""
    nfc, nfd = unicodedata.normalize("NFC", "Café"), unicodedata.normalize("NFD", "Café")
    _write(vault, f"Names/{nfc}.md", "# NFC spelling\n\nLinks to [[foo]].\n")
    _write(vault, f"Names/{nfd}.md", "# NFD spelling\n")
    _write(vault, "Names/foo.md", "lower-case extension\n")
    _write(vault, "Names/foo.MD", "upper-case extension\n")
    _write(vault, "Names/index.md", "a note named like an OKF reserved doc\n")
    _write(vault, "Names/index (note).md", "a note named like the renamed index.md\n")
    _write(vault, "Names/.md", "a note with no name\n")
    _write(vault, "Names/_untitled.md", "a note named like the renamed .md\n")
    _write(vault, b"Names/caf\xe9 latin-1 name.md", "a file name in Latin-1, not UTF-8\n")
    _write(vault, b"Bad \xff folder/Inside.md", "a note in a folder whose name is not UTF-8\n")
    return [
        Expect("skipped", f"Names/{nfc}.md", "Unicode normalisation"),
        Expect("problems", "Names/foo.MD", "collision"),
        Expect("problems", "Names/index.md", "collision"),
        Expect("problems", "Names/.md", "collision"),
        Expect("problems", "Names/caf\ufffd latin-1 name.md", "not valid UTF-8"),
        Expect("problems", "Bad \ufffd folder/Inside.md", "not valid UTF-8"),
        Expect("notes", "Bad \ufffd folder/Inside.md"),
        Expect("notes", f"Names/{nfc}.md"),
        Expect("notes", "Names/foo.MD"),
        Expect("notes", "Names/index (note).md"),
        Expect("notes", "Names/_untitled.md"),
    ]


BOMB = "\n".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    + [f"{c}: &{c} [{','.join([f'*{p}'] * 10)}]" for p, c in zip("abcdefgh", "bcdefghi", strict=True)]
)  # under 500 bytes that expand to 10^9 strings


def frontmatter_values(vault: Path) -> list[Expect]:
    """Values YAML cannot build, values out of range, a billion-laughs bomb, malformed and odd YAML."""
    _write(vault, "Values/Bad date.md", "---\ndate: 2024-02-30\ntitle: Bad date\n---\nbody\n")
    _write(vault, "Values/Huge session.md", "---\nsession: 3000000000\n---\nbody\n")
    _write(vault, "Values/Huge integer.md", f"---\ncount: {'9' * 5000}\n---\nbody\n")
    _write(vault, "Values/Bomb.md", f"---\n{BOMB}\n---\nThe bomb's body, still converted.\n")
    _write(vault, "Values/Recursive alias.md", "---\na: &a [*a]\n---\nbody\n")
    _write(vault, "Values/Deep nesting.md", "---\na: " + "[" * 20_000 + "]" * 20_000 + "\n---\nbody\n")
    _write(vault, "Values/Malformed.md", "---\ntags: [unclosed\n---\nbody\n")
    _write(vault, "Values/Unclosed.md", "---\ntitle: never closed\nbody\n")
    _write(vault, "Values/Latin-1 body.md", b"caf\xe9 in Latin-1\n")
    _write(vault, "Values/Not a mapping.md", "---\n- a\n- b\n---\nbody\n")
    return [
        Expect("problems", "Values/Bad date.md", "2024-02-30"),
        Expect("problems", "Values/Huge session.md", "3000000000"),
        Expect("problems", "Values/Huge integer.md", "kept as text"),
        Expect("problems", "Values/Bomb.md", "YAML bomb"),
        Expect("problems", "Values/Recursive alias.md", "YAML bomb"),
        Expect("problems", "Values/Deep nesting.md", "frontmatter"),
        Expect("problems", "Values/Malformed.md", "malformed frontmatter"),
        Expect("problems", "Values/Unclosed.md", "never closed"),
        Expect("problems", "Values/Latin-1 body.md", "not valid UTF-8"),
        Expect("problems", "Values/Not a mapping.md", "not a mapping"),
    ]


def special_files(vault: Path) -> list[Expect]:
    """Symlink loops, a symlink out of the vault, a named pipe named like a note, odd modification times."""
    walk = vault / "Walk"
    walk.mkdir(parents=True, exist_ok=True)
    os.symlink("loop-b.md", walk / "loop-a.md")
    os.symlink("loop-a.md", walk / "loop-b.md")
    os.symlink("self.md", walk / "self.md")
    os.symlink(".", walk / "folder loop")
    os.symlink("..", walk / "parent loop")
    outside = vault.parent / "outside-the-vault.md"
    outside.write_text("must never be read\n", "utf-8")
    os.symlink(outside, walk / "outside.md")
    os.mkfifo(walk / "pipe.md")
    _write(vault, "Walk/Future.md", "modified in the far future\n")
    os.utime(walk / "Future.md", (MTIME, 1e13))  # ext4 stores 2446-07-06, other file systems the year 318857
    _write(vault, "Walk/Ancient.md", "modified before 1970\n")
    os.utime(walk / "Ancient.md", (MTIME, -1e11))
    return [
        Expect("skipped", "Walk/loop-a.md", "symlink loop"),
        Expect("skipped", "Walk/loop-b.md", "symlink loop"),
        Expect("skipped", "Walk/self.md", "symlink loop"),
        Expect("skipped", "Walk/outside.md", "outside the vault"),
        Expect("skipped", "Walk/folder loop/", "symlink to a folder"),
        Expect("skipped", "Walk/parent loop/", "symlink to a folder"),
        Expect("skipped", "Walk/pipe.md", "named pipe"),
        Expect("problems", "Walk/Future.md", "mtime"),
        Expect("problems", "Walk/Ancient.md", "mtime"),
    ]


HOSTILE_LINES = {
    "brackets": "[[" * REPEATS,
    "embeds": "![[a|" * REPEATS,
    "closed brackets": "[[" * REPEATS + "x]]",
    "links on one line": "[[x]] " * REPEATS,
    "markdown link openers": "[" * REPEATS + "](",
    "markdown destinations": "[a](" * REPEATS,
    "backticks": "`" * REPEATS + " #tag",
    "comments": "%%" * REPEATS,
    "angle brackets": "<" * REPEATS,
    "hashes": "#" * REPEATS,
}


def quadratic(vault: Path) -> list[Expect]:
    """Lines that took O(n^2) (one line of ``[[``, runs of ``![[a|``, n indented lines holding ``[[x]]``)."""
    expects = []
    for name, line in HOSTILE_LINES.items():
        _write(vault, f"Quadratic/{name}.md", f"---\ntags: [{line[:5000]}\n---\n{line}\n")
        expects.append(Expect("notes", f"Quadratic/{name}.md"))
    _write(vault, "Quadratic/indented.md", "para\n\n" + "    [[x]]\n" * REPEATS)
    _write(vault, "Quadratic/indented after list.md", "- item\n\n" + "      [[x]]\n" * REPEATS)
    return [
        *expects,
        Expect("notes", "Quadratic/indented.md"),
        Expect("notes", "Quadratic/indented after list.md"),
    ]


def huge_note(vault: Path) -> list[Expect]:
    """A note over the default size limit: listed, reported, not parsed."""
    line = "A long line with a [[link]] in it.\n"
    _write(vault, "Huge/Huge.md", line * (Config.max_note_bytes // len(line) + 1))
    return [Expect("problems", "Huge/Huge.md", "over the limit"), Expect("notes", "Huge/Huge.md")]


def ordinary(vault: Path) -> list[Expect]:
    """A few healthy notes, so the hostile ones sit in a real vault."""
    _write(vault, "People/Bob.md", "---\ntype: Person\n---\nBob links to [[Alice]] and [[Café]].\n")
    _write(vault, "People/Alice.md", "Alice knows [[Bob]].\n")
    return [Expect("notes", "People/Bob.md"), Expect("notes", "People/Alice.md")]


BUILDERS: dict[str, Callable[[Path], list[Expect]]] = {
    "collisions": collisions,
    "frontmatter_values": frontmatter_values,
    "special_files": special_files,
    "quadratic": quadratic,
    "huge_note": huge_note,
    "ordinary": ordinary,
}


def build_hostile_vault(root: Path, only: tuple[str, ...] = ()) -> tuple[Path, list[Expect]]:
    """``root/hostile`` holding every group of BUILDERS (or the ``only`` ones), and what the report must list."""
    vault = root / "hostile"
    vault.mkdir(parents=True)
    expects = [e for name, build in BUILDERS.items() if not only or name in only for e in build(vault)]
    return vault, expects
