"""Unlinked mentions: where a note's text names another note (its file name, title or an alias) without
linking it, as Obsidian's "Unlinked mentions" pane shows them. Pure: prose and names in, ``Mention`` records out.

A note's **prose** (``prose``, kept in the convert cache with the note's other per-note results) is its body
with everything that is not running text blanked: code blocks and ``%%`` comments (the parser's
``CodeLines``), inline code, every link, wikilink and embed the parser found, HTML tags and comments, bare URLs,
tags and block ids; frontmatter lines are empty. A removed span breaks a name (``Old [[x]] Bell`` names neither
"Old Bell" nor anything across the link).

Names are matched as **whole words, case and accents folded** (``\\w+`` tokens: "Kanda" never matches in
"Kandahar", "ECLAT" matches "Éclat"), the longest name starting at a word first, never overlapping. A name's
**symbols** are tokens too, matched literally (``+ ? ^ $ | \\ ( ) [ ] { } # & @ % < > /``, and ``.`` inside a
word): "C++" is not found in "C", "a.b" not in "a b", "status.type" does not name "Status Type", and no name runs
across a ``|`` or ``/`` of the text; "*", "=", "~" and "_" are Markdown's emphasis and are not tokens. **CJK**
letters (Han, kana, Hangul) are a token each, as the text puts no space between words: a CJK name is found
anywhere inside CJK text ("東京" in "昨日東京に"). A note never mentions itself, and a note that links a target
anywhere (any link that reached it, an ambiguous one's candidates included) has no unlinked mention of it.

**The rule for short and common names** (parameters below, measured in ``reports/mentions-precision.md``):
1. a name must hold a letter and a word that is not a number ("2023-04-01", "12" name nothing), and a word
   that is not a function word (``STOP_WORDS``: "To Do", "Of The", "Über uns" name nothing);
2. a one-word name shorter than ``MIN_CHARS`` letters is dropped ("Ash", "Bo", "Inn" are words first), unless
   it holds a symbol other than a final "." ("C++", "C#"); a CJK name needs ``MIN_CJK_CHARS`` letters ("山"
   alone is a word of every other sentence);
3. a name that more than ``MAX_NOTES_PER_NAME`` notes carry names none of them (a suggestion must name one
   note), though it is still matched, so its words are not taken for a shorter name;
4. a one-word name found (outside links) in more than ``MAX_SHARE`` of the vault's notes, and in at least
   ``MIN_COMMON_NOTES`` of them, is dropped: measured on the vault itself, so "Rest", "Magic" or "Water" as a
   title stop flooding in a vault whose text uses them everywhere, while a rare proper name is kept. Only
   one-word names: a name of two words or more is already specific, and the vault's main city named in a third
   of the notes is a mention, not a common word. A dropped one-word name is removed after matching, which is
   exact: it was the longest match where it stood, so no other name started there. (For rules 4 and 5 a name
   of one word and symbols, "C++", is one word, and so is a CJK name.)
5. a one-word name written with a capital ("Note", "Rest", "Kanda") is not matched where the text writes the
   word all in lower case ("the other note", "a short rest"): one word capitalised is a proper name, in lower
   case it is the ordinary word. Case is folded for everything else: names of two words or more ("the union"
   names "The Union"), a capitalised or upper-case spelling ("KANDA"), and names written in lower case.
Why rule 4 is not a fixed list of common words (rule 1's holds function words only): the vaults differ (a
German wiki, a task tracker, campaigns); the document frequency on the vault's own notes says which of *its*
titles are ordinary words.

On thellade (1,442 notes) rule 3 leaves 8 names to no note and rule 4 drops "Reach" (named in 619 notes) and
"Religions" (566); by hand 29 of 30 sampled mentions there are right, 11 of 17 on children-of-ash.

Cost: one pass over each note's prose lines; a line is split into tokens only when it holds the first word of
some name (``set.isdisjoint`` over a ``findall``, both in C; or a CJK letter when a name has one): on thellade
15,851 of 267,622 lines. Those lines go once through an Aho–Corasick automaton of every name read backwards
(``_Names``), which gives the longest name starting at each token in one pass, whatever the names' lengths; the
heading above each mention is found in one pass over the note. 0.68 s of CPU on thellade, as before the
automaton, and linear in the vault's size, in one long note naming many notes (the heading search was n × n),
in aliases of many lengths starting with the same word (each was tried at every such word), and on hostile
lines (``tests/test_unlinked_mentions.py``). An incremental convert works only on what an edit touched
(``find_again``): a note is read again where its prose changed, a name its hits held went away, or a name that came
may occur in it (a substring search of the names' first words over each folded prose, in C); the rules are
applied again to the notes touched and read again, and to the notes whose hits hold a name whose owner, capital or
commonness changed (``Applied.holders``). Every other note keeps its mentions (``Applied``, in a watcher's memory
and in the convert cache). On the 13k-note scale vault a one-note text edit costs 0.03 s of CPU here, where
finding them over every note's hits took 0.25-0.38 s.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import chain
from typing import Any

from vault2okf.db import MentionRow
from vault2okf.scan import CodeLines

MIN_CHARS = 4
MIN_CJK_CHARS = 2
MAX_NOTES_PER_NAME = 1
MAX_SHARE = 0.05
MIN_COMMON_NOTES = 3
TOP_PER_NOTE = 5  # mentions per note in the link-health report (all of them are in okf.duckdb)

# Function words, folded: a name made of these alone ("Of The", "To Do", "Über uns") is not a name (rule 1)
_STOP_WORDS = """a about above after again against all also am an and any are as at be been before being below between
    both
    but by can could did do does doing down during each few for from further had has have having he her here hers
    him his how i if in into is it its just me more most my no nor not now of off on once only or other our out
    over own same she should so some such than that the their them then there these they this those through to
    too under until up very was we were what when where which while who whom why will with would you your
    der die das den dem des ein eine einer eines einem einen und oder aber im am auf aus bei mit nach von vor zu
    zum zur uber unter fur um durch ist sind war wird es er sie wir ihr ich du uns nicht auch als wie
    le la les du un une et ou en au aux"""
STOP_WORDS = frozenset(_STOP_WORDS.split())

_WORD = re.compile(r"\w+")
# Chinese, Japanese and Korean letters: no spaces between words, so each is a token of its own and a CJK name is
# found as a run of them anywhere (Han with its extensions and compatibility forms, kana, half-width kana, Hangul)
_CJK_CHARS = (
    "\u3005\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"
    "\U00020000-\U0003134f"
)
_CJK = re.compile(f"[{_CJK_CHARS}]")
# Symbols a name is matched with literally ("C++", "a.b*" as "a.b", "Node.js", "C#", "TCP/IP"): each is a token of
# its own, in names and in text, so "a.b" is not found in "a b", "C++" not in "C" and no name runs across a "|",
# "(" or "/" in the text. A "." is one only inside a word ("status.type", "2.5": not an ellipsis or a sentence's
# end); "*", "=", "~" and "_" are Markdown's emphasis, and apostrophes, hyphens, commas and spaces separate words
# as before ("Kanda’s", "Jean-Luc", "the **Emberwake**").
_SYMBOL_SET = frozenset("+?.^$|\\()[]{}#&@%<>/\x1f")
_TOKEN = re.compile(f"[{_CJK_CHARS}]|[^\\W{_CJK_CHARS}]+|(?<=\\w)\\.(?=\\w)|[+?^$|\\\\()\\[\\]{{}}#&@%<>/\\x1f]")
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")  # accents
_BREAK = "\x1f"  # where a link, code span or tag was: no name is matched across it
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*)$")
# Every alternative is linear on a hostile line (tests/hostile.py: 20,000 ``[[``, backticks, ``[a](``): no class
# may run over the character that opens the next try, and the URL scheme is bounded.
_BLANKED = re.compile(
    r"!?\[[^\[\]\n]*\]\([^()\n]*\)"  # a markdown link or image the parser kept out of ``links`` (a web link)
    r"|!?\[\[[^\[\]\n]*\]\]"  # a wikilink (every one is in ``links``; this is a safety net)
    r"|``[^`\n]*``|`[^`\n]*`"  # inline code
    r"|<!--.*?(?:-->|$)"  # an HTML comment (its tail on this line)
    r"|</?[A-Za-z][^<>\n]*>"  # an HTML tag (the text between tags is prose)
    r"|%%.*?(?:%%|$)"  # an Obsidian comment on one line
    r"|\b[a-z][a-z0-9+.-]{0,30}://\S+"  # a bare URL
    r"|(?<![\w#&])#[^\s#]+"  # a tag (a heading's marks are followed by a space)
    r"|(?:^|(?<=\s))\^[A-Za-z0-9-]+\s*$"  # a block id
)


@dataclass(frozen=True)
class NoteNames:
    """What the finder needs of one note."""

    path: str  # vault path
    names: tuple[str, ...]  # file name (stem), title, aliases
    prose: str  # ``prose(note)``
    linked: frozenset[str]  # vault paths its links reached


@dataclass(frozen=True)
class Mention:
    """``source`` names ``target`` ``count`` times without linking it; the first time at ``line``."""

    source: str  # vault paths
    target: str
    text: str  # the words as written the first time
    line: int  # 1-based line in the source file
    heading: str | None  # the heading above that line
    count: int


def prose(note: Any) -> str:
    """The note's running text, one line per source line (frontmatter lines empty), non-prose blanked."""
    lines = note.body.split("\n")
    code = note.code if note.code is not None else CodeLines(lines)
    cut: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for link in note.links:
        if link.col >= 0:
            cut[link.line - note.body_line].append((link.col, link.col + len(link.raw)))
    out = [""] * (note.body_line - 1)
    for i in range(len(lines)):
        if i in code:
            out.append("")
            continue
        out.append(_BLANKED.sub(_BREAK, _cut(code.text(i), cut.get(i, ()))))
    return "\n".join(out).rstrip("\n")


