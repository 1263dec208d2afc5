"""Random edit sequences (issue 38 part 4): after each edit, text, link, alias, rename, delete or add, the
incremental convert's bundle is byte for byte the full convert's, and it did only what the edit touched: unlinked
mentions read again only in the notes the edit changed (or that may hold a name that came or went), the graph
analytics computed again only when the link graph changed."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_incremental import Twin

from vault2okf import mentions, run
from vault2okf.convert import convert

FIRST = ["Mira", "Tovan", "Oskar", "Selka", "Brann", "Ilse", "Corvin", "Dasha", "Eldric", "Fenna", "Garrow", "Hale"]
LAST = ["Thelis", "Vireth", "Ashdown", "Morrow", "Kest", "Lunde", "Pyke", "Quill", "Rusk", "Stave"]
WORDS = [
    "the",
    "road",
    "went",
    "on",
    "past",
    "the",
    "river",
    "and",
    "the",
    "old",
    "mill",
    "where",
    "nobody",
    "had",
    "been",
    "for",
    "a",
    "while",
]


class Spy:
    """Counts the notes ``mentions._scan`` reads and the calls of ``run.analyse`` in one convert."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.scanned = 0
        self.analysed = 0
        scan, analyse = mentions._scan, run.analyse

        def counting_scan(text: str, names: mentions._Names) -> Iterator[mentions.Hit]:
            self.scanned += 1
            return scan(text, names)

        def counting_analyse(*args: object) -> object:
            self.analysed += 1
            return analyse(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(mentions, "_scan", counting_scan)
        monkeypatch.setattr(run, "analyse", counting_analyse)

    def reset(self) -> None:
        self.scanned = self.analysed = 0


def _names(rng: random.Random, n: int) -> list[str]:
    names: set[str] = set()
    while len(names) < n:
        names.add(f"{rng.choice(FIRST)} {rng.choice(LAST)}")
    return sorted(names)


def _sentence(rng: random.Random, names: list[str]) -> str:
    words = rng.sample(WORDS, 6)
    words.insert(rng.randrange(len(words)), rng.choice(names))
    return " ".join(words).capitalize() + "."


def _build(vault: Path, rng: random.Random) -> None:
    names = _names(rng, 14)
    for i, name in enumerate(names):
        folder = vault / ("People" if i % 2 else "Places")
        folder.mkdir(parents=True, exist_ok=True)
        front = f"---\naliases: [{name.split()[0]} the {rng.choice(LAST)}]\n---\n" if i % 3 == 0 else ""
        body = "\n".join(_sentence(rng, names) for _ in range(3))
        link = f"\nSee [[{rng.choice(names)}]].\n" if i % 2 == 0 else "\n"
        (folder / f"{name}.md").write_text(f"{front}# {name}\n\n{body}{link}", "utf-8")


KINDS = ["text", "link", "alias", "rename", "delete", "add", "text", "link", "text"]


def _edit(vault: Path, rng: random.Random, kind: str, step: int) -> None:
    """One edit of ``kind`` on a random note."""
    notes = sorted(vault.rglob("*.md"))
    names = [p.stem for p in notes]
    note = rng.choice(notes)
    if kind == "text":
        note.write_text(note.read_text("utf-8") + _sentence(rng, names) + "\n", "utf-8")
    elif kind == "link":
        note.write_text(note.read_text("utf-8") + f"\nAlso [[{rng.choice(names)}]].\n", "utf-8")
    elif kind == "alias":
        body = note.read_text("utf-8").split("---\n")[-1]
        note.write_text(f"---\naliases: [{rng.choice(FIRST)} of {rng.choice(LAST)}]\n---\n{body}", "utf-8")
    elif kind == "rename":
        note.rename(note.with_name(f"{rng.choice(FIRST)} {rng.choice(LAST)} {step}.md"))
    elif kind == "delete":
        note.unlink()
    else:
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)} {step}"
        (vault / "People" / f"{name}.md").write_text(f"# {name}\n\n{_sentence(rng, names)}\n", "utf-8")


def test_random_edits_give_the_full_convert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(38)
    vault = tmp_path / "vault"
    _build(vault, rng)
    twin = Twin(vault, tmp_path)
    spy = Spy(monkeypatch)
    kinds: list[str] = []
    for step, kind in enumerate(rng.sample(KINDS, len(KINDS))):
        _edit(vault, rng, kind, step)
        kinds.append(kind)
        spy.reset()
        result = convert(vault, twin.inc)
        assert not result.unchanged and result.reused > 0
        if kinds[-1] == "text":  # no name and no link changed: one note read, the analytics kept
            assert (spy.scanned, spy.analysed) == (1, 0), kinds
        assert spy.scanned < len(list(vault.rglob("*.md"))), kinds  # never every note
        twin.check()  # a full convert: the same bundle, byte for byte


def test_one_added_link_rewrites_few_docs(tmp_path: Path) -> None:
    """Issue 39 item 9: one link added to a random-link vault rewrote nearly every doc, as Louvain regrouped the
    communities written into each; a doc's ``graph`` key now holds only what the note's own neighbourhood (or
    its PageRank bucket) moves, and the community stays in okf.duckdb."""
    rng = random.Random(39)
    vault = tmp_path / "vault"
    vault.mkdir()
    n = 120
    for i in range(n):
        links = " ".join(f"[[N{rng.randrange(n):03}]]" for _ in range(3))
        (vault / f"N{i:03}.md").write_text(f"Note {i}: {links}\n", "utf-8")
    twin = Twin(vault, tmp_path)
    for _ in range(2):
        note = vault / f"N{rng.randrange(n):03}.md"
        note.write_text(note.read_text("utf-8") + f"And [[N{rng.randrange(n):03}]].\n", "utf-8")
        result = convert(vault, twin.inc)
        assert n - result.reused <= 10, f"{n - result.reused} of {n} docs rewritten"
        twin.check()
