"""Unlinked mentions in the producer (``vault2okf/mentions.py``): what counts as a mention, the rule for short
and common names, and where they land (okf.duckdb, the link-health report, ``links --mentions``).

(``tests/test_mentions.py`` tests the retriever's own name matcher, ``retriever/mentions.py``.)"""

from __future__ import annotations

import json
import random
from pathlib import Path

import duckdb
import pytest
from growth import assert_linear
from test_incremental import Twin
from typer.testing import CliRunner

from vault2okf import mentions as m
from vault2okf.cli import app
from vault2okf.convert import convert
from vault2okf.mentions import Mention, NoteNames, find_mentions, prose
from vault2okf.parse import parse_note


def _note(path: str, text: str, aliases: tuple[str, ...] = (), linked: tuple[str, ...] = ()) -> NoteNames:
    note = parse_note(path, text.encode("utf-8"))
    return NoteNames(path, (path.rsplit("/", 1)[-1][:-3], *aliases), prose(note), frozenset(linked))


def _found(*notes: NoteNames) -> set[tuple[str, str, str]]:
    return {(x.source, x.target, x.text) for x in find_mentions(list(notes))}


KANDA = _note("Places/Kanda.md", "An island.\n")
BELL = _note("People/Old Tom Bell.md", "A bellringer.\n", aliases=("Bellringer",))
ECLAT = _note("Places/Éclat.md", "A city.\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We sailed to Kanda.", {"Kanda"}),
        ("Kanda’s reef and KANDA again.", {"Kanda"}),  # case folded for a capitalised spelling
        ("We sailed to Kandahar.", set()),  # whole words only
        ("The road to Eclat, then ÉCLAT.", {"Eclat"}),  # accents folded
        ("we met old tom bell at noon", {"old tom bell"}),  # a name of several words: any case
        ("the Bellringer rang", {"Bellringer"}),  # an alias
        ("a kanda, a kanda", set()),  # one capitalised word written in lower case is the ordinary word (rule 5)
        ("```\nKanda\n```\nnothing", set()),  # fenced code
        ("    Kanda in indented code\n", set()),
        ("Some `Kanda` code.", set()),  # inline code
        ("%% Kanda %% and <!-- Kanda -->", set()),  # comments
        ('<span title="Kanda">x</span>', set()),  # inside an HTML tag
        ("<b>Kanda</b>", {"Kanda"}),  # the text between tags is prose
        ("See [Kanda](https://example.org) and https://kanda.example/Kanda", set()),  # a link's text, a URL
        ("Tagged #Kanda only.", set()),
        ("Old [[Elsewhere]] Tom Bell", set()),  # no name across a removed link
        ("---\nplace: Kanda\n---\nNothing here.", set()),  # frontmatter
    ],
)
def test_what_is_a_mention(text: str, expected: set[str]) -> None:
    source = _note("Diary.md", text)
    assert {t for _, _, t in _found(source, KANDA, BELL, ECLAT)} == expected


def test_a_note_never_mentions_itself_nor_what_it_links() -> None:
    own = _note("Places/Kanda.md", "Kanda is an island near Eclat.\n")
    linked = _note("Diary.md", "[[Éclat]] first; later Eclat and Kanda.\n", linked=("Places/Éclat.md",))
    assert _found(own, linked, ECLAT) == {
        ("Places/Kanda.md", "Places/Éclat.md", "Eclat"),
        ("Diary.md", "Places/Kanda.md", "Kanda"),
    }


def test_short_names_shared_names_and_numbers_are_left_out() -> None:
    ash = _note("People/Ash.md", "Short.\n")
    twin = _note("Other/Kanda.md", "The other Kanda.\n")  # two notes named Kanda: no single target
    year = _note("Years/1204.md", "A year.\n")
    log = _note("Diary.md", "Ash fell on Kanda in 1204.\n")
    assert _found(ash, KANDA, twin, year, log) == set()


def test_a_shared_name_still_holds_its_words() -> None:
    """Two notes named "Boba Market": neither is suggested, and "Boba" is not found inside their name."""
    notes = [_note("A/Boba Market.md", "x\n"), _note("B/Boba Market.md", "x\n"), _note("Places/Boba.md", "x\n")]
    assert _found(*notes, _note("Diary.md", "At the Boba Market, in Boba.\n")) == {
        ("Diary.md", "Places/Boba.md", "Boba")
    }