def _cut(text: str, spans: Iterable[tuple[int, int]]) -> str:
    """``text`` with each span replaced by a break, in one pass (a line of 20,000 links is not copied each time)."""
    pieces, at = [], 0
    for start, end in sorted(spans):
        if start >= at:
            pieces += [text[at:start], _BREAK]
            at = end
    return "".join([*pieces, text[at:]]) if pieces else text


def fold(text: str) -> str:
    """Case-folded, accents dropped: the form names and text are compared in."""
    if text.isascii():
        return text.lower()
    return _COMBINING.sub("", unicodedata.normalize("NFKD", text.casefold()))


def tokens(text: str) -> list[tuple[str, int, int]]:
    """(folded token, start, end) of each token of ``text``, the offsets in ``text`` as written: words (case
    and accents folded), CJK letters one by one (NFKC: half-width kana as full-width) and symbols."""
    if text.isascii():
        return [(m.group().lower(), m.start(), m.end()) for m in _TOKEN.finditer(text)]
    out: list[tuple[str, int, int]] = []
    for m in _TOKEN.finditer(text):
        t, start, end = m.group(), m.start(), m.end()
        if t.isascii():
            out.append((t.lower(), start, end))
        elif _CJK.match(t):
            out.append((unicodedata.normalize("NFKC", t), start, end))
        else:
            out.extend((w, start, end) for w in _WORD.findall(fold(t)))
    return out


