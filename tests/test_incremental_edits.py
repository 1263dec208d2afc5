"""Random edit sequences (issue 38 part 4): after each edit, text, link, alias, rename, delete or add, the
incremental convert's bundle is byte for byte the full convert's, and it did only what the edit touched: unlinked
mentions read again only in the notes the edit changed (or that may hold a name that came or went), the graph
analytics computed again only when the link graph changed."""

from __future__ import annotations

import gc
import json
import marshal
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_incremental import Twin, bundle_files, table_rows

from vault2okf import convert as convert_module
from vault2okf import mentions, run
from vault2okf import report as report_module
from vault2okf.convert import convert
from vault2okf.html import link_health_html
from vault2okf.report import LinkReport, ReportMemo
from vault2okf.suggest import BodyWords, StoredWords, Tally, body_words
from vault2okf.watch import Watcher, bundle_notes

EDITS = 30  # saved edits in the memory test (bench/one_edit_bench.py --memory runs 1,000)

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


def test_block_refs_of_unchanged_notes_follow_the_blocks_of_the_notes_they_name(tmp_path: Path) -> None:
    """A note's block refs are taken as its last state checked them only while every note's block ids are the
    same: a block id removed from, or added to, the named note moves the unchanged note's link to and from
    missing_block, as a full convert has it."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "A.md").write_text("See [[B#^one]] and [[B#^two]].\n", "utf-8")
    (vault / "B.md").write_text("First line ^one\n\nSecond line ^two\n", "utf-8")
    (vault / "C.md").write_text("Nothing here.\n", "utf-8")
    twin = Twin(vault, tmp_path)
    bodies = [
        "First line\n\nSecond line ^two\n",  # ^one gone: A's first link misses its block
        "First line ^one\n\nSecond line ^two\n",  # back
        "First line ^one\n\nSecond line ^two\nMore.\n",  # a text edit: the same block ids
    ]
    missing = []
    for body in bodies:
        (vault / "B.md").write_text(body, "utf-8")
        result = convert(vault, twin.inc)
        missing.append(result.totals["by_status"]["missing_block"])
        twin.check()  # a full convert: the same bundle, byte for byte
        (vault / "C.md").write_text((vault / "C.md").read_text("utf-8") + "More.\n", "utf-8")  # A, B unchanged
        convert(vault, twin.inc)
        twin.check()
    assert missing == [1, 0, 0]


# -- watch: the state kept in memory between edits -----------------------------------------------------------
def _full_equal(vault: Path, out: Path, tmp: Path, n: int) -> None:
    """The bundle at ``out`` is byte for byte a full convert's (files, tables in order, the report)."""
    full = tmp / f"full{n}"
    convert(vault, full, full=True)
    assert bundle_files(out) == bundle_files(full)
    assert table_rows(out) == table_rows(full)


def _watcher(vault: Path, out: Path) -> tuple[Watcher, list[str]]:
    lines: list[str] = []
    w = Watcher(vault, out, echo=lines.append)
    w.start()
    return w, lines


def _notes_written(vault: Path, notes: dict[str, str], mtime: float | None = None) -> None:
    """Each note of ``notes`` (vault path -> text) written, its folders made; ``mtime``: each file's times set to it
    (not racy: a rebuild visits the notes its events name alone)."""
    for rel, text in notes.items():
        path = vault / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
        if mtime is not None:
            os.utime(path, (mtime, mtime))