def test_a_one_word_title_common_in_the_vault_is_dropped() -> None:
    """Rule 4: "Rest" written (capitalised, outside links) in more than 5% of the notes, and 3 or more, names
    nothing in particular; the two-word "Long Rest" written as often is still a name."""
    notes = [_note("Rules/Rest.md", "How to rest.\n"), _note("Rules/Long Rest.md", "A night.\n"), KANDA]
    notes += [_note(f"Log/Day {i:02}.md", "Rest. Then a Long Rest.\n") for i in range(20)]
    notes += [_note("Log/Trip.md", "Sailed to Kanda.\n")]
    found = _found(*notes)
    assert {t for _, t, _ in found} == {"Rules/Long Rest.md", "Places/Kanda.md"}
    assert len(found) == 21


def test_place_count_and_order() -> None:
    log = _note("Diary.md", "# Log\n\n## Day one\n\nKanda, then Eclat.\n\n## Day two\n\nEclat again, and Eclat.\n")
    assert find_mentions([log, KANDA, ECLAT]) == [
        Mention("Diary.md", "Places/Éclat.md", "Eclat", 5, "Day one", 3),  # most often first
        Mention("Diary.md", "Places/Kanda.md", "Kanda", 5, "Day one", 1),
    ]


def test_suggested_link_names_the_file_when_unique() -> None:
    stems = m.stem_counts(["Places/Kanda.md", "People/Old Tom Bell.md", "A/Tam.md", "B/Tam.md"])
    assert m.suggestion(Mention("x.md", "Places/Kanda.md", "Kanda", 1, None, 1), stems) == "[[Kanda]]"
    assert m.suggestion(Mention("x.md", "Places/Kanda.md", "kanda", 1, None, 1), stems) == "[[Kanda|kanda]]"
    assert m.suggestion(Mention("x.md", "A/Tam.md", "Tam", 1, None, 1), stems) == "[[A/Tam|Tam]]"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mentions")
    vault = root / "vault"
    (vault / "Places").mkdir(parents=True)
    (vault / "Places" / "Kanda.md").write_text("---\naliases: [Kanda Isle]\n---\nAn island.\n", "utf-8")
    (vault / "Places" / "Éclat.md").write_text("A city.\n", "utf-8")
    (vault / "Diary.md").write_text("# Log\n\nTo Kanda Isle, then Eclat.\n\n## Back\n\nKanda. [[Kanda]]?\n", "utf-8")
    (vault / "Trip.md").write_text("Eclat and eclat and ECLAT, `Kanda`.\n", "utf-8")
    convert(vault, root / "bundle")
    return root / "bundle"


def test_the_mentions_table(bundle: Path) -> None:
    con = duckdb.connect(str(bundle / "okf.duckdb"), read_only=True)
    rows = con.execute("SELECT * FROM mentions").fetchall()
    version = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    con.close()
    assert rows == [("Diary", "Places/Éclat", "Eclat", 3, "Log", 1), ("Trip", "Places/Éclat", "Eclat", 1, None, 2)]
    assert version == ("3",)  # schema 3 added analytics and the sessions view


def test_the_report_lists_them(bundle: Path) -> None:
    data = json.loads((bundle / "link-health.json").read_text("utf-8"))["mentions"]
    assert (data["total"], data["notes"], data["targets"]) == (2, 2, 1)
    assert data["by_note"][0]["mentions"][0]["link"] == "[[Éclat|Eclat]]"
    markdown = (bundle / "link-health.md").read_text("utf-8")
    assert "## Could be linked (2 unlinked mentions in 2 notes, 1 note named)" in markdown
    assert "- **Trip.md**: line 1 “Eclat” → `[[Éclat|Eclat]]` ×2" in markdown
    page = (bundle / "link-health.html").read_text("utf-8")
    assert '<section data-section="mentions">' in page and "[[Éclat|Eclat]]" in page
    assert "FROM mentions" in (bundle / "SKILL.md").read_text("utf-8")