def name_key(name: str) -> tuple[str, ...]:
    """A name as the tokens the text must hold in a row."""
    return tuple(t for t, _, _ in tokens(name))


def _words_of(key: tuple[str, ...]) -> list[str]:
    return [t for t in key if t not in _SYMBOL_SET]


def _cjk_only(key: tuple[str, ...]) -> bool:
    return all(_CJK.match(t) for t in key)


def single(key: tuple[str, ...]) -> bool:
    """A one-word name for rules 4 and 5: one word (symbols aside: "C++"), or CJK letters alone."""
    return _cjk_only(key) or len(_words_of(key)) == 1


def usable(key: tuple[str, ...]) -> bool:
    """Rules 1 and 2: a name of letters, not only function words, not a short single word."""
    words = _words_of(key)
    if not words or _BREAK in key or all(w.isdigit() for w in words) or not any(c.isalpha() for w in words for c in w):
        return False
    if all(w in STOP_WORDS for w in words):
        return False
    if _cjk_only(key):
        return len(key) >= MIN_CJK_CHARS
    if len(words) > 1:
        return True
    symbols = [t for t in key if t in _SYMBOL_SET]
    if key[0] in _SYMBOL_SET or any(t != "." for t in symbols):
        return True  # "C++", "C#", ".NET": not an ordinary word ("St." is)
    return len(words[0]) >= MIN_CHARS


NameIndex = tuple[Mapping[tuple[str, ...], str | None], frozenset[tuple[str, ...]]]  # what name_index gives


def name_index(notes: Sequence[NoteNames]) -> NameIndex:
    """Folded name -> the one note carrying it (rules 1 and 2), None for a name several notes carry (rule 3: it
    is still matched, so "Boba" is not found inside a shared "Boba Market"); and the one-word names written with
    a capital."""
    owners: dict[tuple[str, ...], set[str]] = defaultdict(set)
    capital: set[tuple[str, ...]] = set()
    for note in notes:
        if not posixpath.basename(note.path)[:-3]:
            continue  # ``.md``: no name to link it by
        for name in note.names:
            key, use, cap = _name_entry(name)
            if use:
                owners[key].add(note.path)
                if cap:
                    capital.add(key)
    index = {k: next(iter(v)) if len(v) <= MAX_NOTES_PER_NAME else None for k, v in owners.items()}
    return index, frozenset(capital)