def _touched_counts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list each rebuild that follows its loops (``Run._render_touched``) appends its number of touched notes to."""
    counts: list[int] = []
    real = run.Run._render_touched

    def counting(self: run.Run) -> None:
        counts.append(len(self.touched or ()))
        real(self)

    monkeypatch.setattr(run.Run, "_render_touched", counting)
    return counts


WATCH_KINDS = [*KINDS, "rename", "delete", "alias"]


def test_watch_keeps_its_state_and_gives_the_full_convert(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: between edits `watch` keeps the last convert's state in memory (never reading the cache file
    back) and still writes, after every edit of any kind, the bundle a full convert writes; each line names the
    change as the whole bundle's bodies do."""
    rng = random.Random(3804)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    w, lines = _watcher(vault, out)
    spy = Spy(monkeypatch)

    def never(*_args: object) -> object:
        raise AssertionError("the watcher read the convert cache back from the bundle")

    monkeypatch.setattr(convert_module, "_last_cache", never)
    moved = 0  # rebuilds whose sum of the notes' words was moved on, not summed again (suggest.Tally)
    for step, kind in enumerate(rng.sample(WATCH_KINDS, len(WATCH_KINDS))):
        _edit(vault, rng, kind, step)
        spy.reset()
        assert w.rebuild(1), lines[-1]
        assert w.kept.used, kind  # started from the state in memory
        assert w.kept.cache is not None
        tally = w.kept.cache.loaded.tally.tally
        moved += tally is not None and tally.updates > 0
        if kind == "text":
            assert (spy.scanned, spy.analysed) == (1, 0), kind
        assert w.bodies == bundle_notes(out), kind  # read for the notes made again only, yet the whole truth
        verb = {"rename": "renamed", "delete": "removed", "add": "added"}.get(kind, "changed")
        assert f" {verb} " in lines[-1], (kind, lines[-1])
        w.kept.settle()
        aside = [p.name for p in tmp_path.glob(".inc.*-*")]
        assert aside in ([], [f".inc.tmp-{os.getpid()}"]), "the old generation is removed, or kept to build the next"
        _full_equal(vault, out, tmp_path, step)
    assert moved >= 3, moved


def test_watch_visits_only_the_touched_notes_yet_gives_the_full_convert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebuild told the paths its events named (``run.Loops``): the notes not touched keep the last run's work
    where the edit changes no block id (an alias resolves the links naming it again, a new edge makes the
    analytics again), and every other edit visits every note; either way the
    bundle is the full convert's, the edits that reach another note's doc included (a block id, an alias), an
    embed that brings an attachment, and a doc of the bundle edited by hand."""
    vault, out = tmp_path / "vault", tmp_path / "inc"
    notes = {
        "A.md": "# A\n\nSee [[B#^blk]], [[C]] and [[Dee]].\n",
        "B.md": "# B\n\nSome words.\n",
        "C.md": "# C\n\nBack to [[A]].\n",
        "People/D.md": "# D\n\nPlain text.\n",
        **{f"People/P{i}.md": f"# P{i}\n\nOn [[C]] and [[P{i + 1}]].\n" for i in range(8)},
    }
    _notes_written(vault, notes)
    (vault / "pic.png").write_bytes(b"\x89PNG not really")
    w, lines = _watcher(vault, out)
    followed = _touched_counts(monkeypatch)
    d = vault / "People" / "D.md"
    edits = [
        (d, "# D\n\nPlain text, more of it.\n", True),  # text
        (vault / "B.md", "# B\n\nSome words. ^blk\n", False),  # a block id A's link now finds: A's doc changes
        (d, "# D\n\nPlain text with ![[pic.png]].\n", True),  # an embed: the attachment copied
        (None, "", True),  # C's doc edited by hand in the bundle, then a text edit of D
        (d, "---\naliases: [Dee]\n---\n# D\n\nPlain text with ![[pic.png]].\n", True),  # A's [[Dee]] resolves
        (d, "---\naliases: [Dee]\n---\n# D\n\nNow [[B]].\n", True),  # a new edge: another graph
        (d, "---\naliases: [Dee]\n---\n# D\n\nNow [[B]], still.\n", True),
        (d, "---\naliases: [Dee]\ntitle: Dora\n---\n# D\n\nNow [[B]], still.\n", True),  # People/index.md
    ]
    for step, (note, text, visits_few) in enumerate(edits):
        if note is None:
            (out / "concepts" / "C.md").write_text("edited by hand\n", "utf-8")
            note, text = d, d.read_text("utf-8") + "One more line.\n"
        note.write_text(text, "utf-8")
        followed.clear()
        assert w.rebuild(1, [str(note)]), lines[-1]
        assert w.kept.used and len(followed) == visits_few, (step, followed)
        assert w.bodies == bundle_notes(out), step
        w.kept.settle()
        _full_equal(vault, out, tmp_path, step)
    w.kept.close()


def test_a_watcher_started_on_a_bundle_up_to_date_follows_its_loops_from_the_first_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``watch`` on a bundle converted before, nothing changed since: its start runs anyway, every note carried
    (``convert(warm=True)``), so that the first saved edit visits only the notes it touches; the bundle stays the
    full convert's, and the start line still says nothing changed."""
    rng = random.Random(3816)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    convert(vault, out)
    before = bundle_files(out)
    w, lines = _watcher(vault, out)
    assert bundle_files(out) == before and "start:" in lines[-1]
    followed = _touched_counts(monkeypatch)
    note = sorted(vault.rglob("*.md"))[0]
    note.write_text(note.read_text("utf-8") + "\nOne more line of text.\n", "utf-8")
    assert w.rebuild(1, [str(note)]), lines[-1]
    assert w.kept.used and len(followed) == 1
    w.kept.settle()
    _full_equal(vault, out, tmp_path, 0)
    w.kept.close()