def test_links_mentions_prints_what_to_write(bundle: Path) -> None:
    result = CliRunner().invoke(app, ["links", str(bundle), "--mentions"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if not line.startswith("#")]
    assert lines == ["Diary.md:3  Eclat  ->  [[Éclat|Eclat]]", "Trip.md:1  Eclat  ->  [[Éclat|Eclat]]  (x2)"]


_LETTERS = "bcdfghklmnprstvz"


def _vault(n: int) -> list[NoteNames]:
    """n notes with two-word names; each names three others in a paragraph of ordinary words."""
    rng = random.Random(n)
    names = [f"{''.join(rng.choices(_LETTERS, k=6))} {''.join(rng.choices(_LETTERS, k=5))}".title() for _ in range(n)]
    notes = []
    for name in names:
        named = ", ".join(names[rng.randrange(n)] for _ in range(3))
        text = f"# {name}\n\nThe road went on past {named} and the river.\n" * 3
        notes.append(NoteNames(f"N/{name}.md", (name,), text, frozenset()))
    return notes


def test_finding_mentions_is_linear_in_the_vault() -> None:
    vaults: dict[int, list[NoteNames]] = {}

    def work(n: int) -> object:
        return find_mentions(vaults.setdefault(n, _vault(n)))

    assert_linear(work, "find_mentions", start=256)


@pytest.mark.parametrize("unit", ["[[", "![[a|", "[", "[a](", "[[x]] ", "`", "<a", "a.", "# ", "%%", "<!--"], ids=repr)
def test_a_hostile_line_is_read_in_linear_time(unit: str) -> None:
    """One line of a repeated opener (tests/hostile.py's kind) costs linear time in ``prose`` and the finder."""

    def work(n: int) -> object:
        note = parse_note("n.md", f"# {unit * n}\n{unit * n} Kanda\n".encode())
        return find_mentions([NoteNames("n.md", ("n",), prose(note), frozenset()), KANDA])

    assert_linear(work, f"a line of {unit!r}", start=512)


def _many_targets(n: int) -> list[NoteNames]:
    """One long note (no headings) naming ``n`` notes, each on a line of its own: today's 234 KB note."""
    rng = random.Random(n)
    names = [f"{''.join(rng.choices(_LETTERS, k=7))} {''.join(rng.choices(_LETTERS, k=6))}".title() for _ in range(n)]
    text = "".join(f"On day {i} the road went past {name} and on.\n" for i, name in enumerate(names))
    notes = [NoteNames(f"N/{name}.md", (name,), "x", frozenset()) for name in names]
    return [NoteNames("Long.md", ("Long",), text, frozenset()), *notes]


def test_a_long_note_naming_many_notes_is_linear() -> None:
    """Issue 39 item 9: the heading above each target's first line was looked for from that line up, so a
    note naming n notes over n lines cost n × n."""
    vaults: dict[int, list[NoteNames]] = {}

    def work(n: int) -> object:
        found = find_mentions(vaults.setdefault(n, _many_targets(n)))
        assert len(found) == n
        return found

    assert_linear(work, "a note naming n notes", start=256)


def _many_lengths(n: int) -> list[NoteNames]:
    """A note with aliases of k lengths all starting with "Alpha" and a text of n words "alpha", k² ~ n: the
    404 KB note (each "alpha" tried every length, each length building a tuple of that many words)."""
    k = max(2, int(n**0.5))
    aliases = tuple("Alpha" + " Beta" * j for j in range(1, k + 1))
    line = " ".join(["alpha"] * (4 * k)) + "\n"
    text = line * max(1, n // (4 * k)) + "and Alpha Beta Beta at last\n"
    return [NoteNames("Big.md", ("Big",), text, frozenset()), NoteNames("Alpha Gamma.md", ("Alpha Gamma", *aliases),
            "x", frozenset())]  # fmt: skip


def test_aliases_of_many_lengths_are_linear() -> None:
    vaults: dict[int, list[NoteNames]] = {}

    def work(n: int) -> object:
        found = find_mentions(vaults.setdefault(n, _many_lengths(n)))
        assert [(x.source, x.text) for x in found] == [("Big.md", "Alpha Beta Beta")]
        return found

    assert_linear(work, "aliases of many lengths", start=1024)


def test_the_automaton_finds_the_longest_name_at_each_word() -> None:
    """Overlapping names of many lengths, read left to right, longest first (what ``_Names.match`` did)."""
    notes = [
        _note("A/Old Tom.md", "x\n"),
        _note("A/Tom Bell Tower.md", "x\n"),
        BELL,
        _note("A/Bell Tower Gate.md", "x\n"),
        _note("A/Tower Gate.md", "x\n"),
        _note("Diary.md", "Old Tom Bell Tower Gate; old tom, bell tower gate. Tom Bell Tower gate.\nOld Tom.\n"),
    ]
    found = [(x.target, x.text, x.line, x.count) for x in find_mentions(notes) if x.source == "Diary.md"]
    assert found == [
        ("A/Tower Gate.md", "Tower Gate", 1, 2),  # after "Old Tom Bell": "Tom Bell Tower" is not leftmost
        ("People/Old Tom Bell.md", "Old Tom Bell", 1, 2),
        ("A/Tom Bell Tower.md", "Tom Bell Tower", 1, 1),  # after the ".": then "gate" alone names nothing
        ("A/Old Tom.md", "Old Tom", 2, 1),
    ]


def test_titles_of_function_words_alone_name_nothing() -> None:
    """Issue 39 item 10: "To Do", "Of The", "Über uns" are words of every sentence, not names."""
    notes = [
        _note("Lists/To Do.md", "x\n"),
        _note("Odd/Of The.md", "x\n"),
        _note("Site/Über uns.md", "x\n"),
        _note("Lists/To Do Later.md", "x\n"),  # one word that is not a function word: a name
        _note("Diary.md", "Things to do: most of the day; über uns. To Do. Then to do later.\n"),
    ]
    assert _found(*notes) == {("Diary.md", "Lists/To Do Later.md", "to do later")}


def test_titles_with_symbols_match_literally() -> None:
    """Issue 39 item 10: "C++", "C#", "a.b*", "TCP/IP" are found as written, not as their bare words (and a
    one-letter word with a symbol is not a short common word)."""
    notes = [
        _note("Lang/C++.md", "x\n"),
        _note("Lang/C#.md", "x\n"),
        _note("Lang/Pattern.md", "x\n", aliases=("a.b*",)),
        _note("Net/Networking.md", "x\n", aliases=("TCP/IP",)),
        _note(
            "Diary.md",
            "I write C++ and C, then C# and c sharp.\nNot a b, axb or a-b; a.b* twice: a.b.\n"
            "TCP/IP here, not TCP IP.\n",
        ),
    ]
    found = {(x.target, x.text, x.line, x.count) for x in find_mentions(notes) if x.source == "Diary.md"}
    assert found == {
        ("Lang/C++.md", "C++", 1, 1),
        ("Lang/C#.md", "C#", 1, 1),
        ("Lang/Pattern.md", "a.b", 2, 2),  # "*" is Markdown's emphasis, in names and text alike
        ("Net/Networking.md", "TCP/IP", 3, 1),
    }


def test_cjk_names_are_found_inside_cjk_text() -> None:
    """Issue 39 item 10: CJK text has no spaces between words, so a CJK name of two letters or more is found
    anywhere in it (the longest first); one letter alone ("山") is a word of every other sentence."""
    notes = [
        _note("Places/東京.md", "x\n"),
        _note("Places/東京タワー.md", "x\n"),
        _note("Places/山.md", "x\n"),
        _note("People/김철수.md", "x\n"),
        _note("Diary.md", "昨日東京に行った。東京タワーに登った。山は高い。\n김철수씨를 만났다. Tokyo東京.\n"),
    ]
    found = {(x.target, x.text, x.line, x.count) for x in find_mentions(notes) if x.source == "Diary.md"}
    assert found == {
        ("Places/東京.md", "東京", 1, 2),
        ("Places/東京タワー.md", "東京タワー", 1, 1),
        ("People/김철수.md", "김철수", 2, 1),
    }


def test_earlier_hits_are_reused_only_where_they_still_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38 part 4: a note is read again only when its prose changed, a name it matched went away, or a new
    name may occur in it; what rules 4 and 5 made of a note's hits is taken again where the hits and the names are
    the same (``Applied``); the mentions are always those found from scratch."""
    read: list[str] = []
    scan = m._scan
    monkeypatch.setattr(m, "_scan", lambda text, names: read.append(text) or scan(text, names))
    diary = _note("Diary.md", "Old Tom Bell went to Kanda Isle.\n")
    trip = _note("Trip.md", "Nothing named here.\n")
    last: dict[str, str] = {}  # the prose each note's hits were found in

    def again(notes: list[NoteNames], before: m.Found | None = None) -> m.Found:
        read.clear()
        earlier = (
            m.Earlier(before.keys, {p: (last[p], hits) for p, hits in before.hits.items()}, before.applied)
            if before
            else None
        )
        found = m.find_all(notes, earlier)
        seen[:] = read
        assert found.mentions == find_mentions(notes) and found.hits == m.find_all(notes).hits
        last.clear()
        last.update({n.path: n.prose for n in notes})
        return found

    seen: list[str] = []
    first = again([KANDA, BELL, diary, trip])
    same = again([KANDA, BELL, diary, trip], first)
    assert seen == []  # nothing changed: nothing read
    assert same.mentions and all(a is b for a, b in zip(same.mentions, first.mentions, strict=True))  # taken again
    linked = NoteNames(diary.path, diary.names, diary.prose, frozenset({KANDA.path}))
    unlinked = again([KANDA, BELL, linked, trip], same)  # the same hits, a new link: its mentions made again
    assert seen == [] and KANDA.path not in {x.target for x in unlinked.mentions}
    same = again([KANDA, BELL, diary, trip], unlinked)
    isle = _note("Places/Kanda.md", "An island.\n", aliases=("Kanda Isle",))
    second = again([isle, BELL, diary, trip], same)  # a new name: the note holding its first word is read
    assert seen == [diary.prose] and {x.text for x in second.mentions} == {"Old Tom Bell", "Kanda Isle"}
    tom = _note("People/Tom Bell.md", "x\n")
    third = again([isle, tom, diary, trip], second)  # "Old Tom Bell" went: where it was found, read again
    assert seen == [tom.prose, diary.prose] and {x.text for x in third.mentions} == {"Tom Bell", "Kanda Isle"}
    edited = _note("Trip.md", "Now to Kanda.\n")
    again([isle, tom, diary, edited], third)  # an edit: that note alone
    assert seen == [edited.prose]


TOWNS = ["Mira", "Tovan", "Oskar", "Selka", "Brann", "Corvin", "Dasha", "Fenna", "Garrow", "Halde"]
FILLER = ["the", "road", "went", "past", "river", "mill", "nobody", "while", "and", "old"]


def _random_prose(rng: random.Random) -> str:
    """A few lines naming towns, capitalised or in lower case (rule 5), some as two words ("Mira Selka")."""
    lines = []
    for _ in range(rng.randrange(1, 4)):
        words = rng.sample(FILLER, 4)
        for _ in range(rng.randrange(1, 3)):
            town = rng.choice(TOWNS)
            town = town.lower() if rng.random() < 0.2 else town
            words.insert(rng.randrange(len(words) + 1), f"{town} {rng.choice(TOWNS)}" if rng.random() < 0.2 else town)
        lines.append(" ".join(words))
    return "\n".join(lines) + "\n"


def _random_edit(rng: random.Random, notes: dict[str, NoteNames], step: int) -> None:
    """One edit: prose, a link added or dropped, an alias that comes or goes (a name shared by two notes, a
    capital that flips), a note added or deleted."""
    path = rng.choice(sorted(notes))
    note = notes[path]
    kind = rng.choice(["prose", "prose", "prose", "link", "alias", "alias", "add", "delete"])
    if kind == "prose":
        notes[path] = NoteNames(path, note.names, _random_prose(rng), note.linked)
    elif kind == "link":
        linked = note.linked ^ {rng.choice(sorted(notes))}
        notes[path] = NoteNames(path, note.names, note.prose, frozenset(linked))
    elif kind == "alias":
        alias = rng.choice([rng.choice(TOWNS), rng.choice(TOWNS).lower(), "Mira Selka", "Dasha Road"])
        aliases = () if len(note.names) > 1 else (alias,)
        notes[path] = NoteNames(path, (note.names[0], *aliases), note.prose, note.linked)
    elif kind == "add" or len(notes) < 4:
        new = f"Towns/{rng.choice(TOWNS)} {step}.md"
        notes[new] = NoteNames(new, (new[6:-3],), _random_prose(rng), frozenset())
    else:
        del notes[path]


def test_found_again_where_an_edit_touched_is_found_from_scratch() -> None:
    """Issue 38 part 4: ``find_again`` told only the notes an edit touched (prose, links or names), the rules moved
    on from the last convert's ``Applied`` (kept in memory, or saved and restored as a fresh process has it),
    gives what ``find_mentions`` gives from scratch, after each of many random edits: a name that comes, goes,
    becomes shared or flips to a capital in one note changes the mentions of notes no edit touched, and so does
    a one-word name crossing rule 4's floor (five notes here)."""
    rng = random.Random(3842)
    notes = {f"Towns/{t}.md": NoteNames(f"Towns/{t}.md", (t,), _random_prose(rng), frozenset()) for t in TOWNS}
    last = dict(notes)
    found = m.find_all(list(notes.values()))
    hits = dict(found.hits)
    differed = 0  # edits after which a note the edit did not touch has other mentions
    for step in range(150):
        _random_edit(rng, notes, step)
        paths = list(notes)
        touched = [p for p in paths if last.get(p) != notes[p]]
        gone = [p for p in last if p not in notes]
        renamed = bool(gone) or any(p not in last or last[p].names != notes[p].names for p in touched)
        applied = found.applied
        assert applied is not None
        if step % 3 == 0:  # a fresh process: the Applied the convert cache kept
            applied = m.Applied.restored(applied.saved(), applied.keys, (applied.index, applied.capital))
        names = m.name_index(list(notes.values())) if renamed else (applied.index, applied.capital)
        olds = {p: (last[p].prose, hits[p]) for p in last}  # each note's last prose and hits
        before = m.Before(olds.get, found.keys, applied)
        now = m.Now(lambda p: notes[p].prose, lambda p: notes[p].linked)
        again = m.find_again(paths, now, names, before, touched, gone, same_order=list(last) == paths)
        expected = find_mentions(list(notes.values()))
        assert again.mentions == expected, step
        untouched = {p for p in paths if p not in touched}
        was = {x for x in found.mentions if x.source in untouched}
        differed += was != {x for x in expected if x.source in untouched}
        hits = {p: again.hits[p] if p in again.hits else hits[p] for p in paths}
        assert hits == m.find_all(list(notes.values())).hits, step
        found, last = again, dict(notes)
    assert differed >= 10, differed  # the edits did reach notes they did not touch


def test_an_edit_in_one_note_changes_the_mentions_of_notes_it_did_not_touch(tmp_path: Path) -> None:
    """The convert's shortcut (``Run.found``: the rules applied again only where an edit touched) against a full
    convert, byte for byte: a fourth note naming "Brann" makes it common (rule 4: more than 3 notes), so the three
    untouched notes that named it lose their mentions, and get them back when it goes; a link turns a mention
    into a link; a title that comes names the notes that held its words."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Brann.md").write_text("A town.\n", "utf-8")
    (vault / "Selka.md").write_text("A river.\n", "utf-8")
    for name in ("A", "B", "C"):
        (vault / f"{name}.md").write_text(f"# {name}\n\nWe rode to Brann by the Oskar Mill.\n", "utf-8")
    (vault / "D.md").write_text("# D\n\nNothing here.\n", "utf-8")
    twin = Twin(vault, tmp_path)

    def mentioned() -> list[tuple[str, str]]:
        data = twin.check().report.to_json()["mentions"]["by_note"]
        return sorted((e["note"], m["target"]) for e in data for m in e["mentions"])

    rode = [(f"{n}.md", "Brann.md") for n in "ABC"]
    assert mentioned() == rode
    (vault / "D.md").write_text("# D\n\nBrann again.\n", "utf-8")
    assert mentioned() == []  # common now: named in 4 notes
    (vault / "D.md").write_text("# D\n\nNothing here.\n", "utf-8")
    assert mentioned() == rode
    (vault / "B.md").write_text("# B\n\nWe rode to [[Brann]] by the Oskar Mill.\n", "utf-8")
    assert mentioned() == [("A.md", "Brann.md"), ("C.md", "Brann.md")]
    (vault / "Oskar Mill.md").write_text("A mill.\n", "utf-8")
    assert mentioned() == [
        *((f"{n}.md", t) for n in "ABC" for t in ("Brann.md", "Oskar Mill.md") if (n, t) != ("B", "Brann.md"))
    ]