@lru_cache(maxsize=1 << 17)
def _name_entry(name: str) -> tuple[tuple[str, ...], bool, bool]:
    """A name's key, whether rules 1 and 2 let it be matched, whether it is a one-word name with a capital:
    remembered (a bounded memo), so a watcher's next convert folds only the names it has not seen."""
    key = name_key(name)
    use = usable(key)
    return key, use, use and single(key) and not name.islower()


Hit = tuple[tuple[str, ...], int, str, str | None]  # a name's key, its 1-based line, the words, the heading above
Key = tuple[str, ...]  # a name as ``name_key`` gives it


@dataclass(frozen=True)
class Earlier:
    """What the last convert found: the names it matched, and each note's prose with the hits found in it
    (before rules 4 and 5). A note's hits hold while its prose is the same, no name it matched went away and no
    new name may occur in it: then it is not read again. ``applied``: what the rules made of them (a watcher's)."""

    keys: frozenset[Key]
    notes: Mapping[str, tuple[str, tuple[Hit, ...]]]  # vault path -> (prose, hits)
    applied: Applied | None = None


@dataclass(frozen=True)
class Applied:
    """What rules 3 to 5 made of every note's hits in the last convert, beyond the hits themselves (each note's
    state keeps those): valid for the notes and hits that convert had. The next convert applies the rules again
    only to the notes an edit touched and to the notes whose hits hold a name whose owner, capital or commonness
    changed (``holders``); every other note takes its mentions as they are."""

    keys: frozenset[Key]  # every name matched (the name index's keys)
    index: Mapping[Key, str | None]  # name_index
    capital: frozenset[Key]
    counts: Mapping[Key, int]  # rule 4: each one-word name -> the notes it is named in (outside links), when any
    common: frozenset[Key]  # rule 4's names, for ``size`` notes
    size: int  # how many notes
    mentions: Mapping[str, tuple[Mention, ...]]  # note -> its mentions, in the notes' order (none: left out)
    holders: Mapping[Key, frozenset[str]] | None = None  # name -> the notes whose hits hold it (None: not made)

    def saved(self) -> tuple[Any, ...]:
        """As the convert cache keeps it (the names and the name index it keeps apart): a fresh process's convert
        applies the rules again only where an edit touched, as a watcher's does."""
        mentions = {p: [(m.target, m.text, m.line, m.heading, m.count) for m in ms] for p, ms in self.mentions.items()}
        return dict(self.counts), self.common, self.size, mentions

    @classmethod
    def restored(cls, data: tuple[Any, ...], keys: frozenset[Key], names: NameIndex) -> Applied:
        """``saved``'s value back, for the names ``keys`` and the name index ``names`` kept with it."""
        counts, common, size, mentions = data
        return cls(
            keys, names[0], names[1], counts, frozenset(common), size,
            {p: tuple(Mention(p, *m) for m in ms) for p, ms in mentions.items()},
        )  # fmt: skip


@dataclass(frozen=True)
class Found:
    """The vault's mentions, and what the next convert may reuse (``Applied``, and ``keys`` with each note's hits:
    ``hits`` holds those found now, the other notes' are the ones they had)."""

    mentions: list[Mention]
    keys: frozenset[Key]
    hits: dict[str, tuple[Hit, ...]]
    applied: Applied | None = None


def find_mentions(notes: Sequence[NoteNames]) -> list[Mention]:
    """Every unlinked mention in the vault: by source (in ``notes``' order), most often named first, then by
    line and target path (a total order, so the output never depends on hashing)."""
    return find_all(notes).mentions


def find_all(notes: Sequence[NoteNames], earlier: Earlier | None = None, names: NameIndex | None = None) -> Found:
    """``find_mentions``, reading again only the notes whose hits ``earlier`` does not give: the result is the
    same as without it, and ``hits`` holds every note's. ``names``: ``name_index(notes)`` where it is known."""
    index, capital = names if names is not None else name_index(notes)
    by_path = {n.path: n for n in notes}
    paths = list(by_path)
    before = earlier.notes if earlier is not None else {}
    found = find_again(
        paths,
        Now(lambda p: by_path[p].prose, lambda p: by_path[p].linked),
        (index, capital),
        Before(before.get, earlier.keys if earlier is not None else frozenset(), earlier.applied if earlier else None),
        touched=paths,
        gone=[p for p in before if p not in by_path],
    )
    hits = {p: found.hits[p] if p in found.hits else before[p][1] for p in paths}
    return replace(found, hits=hits)