def test_kept_state_is_dropped_when_another_run_wrote_the_bundle(tmp_path: Path) -> None:
    """A convert by another process (here: another call) between two edits: the watcher's memory no longer
    describes the bundle, so it reads the bundle's own cache, and the bundle is still the full convert's."""
    rng = random.Random(3805)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    w, lines = _watcher(vault, out)
    _edit(vault, rng, "text", 0)
    assert w.rebuild(1) and w.kept.used
    _edit(vault, rng, "alias", 1)
    convert(vault, out)  # someone else's convert
    _edit(vault, rng, "link", 2)
    assert w.rebuild(1), lines[-1]
    assert not w.kept.used
    assert w.bodies == bundle_notes(out)
    _full_equal(vault, out, tmp_path, 0)
    _edit(vault, rng, "text", 3)
    assert w.rebuild(1) and w.kept.used  # kept again from then on
    _full_equal(vault, out, tmp_path, 1)


def test_watch_memory_stays_bounded_over_many_edits(tmp_path: Path) -> None:
    """The same two versions of one note saved in turn, EDITS times: what the watcher holds (Python objects
    alive after each rebuild) does not grow with the number of edits."""
    rng = random.Random(3806)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    note = sorted(vault.rglob("*.md"))[3]
    versions = [note.read_text("utf-8"), note.read_text("utf-8") + "One more line about the old mill.\n"]
    w, lines = _watcher(vault, out)
    counts = []
    for i in range(EDITS):
        note.write_text(versions[i % 2], "utf-8")
        assert w.rebuild(1), lines[-1]
        if i % 10 == 9:
            w.kept.settle()
            gc.collect()
            counts.append(len(gc.get_objects()))
    assert max(counts[1:]) <= counts[1] + 100, counts  # after the first rebuilds, flat
    _full_equal(vault, out, tmp_path, 0)


def _seen_items(t: Tally) -> tuple[Any, ...]:
    seen = t.seen
    beside = [(k, list(v.items())) for k, v in seen.beside.items()]
    return list(t.runs.items()), list(seen.count.items()), beside, dict(t.lower)


