"""Suggestions for broken links and spelling variants (vault2okf/suggest.py): the cases the issue names."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from growth import assert_linear

from vault2okf.suggest import Suggester, distance, fold, spelling_variants

NOTES = [
    "Factions/The People's Engine.md",
    "Factions/Noble Rook Confederacy.md",
    "World/Cipangu/Lore/Terms/Kabuki.md",
    "World/Cipangu/Otama Domain/Kaiido Hana/Kabuki House of Kaido Hana.md",
    "World/Cipangu/Deity/Tatsu.md",
    "Orgs/Order of Silent Echos.md",
    "People/Father Kenichi.md",
    "People/Kraya Feldrum.md",
]


@pytest.fixture(scope="module")
def suggester() -> Suggester:
    return Suggester(NOTES, {"People/Kraya Feldrum.md": ["The Iron Eye"]})


def test_fold_and_distance() -> None:
    assert fold("The People’s Engine") == fold("the peoples engine") == "the peoples engine"
    assert fold("FatherKenichi") == "father kenichi" and fold("Café") == "cafe"
    assert distance("kaelor", "kaleor", 2) == 1  # a transposition is one edit
    assert distance("greaves", "grieves", 2) == 2 and distance("abcdef", "uvwxyz", 2) == 3


@pytest.mark.parametrize(
    ("target", "path", "confident"),
    [
        ("./People's Engine", "Factions/The People's Engine.md", True),
        ("FatherKenichi", "People/Father Kenichi.md", True),
        ("Order of Silent Echoes", "Orgs/Order of Silent Echos.md", True),
        ("iron eye", "People/Kraya Feldrum.md", True),  # an alias, apart from "the"
        ("Tetsu", "World/Cipangu/Deity/Tatsu.md", False),  # one letter off a short name: maybe another name
        ("Commander Kraya Feldrum", "People/Kraya Feldrum.md", False),
    ],
)
def test_suggestion(suggester: Suggester, target: str, path: str, confident: bool) -> None:
    found = suggester.suggest(target)
    assert found and found[0].path == path and found[0].why
    assert found[0].confident is confident


def test_kabuki_theatre_suggests_both_kabuki_notes(suggester: Suggester) -> None:
    found = {s.path for s in suggester.suggest("Kabuki Theatre")}
    assert {NOTES[2], NOTES[3]} <= found
    assert not any(s.confident for s in suggester.suggest("Kabuki Theatre"))


def test_nothing_close_suggests_nothing(suggester: Suggester) -> None:
    assert suggester.suggest("Takahashi Junpei") == []


def _note(path: str, body: str) -> SimpleNamespace:
    return SimpleNamespace(path=path, body=body)


def _broken(target: str) -> SimpleNamespace:
    return SimpleNamespace(resolution=SimpleNamespace(status="broken"), link=SimpleNamespace(target=target))


def test_spelling_variants_cluster_and_suggest_aliases() -> None:
    notes = [
        _note("NPCs/Ygra Brambleward.md", "A paladin."),
        _note("NPCs/Kaelor Thornhide.md", "A werebeast."),
        _note("NPCs/Harlan Greaves.md", "A captain."),
        _note("Sessions/One.md", "**Commander Yagra Brambleward** met Kaleor Thornhide and Harlon Greave. "
              "The people cheered; Peoples and Yagra left."),
    ]  # fmt: skip
    clusters = {c["word"]: c for c in spelling_variants(notes, {}, [_broken("Captain Grieves")] * 2)}
    assert clusters["ygra"]["variants"] == {"yagra": 2}
    assert {"note": "NPCs/Ygra Brambleward.md", "alias": "Yagra Brambleward"} in clusters["ygra"]["aliases"]
    assert "kaleor" in clusters["kaelor"]["variants"]
    assert set(clusters["greaves"]["variants"]) == {"grieves", "greave"}
    assert "people" not in str(clusters)  # a word also written in lower case is not a name


def test_the_name_words_memo_gives_the_same_clusters_and_keeps_only_this_runs_names() -> None:
    """``named`` (the convert cache keeps it): each name's words taken from it where it has them, made otherwise;
    refilled with the names of this run alone. A wrong entry would show: it is what the clusters are made from."""
    notes = [
        _note("NPCs/Ygra Brambleward.md", "A paladin."),
        _note("NPCs/Kaelor Thornhide.md", "A werebeast."),
        _note("Sessions/One.md", "Commander Yagra Brambleward met Kaleor Thornhide. Yagra left."),
    ]
    aliases = {"NPCs/Kaelor Thornhide.md": ["Kaelor the Red"]}
    plain = spelling_variants(notes, aliases, [])
    named: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {"Gone Name": (("gone", "name"), ("gone", "name"))}
    assert spelling_variants(notes, aliases, [], named=named) == plain
    assert set(named) == {"Ygra Brambleward", "Kaelor Thornhide", "Kaelor the Red", "One"}  # "Gone Name" dropped
    assert named["Kaelor the Red"] == (("kaelor", "the", "red"), ("kaelor",))
    again = dict(named)
    assert spelling_variants(notes, aliases, [], named=named) == plain and named == again
    named["Ygra Brambleward"] = (("zzzz",), ("zzzz",))  # taken as given: the memo is what is read
    assert spelling_variants(notes, aliases, [], named=named) != plain


def test_suggestions_grow_linearly_when_every_name_shares_words() -> None:
    """n notes and n broken links all sharing two words: each link still compares against a few names."""

    def work(n: int) -> None:
        notes = [f"People/Keeper Ward {i:06d}.md" for i in range(n)]
        suggester = Suggester(notes)
        for i in range(0, n, 4):
            suggester.suggest(f"Keeper Ward {i:06d}x")

    assert_linear(work, "suggest", start=256)


def test_spelling_variants_grow_linearly() -> None:
    def work(n: int) -> None:
        notes = [_note(f"NPCs/Name{i:05d} Stone.md", f"Nama{i:05d} Stone met Namo{i:05d} Stone.") for i in range(n)]
        spelling_variants(notes, {}, [])

    assert_linear(work, "spelling_variants", start=256)