@dataclass(frozen=True)
class Now:
    """The notes as they are now: each one's prose and the notes its links reach (asked only where needed)."""

    prose: Callable[[str], str]
    linked: Callable[[str], Iterable[str]]


@dataclass(frozen=True)
class Before:
    """The last convert's: each note's (prose, hits), None for a note it did not have; the names those hits were
    found with; what the rules made of them (None: applied again to every note)."""

    note: Callable[[str], tuple[str, tuple[Hit, ...]] | None]
    keys: frozenset[Key]
    applied: Applied | None = None


def find_again(
    paths: Sequence[str],
    now: Now,
    names: NameIndex,
    before: Before,
    touched: Iterable[str],
    gone: Iterable[str] = (),
    same_order: bool = False,
) -> Found:
    """The vault's mentions (``find_mentions``' result), working only on what changed since ``before``:
    ``touched`` holds every note whose prose or links may differ from the last convert's (the new ones too),
    ``gone`` the notes it had that are no longer there; ``same_order``: the notes it had are ``paths``, in order.
    A note is read again where its prose changed, a name its hits hold went away, or a new name may occur in it
    (``_read_again``); the rules are applied again to the notes touched or read again, and to the notes whose hits
    hold a name whose owner, capital or commonness changed (found through ``Applied.holders``). Every other note
    takes its mentions as the last convert made them: no Python work per note, but for the notes' order where a
    note gains its first mention."""
    index, capital = names
    last = before.applied
    if last is not None and last.keys != before.keys:
        last = None  # made for other hits than the notes' states hold
    keys = last.keys if last is not None and index is last.index else frozenset(index)
    touched, gone = list(touched), list(gone)
    holders = _Holders(paths, before, last, gone)
    hits = _read_again(paths, now, keys, before, touched, holders, gone)
    holders.moved(hits)
    hits_of = _HitsOf(hits, before)
    redo: set[str] = set(paths) if last is None else {*touched, *hits}
    counts: dict[Key, int] = {} if last is None else dict(last.counts)
    moved: set[Key] = set()  # the names whose counts changed
    if last is not None:
        for key in _changed_keys(last, index, capital):
            redo.update(holders.of(key))
        for path in (*redo, *gone):
            old = before.note(path)
            if old is not None:
                for key in _kept(path, old[1], last.index, last.capital)[1]:
                    if single(key):
                        moved.add(key)
                        counts[key] -= 1
                        if not counts[key]:
                            del counts[key]
    made: dict[str, list[Hit]] = {}
    for path in redo:
        kept, named_in = _kept(path, hits_of(path), index, capital)
        made[path] = kept
        for key in named_in:
            if single(key):
                moved.add(key)
                counts[key] = counts.get(key, 0) + 1
    floor = max(MIN_COMMON_NOTES, MAX_SHARE * len(paths))
    if last is not None and last.size == len(paths):
        common = last.common.difference(moved).union(k for k in moved if counts.get(k, 0) > floor)
        for key in common ^ last.common:
            redo.update(holders.of(key))
    else:
        common = frozenset(k for k, n in counts.items() if n > floor)
        if last is not None:
            for key in common ^ last.common:
                redo.update(holders.of(key))
    mentions, inserted = _mentioned(redo, made, hits_of, now, index, capital, common, last)
    for path in gone:
        mentions.pop(path, None)
    if inserted or not same_order:
        mentions = {p: mentions[p] for p in paths if p in mentions}  # in the notes' order
    out = list(chain.from_iterable(mentions.values()))
    return Found(out, keys, hits, Applied(keys, index, capital, counts, common, len(paths), mentions, holders.kept()))


def _mentioned(
    redo: Iterable[str],
    made: dict[str, list[Hit]],
    hits_of: Callable[[str], tuple[Hit, ...]],
    now: Now,
    index: Mapping[Key, str | None],
    capital: frozenset[Key],
    common: frozenset[Key],
    last: Applied | None,
) -> tuple[dict[str, tuple[Mention, ...]], bool]:
    """Each note's mentions: the last convert's, made again for the notes in ``redo`` (the very tuple of last
    time where they are the same); and whether a note that had none has some (it is last in the dict)."""
    mentions = dict(last.mentions) if last is not None else {}
    inserted = last is None
    for path in redo:
        kept = made[path] if path in made else _kept(path, hits_of(path), index, capital)[0]
        named = [
            (target, line, words, above) for k, line, words, above in kept if (target := index[k]) and k not in common
        ]
        found = tuple(_mentions(path, now.linked(path), named)) if named else ()
        was = mentions.get(path)
        if not found:
            mentions.pop(path, None)
        elif was != found:
            inserted = inserted or was is None
            mentions[path] = found
    return mentions, inserted