def test_a_moved_tally_is_the_sum_made_again() -> None:
    """``suggest.Tally.moved``: after random changes of a few notes' words, a tally moved on holds what a sum made
    again holds, every count and every key in the same place (spelling_variants' output follows that order); so
    does one saved (``Tally.saved``, marshalled as the convert cache does) and ``Tally.restored``, with notes' words
    saved and decoded when first read (``StoredWords``) or not, the count of notes writing each word in lower case
    included."""
    rng = random.Random(3807)
    vocab = [*FIRST, *LAST, "The Road", "Old Mill", "Ilse Kest", "Mira of Thelis"]

    def words() -> BodyWords:
        text = " and ".join(rng.choice(vocab) for _ in range(rng.randrange(1, 6))) + rng.choice([".", " or so."])
        made = body_words(text)
        return StoredWords(made.saved()) if rng.random() < 0.5 else made  # as a convert cache gives them back

    paths = [f"n{i:02}.md" for i in range(30)]
    read = [words() for _ in paths]
    tally = Tally(paths, read)
    moved = bailed = 0
    for _ in range(300):
        read = list(read)
        for i in rng.sample(range(len(paths)), rng.choice([1, 1, 2])):
            read[i] = words()
        fresh = Tally(paths, read)
        step = tally.moved(paths, read)
        if step is None:
            bailed += 1
            step = fresh
        else:
            moved += 1
            assert _seen_items(step) == _seen_items(fresh)
        tally = step
        if rng.random() < 0.5:  # saved by a convert cache and read back by the next process: the same sums
            tally = Tally.restored(paths, read, marshal.loads(marshal.dumps(step.saved())))
            assert _seen_items(tally) == _seen_items(fresh)
    assert moved > 30 and bailed > 30, (moved, bailed)


def test_report_pieces_taken_again_are_the_whole_made_again(tmp_path: Path) -> None:
    """``ReportMemo``: the JSON written a key at a time is ``json.dumps`` of the whole; with the memo of another
    report, each piece is taken only where its value is the same, and the page and the JSON are the ones made
    without any memo (nova-regna's report: broken, ambiguous, variants, mentions)."""
    vault = Path(__file__).resolve().parents[1].parent / "shared" / "vaults" / "nova-regna"
    report = convert(vault, tmp_path / "b").report
    data = report.to_json()
    assert report.to_json_text() == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    other = LinkReport(report.vault, report.notes[:-5], report.records[:-40], report.problems, report.skipped,
                       report.aliases, report.types, report.variants, mentions=report.mentions[5:])  # fmt: skip
    memo = ReportMemo()
    other.to_json_text(memo), link_health_html(other.to_json(), {}, memo.html)
    assert report.to_json_text(memo) == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    assert link_health_html(data, {}, memo.html) == link_health_html(data, {})
    assert memo.json["vault"][0] == data["vault"] and memo.json["totals"][0] == data["totals"]


def test_a_fresh_convert_takes_the_last_reports_sections_where_their_records_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A convert with no report memo (a fresh process) reads the last ``link-health.json``: after a text edit no
    section is made again and no key dumped again; a new broken link makes the broken links and the totals again
    (not the ambiguous links); an edited file is not read. Each bundle is the full convert's."""
    rng = random.Random(4040)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    convert(vault, out)
    made: list[str] = []
    for name in ("_broken", "_ambiguous", "totals", "hubs"):
        real = getattr(LinkReport, name)
        monkeypatch.setattr(LinkReport, name, lambda self, _real=real, _name=name: made.append(_name) or _real(self))
    dumps = json.dumps

    def counting(value: Any, **options: Any) -> str:
        made.append("dump") if options.get("indent") else None
        return dumps(value, **options)

    notes = sorted(vault.rglob("*.md"))
    edits = {
        "text": "\nThe road went on past the mill.\n",
        "broken": "\nSee [[Nowhere At All]].\n",
    }
    for n, (kind, added) in enumerate(edits.items()):
        notes[n].write_text(notes[n].read_text("utf-8") + added, "utf-8")
        made.clear()
        with monkeypatch.context() as patch:
            patch.setattr(report_module.json, "dumps", counting)
            convert(vault, out)
        if kind == "text":
            assert made == [], made
        else:
            assert sorted(set(made)) == ["_broken", "dump", "totals"], made
        _full_equal(vault, out, tmp_path, n)
    (out / "link-health.json").write_text((out / "link-health.json").read_text("utf-8") + " ", "utf-8")
    notes[3].write_text(notes[3].read_text("utf-8") + "\nThe old mill.\n", "utf-8")
    made.clear()
    convert(vault, out)
    assert "totals" in made  # the edited file is not the one written: nothing taken from it
    _full_equal(vault, out, tmp_path, 9)


