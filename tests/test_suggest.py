"""Suggestions for broken links and spelling variants (vault2okf/suggest.py): the cases the issue names."""

from __future__ import annotations

import marshal
import random
from types import SimpleNamespace

import pytest
from growth import assert_linear

from vault2okf.suggest import BodyWords, Suggester, Tally, TallyBox, body_words, distance, fold, spelling_variants

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


def test_clusters_updated_after_an_edit_are_the_ones_found_again() -> None:
    """Issue 38: a watcher's spelling_variants looks again only at the words an edit touched (a note's runs, a
    broken link's words), the last clusters kept with the moved tally (``suggest.Clusters``), and a fresh process
    at the ones its cache kept. Random edits of a few notes, of the broken links and of the aliases: every result
    (order included) is the one found from nothing; a word an edit adds can make a variant for another note's
    title or broken link, and a word it removes can unmake one."""
    rng = random.Random(3808)
    titles = ["Ygra Brambleward", "Kaelor Thornhide", "Harlan Greaves", "Mira Thelis", "Oskar Vireth", "Brightwater"]
    spellings = ["Yagra Brambleward", "Ygra Brambleward", "Kaleor Thornhide", "Kaelor Thornhide", "Harlon Greave",
                 "Grieves", "Mirra Thelis", "Oskar Vyreth", "Selka Ashdowne", "Commander Yagra", "Peoples", "people",
                 "yagra", "the Kaleor", "Kaelor", "Greave", "Vyreth", "ashdowne"]  # fmt: skip
    targets = ["Captain Grieves", "Kaleor", "Yagra Brambleward", "Mirra Thelis", "Ashdowne", "Vyreth Hall"]
    paths = [f"NPCs/{t}.md" for t in titles] + [f"Sessions/S{i:02}.md" for i in range(10)]
    notes = [_note(p, "") for p in paths]

    def body() -> BodyWords:
        return body_words(" and ".join(rng.choice(spellings) for _ in range(rng.randrange(1, 5))) + ".")

    def links() -> list[SimpleNamespace]:
        found = [_broken(t) for t in rng.sample(targets, rng.randrange(0, 4)) for _ in range(rng.randrange(1, 3))]
        return found + [_broken(t) for t in ("Brightwatre", "Brigthwater") for _ in range(rng.randrange(0, 4))]

    words = {p: body() for p in paths}
    records, aliases = links(), {paths[1]: ["Kaelor the Red"]}
    box, near, named = TallyBox(), {}, {}
    updated = 0
    for _ in range(200):
        if rng.random() < 0.3 and box.tally is not None:  # a fresh process: the tally as the convert cache keeps it
            saved = marshal.loads(marshal.dumps(box.tally.saved()))
            box = TallyBox(Tally.restored(paths, [words[p] for p in paths], saved))
        words = dict(words)
        for p in rng.sample(paths[6:], rng.choice([1, 1, 2])):
            words[p] = body()
        if rng.random() < 0.3:
            records = links()
        elif rng.random() < 0.3:  # the same broken links in another order: their words come in another order
            records = rng.sample(records, len(records))
        if rng.random() < 0.05:
            aliases, near = {paths[rng.randrange(6)]: [rng.choice(spellings)]}, {}
        last = box.tally
        kept = last is not None and last.clusters is not None and last.clusters.aliases == aliases
        found = spelling_variants(notes, aliases, records, words, near, box, named)
        updated += kept and box.tally is not None and box.tally.updates > 0
        assert repr(found) == repr(spelling_variants(notes, aliases, records, words))
    assert updated > 30, updated