class _HitsOf:
    """A note's hits: found now, or its last state's."""

    def __init__(self, hits: Mapping[str, tuple[Hit, ...]], before: Before) -> None:
        self.hits, self.before = hits, before

    def __call__(self, path: str) -> tuple[Hit, ...]:
        found = self.hits.get(path)
        if found is not None:
            return found
        old = self.before.note(path)
        assert old is not None, "a note not read again has its last state's hits"
        return old[1]


class _Holders:
    """Name -> the notes whose hits hold it: the last convert's (``Applied.holders``) moved on, or made from every
    note's hits when first needed (a name went away or changed owner, capital or commonness)."""

    def __init__(self, paths: Sequence[str], before: Before, last: Applied | None, gone: Sequence[str]) -> None:
        self.paths, self.before, self.gone = paths, before, gone
        self.last = last.holders if last is not None else None
        self.made: dict[Key, frozenset[str]] | None = None
        self.hits: Mapping[str, tuple[Hit, ...]] = {}

    def old(self, key: Key) -> frozenset[str]:
        """The notes whose last hits hold ``key`` (notes gone included)."""
        if self.last is None:
            self.last = _holders_of(self.before, self.paths)
        return self.last.get(key, frozenset())

    def moved(self, hits: Mapping[str, tuple[Hit, ...]]) -> None:
        self.hits = hits

    def of(self, key: Key) -> frozenset[str]:
        """The notes whose hits hold ``key`` now."""
        return self._now().get(key, frozenset())

    def kept(self) -> dict[Key, frozenset[str]] | None:
        return self._now() if self.last is not None else None

    def _now(self) -> dict[Key, frozenset[str]]:
        if self.made is None:
            old = self.last if self.last is not None else _holders_of(self.before, self.paths)
            self.last = old
            made = dict(old)
            for path in (*self.gone, *self.hits):
                was = self.before.note(path)
                for key in {h[0] for h in was[1]} if was is not None else ():
                    left = made.get(key, frozenset()) - {path}
                    if left:
                        made[key] = left
                    else:
                        made.pop(key, None)
            for path, hits in self.hits.items():
                for key in {h[0] for h in hits}:
                    made[key] = made.get(key, frozenset()) | {path}
            self.made = made
        return self.made


def _holders_of(before: Before, paths: Iterable[str]) -> dict[Key, frozenset[str]]:
    """Name -> the notes whose last hits hold it."""
    out: dict[Key, set[str]] = defaultdict(set)
    for path in paths:
        old = before.note(path)
        if old is not None:
            for hit in old[1]:
                out[hit[0]].add(path)
    return {k: frozenset(v) for k, v in out.items()}


def _changed_keys(last: Applied, index: Mapping[Key, str | None], capital: frozenset[Key]) -> set[Key]:
    """The names whose owner or capital changed since ``last``. Not those that came or went: only the notes read
    again (``_read_again``) hold them."""
    if index is last.index and capital is last.capital:
        return set()
    changed = {k for k, _ in index.items() ^ last.index.items()} | (capital ^ last.capital)
    return {k for k in changed if k in index and k in last.index}  # a name that came or went: in notes read again


def _kept(
    path: str, hits: Iterable[Hit], index: Mapping[Key, str | None], capital: frozenset[Key]
) -> tuple[list[Hit], frozenset[Key]]:
    """The hits rule 5 keeps, and the names among them that name another note (rule 4 counts them)."""
    kept = [h for h in hits if not (h[0] in capital and h[2].islower())]  # rule 5
    return kept, frozenset(h[0] for h in kept if index[h[0]] not in (path, None))


def _read_again(
    paths: Sequence[str],
    now: Now,
    keys: frozenset[Key],
    before: Before,
    touched: Sequence[str],
    holders: _Holders,
    gone: Sequence[str],
) -> dict[str, tuple[Hit, ...]]:
    """The hits of each note read again: its prose changed (or it is new), a name its hits held went away, or a
    name that came may occur in it."""
    again: dict[str, None] = {}
    for path in touched:
        old = before.note(path)
        if old is None or old[0] != now.prose(path):
            again[path] = None
    if keys is not before.keys and keys != before.keys:
        removed, added = before.keys - keys, keys - before.keys
        gone_set = set(gone)
        for key in removed:
            again.update((p, None) for p in holders.old(key) if p not in gone_set)
        if added:
            may_hold = _probe(added)
            again.update((p, None) for p in paths if p not in again and may_hold(now.prose(p)))
    if not again:
        return {}
    texts = [now.prose(p) for p in again]
    names = _automaton(texts, keys)
    return {p: tuple(_scan(text, names)) for p, text in zip(again, texts, strict=True)}