def test_a_reports_json_text_splits_into_its_keys() -> None:
    """``report._split_json`` gives back each top-level key's text of what ``to_json_text`` wrote, strings with
    line breaks, quotes and two-space runs in them included; anything else is None."""
    data = {"vault": 'a,\n  "b": c', "totals": {"notes": 1, "x": [1, {"y": '\n  "z"'}]}, "empty": [], "e": {}}
    text = (
        "{\n"
        + ",\n".join(
            f"  {json.dumps(k)}: {json.dumps(v, indent=2, ensure_ascii=False).replace(chr(10), chr(10) + '  ')}"
            for k, v in data.items()
        )
        + "\n}\n"
    )
    assert text == json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    split = report_module._split_json(text)
    assert split is not None and list(split) == list(data)
    assert all(json.loads(split[k]) == v for k, v in data.items())
    assert report_module._split_json(text[:-1]) is None and report_module._split_json("[]\n") is None
    assert report_module._split_json(text.replace('"totals"', '"vault"')) is None  # a key twice


def test_a_watch_started_on_an_up_to_date_bundle_keeps_its_cache(tmp_path: Path) -> None:
    """The watcher's first convert finds nothing changed: it keeps the bundle's cache as read, so the first edit
    is converted from memory too (not read back again), and gives the full convert's bundle."""
    rng = random.Random(3808)
    vault, out = tmp_path / "vault", tmp_path / "inc"
    _build(vault, rng)
    convert(vault, out)
    w, lines = _watcher(vault, out)
    assert "no note changed" in lines[-1]
    _edit(vault, rng, "text", 0)
    assert w.rebuild(1) and w.kept.used, lines[-1]
    _full_equal(vault, out, tmp_path, 0)


def test_generated_files_with_the_same_bytes_are_linked_not_written(tmp_path: Path) -> None:
    """A text edit that changes no folder index and no report: the new generation links the old bundle's
    link-health files and index.md files (same inode) rather than writing them, the page and the Markdown not
    even made (the JSON they are made from is the same), and the bundle is still the full convert's. A file of
    the bundle edited by hand is written again."""
    rng = random.Random(3812)
    vault = tmp_path / "vault"
    _build(vault, rng)
    twin = Twin(vault, tmp_path)
    kept = ["link-health.html", "link-health.md", "link-health.json", "index.md", "concepts/People/index.md"]
    before = {rel: (twin.inc / rel).stat().st_ino for rel in kept}
    (twin.inc / "link-health.md").write_text("edited by hand\n", "utf-8")
    note = sorted((vault / "Places").glob("*.md"))[0]
    note.write_text(note.read_text("utf-8") + "\nquietly the mill stood\n", "utf-8")
    calls: list[str] = []
    real = run.link_health_html

    def counting(*args: Any) -> str:
        calls.append("html")
        return real(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run, "link_health_html", counting)
        twin.check()
        after = {rel: (twin.inc / rel).stat().st_ino for rel in kept}
    assert calls == ["html"]  # the full convert made its page; the incremental one linked the old
    assert {rel for rel in kept if after[rel] == before[rel]} == set(kept) - {"link-health.md"}


def test_a_text_edit_patches_the_database_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few notes made again with as many links, tags and aliases as before: okf.duckdb is the old file with
    their rows updated in place (``db.DatabasePatcher``), every table still in a full convert's order; one more
    link (its note's links rows no longer fit) writes it anew. Patched again and again, the file does not grow."""
    rng = random.Random(3813)
    vault = tmp_path / "vault"
    _build(vault, rng)
    twin = Twin(vault, tmp_path)
    patched: list[Path] = []
    real = run.DatabasePatcher

    def spying(path: Path, old: Path) -> run.DatabasePatcher:
        patched.append(path)
        return real(path, old)

    monkeypatch.setattr(run, "DatabasePatcher", spying)
    notes = sorted(vault.rglob("*.md"))
    sizes = []
    for step in range(6):
        note = notes[step % len(notes)]
        note.write_text(note.read_text("utf-8") + _sentence(rng, [p.stem for p in notes]) + "\n", "utf-8")
        twin.check()
        sizes.append((twin.inc / "okf.duckdb").stat().st_size)
    assert len(patched) == 6
    assert max(sizes) <= sizes[0] * 1.5, sizes
    notes[0].write_text(notes[0].read_text("utf-8") + f"\nAlso [[{notes[1].stem}]].\n", "utf-8")
    twin.check()
    assert len(patched) == 6  # written anew


def test_a_patched_database_keeps_its_analytics_while_the_graph_is_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A patched okf.duckdb (``db.DatabasePatcher``) keeps its analytics table while the link graph is the one its
    analytics were made from (a text edit), and writes it again where a link moved to another note (as many links:
    still a patch, but another graph); each time every table is the full convert's, in order."""
    rng = random.Random(3815)
    vault = tmp_path / "vault"
    _build(vault, rng)
    notes = sorted(vault.rglob("*.md"))
    source, first, second = notes[0], notes[1], notes[2]
    source.write_text(source.read_text("utf-8") + f"\nSee [[{first.stem}]].\n", "utf-8")
    twin = Twin(vault, tmp_path)
    written: list[int] = []
    patched: list[Path] = []
    real = run.DatabasePatcher

    class Spying(real):  # type: ignore[misc, valid-type]
        def __init__(self, path: Path, old: Path) -> None:
            patched.append(path)
            super().__init__(path, old)

        def analytics(self, rows: Any) -> None:
            written.append(len(rows))
            super().analytics(rows)

    monkeypatch.setattr(run, "DatabasePatcher", Spying)
    source.write_text(source.read_text("utf-8") + "\nOne more line of text.\n", "utf-8")
    twin.check()
    assert len(patched) == 1 and written == []  # patched, the same graph: the table kept as it was
    source.write_text(source.read_text("utf-8").replace(f"[[{first.stem}]]", f"[[{second.stem}]]"), "utf-8")
    twin.check()
    assert len(patched) == 2 and written == [len(notes)]  # patched, another graph: written again


def test_an_alias_edit_resolves_again_only_the_links_that_name_a_moved_alias(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit of aliases alone (the same notes): only links whose name is an alias that came, went or moved to
    other notes are resolved again (besides the edited note's own); the bundle is still the full convert's."""
    rng = random.Random(3814)
    vault = tmp_path / "vault"
    _build(vault, rng)
    note = sorted((vault / "People").glob("*.md"))[0]
    other = sorted((vault / "Places").glob("*.md"))[0]
    other.write_text(other.read_text("utf-8") + "\n[[Grey Warden]] and [[Nobody Here]].\n", "utf-8")
    twin = Twin(vault, tmp_path)
    resolved: list[str] = []
    real = run.Resolver.resolve

    def counting(self: Any, target: str, source: str) -> Any:
        resolved.append(source)
        return real(self, target, source)

    monkeypatch.setattr(run.Resolver, "resolve", counting)
    body = note.read_text("utf-8").split("---\n")[-1]
    note.write_text(f"---\naliases: [Grey Warden]\n---\n{body}", "utf-8")
    result = convert(vault, twin.inc)
    incremental = list(resolved)
    twin.check()  # the same bundle as a full convert's
    assert result.reused > 0 and not result.unchanged
    assert set(incremental) <= {note.relative_to(vault).as_posix(), other.relative_to(vault).as_posix()}
    assert other.relative_to(vault).as_posix() in incremental


def test_spelling_variants_and_suggestions_follow_each_edit(tmp_path: Path) -> None:
    """Issue 38: spelling variants are looked at again only for the words an edit touched, and link-health's
    sections taken again where the notes whose records changed read the same. Edits that make and unmake a variant
    for another note's title and broken link (a new spelling written next to a title word, a broken link written
    twice, the only note with a title near a broken link deleted): under a watcher and in a convert that starts
    from the cache, the bundle is the full convert's after each."""
    vault = tmp_path / "vault"
    for path, text in {
        "NPCs/Kaelor Thornhide.md": "# Kaelor Thornhide\n\nA werebeast.\n",
        "NPCs/Ygra Brambleward.md": "# Ygra Brambleward\n\nA paladin.\n",
        "NPCs/Harlan Greaves.md": "# Harlan Greaves\n\nA captain.\n",
        "Sessions/One.md": "Kaelor Thornhide met the captain. See [[Yagra]].\n",
        "Sessions/Two.md": "Nothing much happened at the mill.\n",
    }.items():
        (vault / path).parent.mkdir(parents=True, exist_ok=True)
        (vault / path).write_text(text, "utf-8")
    two, one = vault / "Sessions" / "Two.md", vault / "Sessions" / "One.md"
    edits = [
        lambda: two.write_text(two.read_text("utf-8") + "Kaleor Thornhide came back.\n", "utf-8"),
        lambda: two.write_text(two.read_text("utf-8") + "Commander Yagra Brambleward spoke.\n", "utf-8"),
        lambda: one.write_text(one.read_text("utf-8") + "Ask [[Captain Grieves]], [[Captain Grieves]].\n", "utf-8"),
        lambda: (vault / "NPCs" / "Ygra Brambleward.md").unlink(),
        lambda: two.write_text("Nothing much happened at the mill.\nCommander Yagra Brambleward spoke.\n", "utf-8"),
        lambda: two.write_text("---\ntype: Faction\n---\n" + two.read_text("utf-8"), "utf-8"),  # its type row
    ]
    w, lines = _watcher(vault, tmp_path / "w")
    twin = Twin(vault, tmp_path)
    words, whys = [], []
    for step, edit in enumerate(edits):
        edit()
        assert w.rebuild(1), lines[-1]
        _full_equal(vault, tmp_path / "w", tmp_path, step)
        report = twin.check().report.to_json()
        words.append({c["word"]: sorted(c["variants"]) for c in report["variants"]})
        whys.append([s["why"] for e in report["broken"] if e["target"] == "Yagra" for s in e["suggestions"]])
    assert words == [
        {"kaelor": ["kaleor"]},  # a new spelling beside a title word
        {"kaelor": ["kaleor"], "ygra": ["yagra"]},  # the broken link's word, now written beside "Brambleward"
        {"greaves": ["grieves"], "kaelor": ["kaleor"], "ygra": ["yagra"]},  # a broken link written twice
        {"greaves": ["grieves"], "kaelor": ["kaleor"]},  # the only note titled near "Yagra" deleted
        {"greaves": ["grieves"]},  # the sentence that wrote "Kaleor" gone
        {"greaves": ["grieves"]},
    ], words
    assert {"folder": "", "type": "Faction", "rule": "frontmatter", "notes": 1} in report["types"]  # made again
    spelled, near = "'yagra' is how the vault also spells 'ygra'", "'yagra' ~ 'ygra'"
    assert [[near in why or spelled in why for why in found] for found in whys] == [[True], [True], [True], [], [], []]
    assert spelled in whys[1][0] and near in whys[0][0]  # the suggestion for [[Yagra]] follows the variant


def test_watch_alias_edits_resolve_again_only_the_notes_naming_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An alias that comes, goes or becomes shared under ``watch``: the notes whose links name it are resolved
    again and the rest kept (``Run._aliases_moved``), the link graph the same or not (a broken link that now
    resolves, a resolved one that breaks: the analytics made again, each doc whose ``graph`` key moved made
    again). A block id still visits every note. Each time the bundle is the full convert's, the report's
    ambiguous links included."""
    vault, out = tmp_path / "vault", tmp_path / "inc"
    notes = {
        "A.md": "# A\n\nSee [[Dee]], [[Eve]] and [[B]].\n",
        "B.md": "# B\n\nSome words.\n",
        "People/D.md": "---\naliases: [Dee]\n---\n# D\n\nPlain text.\n",
        "People/E.md": "# E\n\nOther text.\n",
        **{f"People/P{i}.md": f"# P{i}\n\nOn [[B]] and [[P{i + 1}]].\n" for i in range(6)},
    }
    _notes_written(vault, notes, mtime=1e9)
    w, lines = _watcher(vault, out)
    touched = _touched_counts(monkeypatch)
    e, d = vault / "People" / "E.md", vault / "People" / "D.md"
    edits = [
        (e, "---\naliases: [Nobody Names This]\n---\n# E\n\nOther text.\n", 1, 0),  # named by no link
        (e, "---\naliases: [Dee]\n---\n# E\n\nOther text.\n", 2, 1),  # [[Dee]] ambiguous: the same edge
        (e, "---\naliases: [B]\n---\n# E\n\nOther text.\n", 8, 0),  # a title's name: [[B]] is still B's
        (e, "---\naliases: [Eve]\n---\n# E\n\nOther text.\n", 8, 0),  # [[Eve]] resolves: a new edge
        (d, "# D\n\nPlain text.\n", 2, 0),  # [[Dee]] breaks: an edge gone
        (e, "---\naliases: [Eve, Dee]\n---\n# E\n\nOther text.\n", 2, 0),  # [[Dee]] is E's: an edge moved
        (e, "---\naliases: [eve, Dee]\n---\n# E\n\nOther text.\n", 2, 0),  # case alone: the same links
        (d, "---\naliases: [Dee]\n---\n# D\n\nPlain text.\n", 2, 1),  # shared again: ambiguous, to D
        (vault / "B.md", "# B\n\nSome words. ^blk\n", None, 1),  # a block id: every note visited
    ]
    for step, (note, text, visited, ambiguous) in enumerate(edits):
        note.write_text(text, "utf-8")
        os.utime(note, (1e9 + step + 1, 1e9 + step + 1))  # no longer racy at the next rebuild
        touched.clear()
        assert w.rebuild(1, [str(note)]), lines[-1]
        # the notes visited: the one edited and those whose links name an alias key it had or has ([[B]]: A and
        # the six P's), the link graph the same or not
        assert w.kept.used and touched == ([] if visited is None else [visited]), (step, touched)
        report = json.loads((out / "link-health.json").read_text("utf-8"))
        assert report["totals"]["by_status"]["ambiguous"] == ambiguous, (step, report["totals"])
        assert w.bodies == bundle_notes(out), step
        w.kept.settle()
        _full_equal(vault, out, tmp_path, step)
    w.kept.close()


def test_watch_link_edits_make_the_analytics_again_and_the_docs_whose_graph_key_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A link edit under ``watch`` that changes the link graph: the touched note alone is resolved, the analytics
    are made again (communities and PageRank in okf.duckdb), and the docs whose ``graph`` key moved (the target's
    ``links_in``) are made again with it; the bundle is the full convert's each time."""
    vault, out = tmp_path / "vault", tmp_path / "inc"
    vault.mkdir()
    group = {"A": ["A1", "A2", "A3", "A4"], "B": ["B1", "B2", "B3", "B4"]}
    for members in group.values():
        for name in members:
            links = " ".join(f"[[{m}]]" for m in members if m != name)
            (vault / f"{name}.md").write_text(f"# {name}\n\nWith {links}.\n", "utf-8")
            os.utime(vault / f"{name}.md", (1e9, 1e9))
    w, lines = _watcher(vault, out)
    touched = _touched_counts(monkeypatch)
    b1 = vault / "B1.md"
    edits = [
        "# B1\n\nWith [[A1]] [[A2]] [[A3]] [[A4]].\n",  # B1 leaves its group for the other
        "# B1\n\nWith [[A1]] [[A2]] [[A3]] [[A4]] [[A1]].\n",  # a link beside one to the same note: the same graph
        "# B1\n\nWith [[B2]] [[B3]] [[B4]].\n",  # back
    ]
    communities = []
    for step, text in enumerate(edits):
        b1.write_text(text, "utf-8")
        os.utime(b1, (1e9 + step + 1, 1e9 + step + 1))
        touched.clear()
        assert w.rebuild(1, [str(b1)]), lines[-1]
        assert w.kept.used and touched == [1], (step, touched)
        rows = table_rows(out)["analytics"]
        communities.append(sorted(row[4] for row in rows))
        assert w.bodies == bundle_notes(out), step
        w.kept.settle()
        _full_equal(vault, out, tmp_path, step)
    assert communities[0] != communities[2] and communities[0] == communities[1], communities
    w.kept.close()