def _probe(keys: Iterable[Key]) -> Callable[[str], bool]:
    """Whether a note's prose may hold one of ``keys``: ``_Names.may_hold`` over the whole prose, folded, asked
    only where the folded prose holds one of the names' first words as a substring (a search in C; splitting
    every note into words took seconds on 13k notes)."""
    names = _Names.of(keys)
    firsts = sorted(names.firsts)

    def may_hold(text: str) -> bool:
        folded = text.lower() if text.isascii() else fold(text)
        if not names.cjk and not any(w in folded for w in firsts):
            return False
        return names.may_hold(folded)

    return may_hold


_FEW = 64  # notes read again up to which the automaton holds only the names their words could make


def _automaton(texts: Sequence[str], keys: frozenset[Key]) -> _Names:
    """The automaton for reading ``texts``: of every name, or (for a few texts) of the names all of whose tokens
    are in them, which finds the same hits there."""
    if len(texts) > _FEW:
        return _Names.of(keys)
    words: set[str] = set()
    for text in texts:
        words.update(t for t, _, _ in tokens(text))
    return _Names.of(k for k in keys if words.issuperset(k))


def _mentions(path: str, linked: Iterable[str], hits: list[tuple[str, int, str, str | None]]) -> list[Mention]:
    first: dict[str, tuple[int, str, str | None]] = {}
    count: Counter[str] = Counter()
    reached = linked if isinstance(linked, (set, frozenset)) else set(linked)
    for target, line, text, heading in hits:
        if target == path or target in reached:
            continue
        count[target] += 1
        first.setdefault(target, (line, text, heading))
    made = [Mention(path, t, first[t][1], first[t][0], first[t][2], n) for t, n in count.items()]
    return sorted(made, key=lambda m: (-m.count, m.line, m.target))


def _scan(text: str, names: _Names) -> Iterable[Hit]:
    """(name, 1-based line, the words as written, the heading above) for each name in ``text``, leftmost-longest.
    Only a line that may hold a name (it holds the first word of one, or a CJK letter when a name has one) is
    split into tokens in Python, and each of those once: ``_Names.longest`` is one pass of an automaton over its
    tokens. The heading above is followed as the lines go by."""
    folded = fold(text).split("\n")
    lines = text.split("\n")
    heading: str | None = None
    for lineno, line in enumerate(folded, 1):
        if line and names.may_hold(line):
            found = tokens(lines[lineno - 1])
            keys = [t for t, _, _ in found]
            longest = names.longest(keys)
            i = 0
            while i < len(keys):
                n = longest[i]
                if n:
                    yield tuple(keys[i : i + n]), lineno, lines[lineno - 1][found[i][1] : found[i + n - 1][2]], heading
                    i += n
                else:
                    i += 1
        if "#" in line[:4] and (m := _HEADING.match(lines[lineno - 1])):
            heading = m.group(1).replace(_BREAK, " ").rstrip(" \t#").strip() or None


@dataclass(frozen=True)
class _Names:
    """Every name, as an Aho–Corasick automaton over tokens built from the names read backwards: run over a
    line's tokens from the last to the first, the state at token ``i`` ends the longest name that starts there
    (its dictionary-suffix chain lists the names ending there longest first). One dict lookup per token and
    failure step, the failure steps bounded by the tokens read: linear in the line, whatever the names."""

    firsts: frozenset[str]  # the first word of each name: a line without any of them holds none
    cjk: bool  # some name holds a CJK letter: a line with a CJK letter may hold it (no word boundaries there)
    goto: tuple[dict[str, int], ...]
    fail: tuple[int, ...]
    best: tuple[int, ...]  # tokens in the longest name that is a suffix of the state's string (0: none)

    @classmethod
    def of(cls, keys: Iterable[tuple[str, ...]]) -> _Names:
        goto: list[dict[str, int]] = [{}]
        depth, end = [0], [False]
        firsts: set[str] = set()
        cjk = False
        for key in keys:
            firsts.add(_words_of(key)[0])
            cjk = cjk or any(_CJK.match(t) for t in key)
            state = 0
            for t in reversed(key):
                nxt = goto[state].get(t)
                if nxt is None:
                    nxt = goto[state][t] = len(goto)
                    goto.append({})
                    depth.append(depth[state] + 1)
                    end.append(False)
                state = nxt
            end[state] = True
        fail, best = [0] * len(goto), [0] * len(goto)
        queue = deque(goto[0].values())
        while queue:  # breadth first: a state's failure is shallower, so done before it
            state = queue.popleft()
            best[state] = depth[state] if end[state] else best[fail[state]]
            for t, child in goto[state].items():
                f = fail[state]
                while f and t not in goto[f]:
                    f = fail[f]
                fail[child] = goto[f].get(t, 0) if state else 0
                queue.append(child)
        return cls(frozenset(firsts), cjk, tuple(goto), tuple(fail), tuple(best))

    def may_hold(self, folded_line: str) -> bool:
        if self.cjk and _CJK.search(folded_line):
            return True
        return not self.firsts.isdisjoint(_WORD.findall(folded_line))

    def longest(self, keys: Sequence[str]) -> list[int]:
        """For each token, how many tokens the longest name starting there has (0: none)."""
        goto, fail, best = self.goto, self.fail, self.best
        out = [0] * len(keys)
        state = 0
        for i in range(len(keys) - 1, -1, -1):
            t = keys[i]
            while state and t not in goto[state]:
                state = fail[state]
            state = goto[state].get(t, 0)
            out[i] = best[state]
        return out


def linked_targets(records: Iterable[Any]) -> dict[str, set[str]]:
    """Source vault path -> every note its links reached (an ambiguous link's candidates too)."""
    out: dict[str, set[str]] = defaultdict(set)
    for r in records:
        res, reached = r.resolution, out[r.source]
        if res.path is not None:
            reached.add(res.path)
        if res.candidates:
            reached.update(res.candidates)
    return out


def vault_mentions(
    paths: Sequence[str],
    metas: Mapping[str, Any],
    proses: Mapping[str, str],
    records: Iterable[Any],
    earlier: Earlier | None = None,
    names: NameIndex | None = None,
) -> Found:
    """The vault's mentions from what a convert holds: each note's ``Meta`` (title, aliases) and prose, and
    the resolved links (``LinkRecord``); ``earlier`` what the last convert found, to reuse where it holds;
    ``names`` the name index where it is known."""
    linked = linked_targets(records)
    notes = [
        NoteNames(
            p,
            (p.rpartition("/")[2][:-3], metas[p].title, *metas[p].aliases),  # posixpath.basename, unchecked
            proses[p],
            frozenset(linked.get(p, ())),
        )
        for p in paths
    ]
    return find_all(notes, earlier, names)


def suggestion(mention: Mention, unique_stems: Mapping[str, int]) -> str:
    """The wikilink that would link it: ``[[Target|text]]`` (the file name alone when no other note has it)."""
    stem = posixpath.basename(mention.target)[:-3]
    target = stem if unique_stems.get(stem.casefold(), 0) <= 1 else mention.target[:-3]
    return f"[[{target}]]" if target == mention.text else f"[[{target}|{mention.text}]]"


def stem_counts(paths: Iterable[str]) -> Counter[str]:
    return Counter(p.rpartition("/")[2][:-3].casefold() for p in paths)  # posixpath.basename, unchecked


def rule() -> dict[str, Any]:
    """The rule's parameters, as the report states them."""
    return {
        "min_chars": MIN_CHARS,
        "max_notes_per_name": MAX_NOTES_PER_NAME,
        "max_share": MAX_SHARE,
        "min_common_notes": MIN_COMMON_NOTES,
        "top_per_note": TOP_PER_NOTE,
    }


def mention_rows(mentions: Iterable[Mention], concept_id: Callable[[str], str]) -> list[MentionRow]:
    """``okf.duckdb`` rows, ``concept_id`` turning a vault path into its concept id."""
    return [
        MentionRow(concept_id(m.source), concept_id(m.target), m.text, m.line, m.heading, m.count) for m in mentions
    ]


def mentions_json(mentions: Sequence[Mention], notes: Sequence[str]) -> dict[str, Any]:
    """The report's ``mentions`` section: totals, the rule, and the top ``TOP_PER_NOTE`` of each note, the notes
    with most mentions first (then by path)."""
    stems = stem_counts(notes)
    by_note: dict[str, list[Mention]] = defaultdict(list)
    for m in mentions:
        by_note[m.source].append(m)
    entries = [
        {
            "note": source,
            "count": len(found),
            "mentions": [
                {
                    "target": m.target,
                    "text": m.text,
                    "line": m.line,
                    "heading": m.heading,
                    "count": m.count,
                    "link": suggestion(m, stems),
                }
                for m in found[:TOP_PER_NOTE]
            ],
        }
        for source, found in sorted(by_note.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]
    return {
        "total": len(mentions),
        "notes": len(by_note),
        "targets": len({m.target for m in mentions}),
        "rule": rule(),
        "by_note": entries,
    }
