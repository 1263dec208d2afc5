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
lines (``tests/test_unlinked_mentions.py``). An incremental convert passes what the last one found
(``Earlier``): only the notes whose hits may have changed are read, the rules are applied again over all
(after a one-note edit on thellade's notes, 0.07 s of CPU).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
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


NameIndex = tuple[dict[tuple[str, ...], str | None], frozenset[tuple[str, ...]]]  # what name_index gives


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


@dataclass(frozen=True)
class Earlier:
    """What the last convert found: the names it matched, and each note's prose with the hits found in it
    (before rules 4 and 5, which are applied again each time). A note's hits hold while its prose is the same,
    no name it matched went away and no new name may occur in it: then it is not read again."""

    keys: frozenset[tuple[str, ...]]
    notes: Mapping[str, tuple[str, tuple[Hit, ...]]]  # vault path -> (prose, hits)
    applied: Applied | None = None  # a watcher's: what rules 4 and 5 made of each note's hits last time


@dataclass(frozen=True)
class Applied:
    """What rules 4 and 5 made of each note's hits, valid for the same name index, capitalised names and common
    names: note path -> (its hits, the hits kept by rule 5, the names counted for rule 4, its linked notes, its
    mentions). A note whose hits are the very tuple of last time (``Earlier``) takes them again."""

    index: Mapping[tuple[str, ...], str | None]
    capital: frozenset[tuple[str, ...]]
    common: frozenset[tuple[str, ...]]
    notes: dict[str, tuple[Any, ...]]


@dataclass(frozen=True)
class Found:
    """The vault's mentions, and what the next convert may reuse (``Earlier``)."""

    mentions: list[Mention]
    keys: frozenset[tuple[str, ...]]
    hits: dict[str, tuple[Hit, ...]]
    applied: Applied | None = None


def find_mentions(notes: Sequence[NoteNames]) -> list[Mention]:
    """Every unlinked mention in the vault: by source (in ``notes``' order), most often named first, then by
    line and target path (a total order, so the output never depends on hashing)."""
    return find_all(notes).mentions


def find_all(notes: Sequence[NoteNames], earlier: Earlier | None = None, names: NameIndex | None = None) -> Found:
    """``find_mentions``, reading again only the notes whose hits ``earlier`` does not give: the result is the
    same as without it. ``names``: ``name_index(notes)`` where it is known (the notes' names are the last
    convert's)."""
    index, capital = names if names is not None else name_index(notes)
    keys = frozenset(index)
    hits = _hits(notes, index, earlier)
    last = earlier.applied if earlier is not None else None
    if last is not None and (last.capital != capital or last.index != index):
        last = None
    found: list[tuple[str, list[Hit], frozenset[tuple[str, ...]]]] = []
    for note in notes:
        was = last.notes.get(note.path) if last is not None else None
        if was is not None and was[0] is hits[note.path]:
            kept, named_in = was[1], was[2]
        else:
            kept = [h for h in hits[note.path] if not (h[0] in capital and h[2].islower())]  # rule 5
            named_in = frozenset(h[0] for h in kept if index[h[0]] not in (note.path, None))
        found.append((note.path, kept, named_in))
    # name -> notes it was found in, outside links (rule 4): counted in one call, not one a note
    seen_in = Counter(chain.from_iterable(named_in for _, _, named_in in found))
    floor = max(MIN_COMMON_NOTES, MAX_SHARE * len(notes))
    common = frozenset(name for name, n in seen_in.items() if single(name) and n > floor)
    if last is not None and last.common != common:
        last = None
    by_path = {n.path: n for n in notes}
    out: list[Mention] = []
    made: dict[str, tuple[Any, ...]] = {}
    for path, kept, named_in in found:
        note = by_path[path]
        was = last.notes.get(path) if last is not None else None
        if was is not None and was[0] is hits[path] and was[3] == note.linked:
            mentions = was[4]
        else:
            named = [
                (target, line, words, above)
                for k, line, words, above in kept
                if (target := index[k]) and k not in common
            ]
            mentions = _mentions(note, named)
        out.extend(mentions)
        made[path] = (hits[path], kept, named_in, note.linked, mentions)
    return Found(out, keys, hits, Applied(index, capital, common, made))


def _hits(
    notes: Sequence[NoteNames], index: Mapping[tuple[str, ...], str | None], earlier: Earlier | None
) -> dict[str, tuple[Hit, ...]]:
    """Each note's hits: ``earlier``'s where they still hold, else found now."""
    keys = frozenset(index)
    added = keys - earlier.keys if earlier else keys
    removed = earlier.keys - keys if earlier else frozenset()
    probe = _Names.of(added) if earlier and added else None
    names: _Names | None = None
    out: dict[str, tuple[Hit, ...]] = {}
    for note in notes:
        old = earlier.notes.get(note.path) if earlier else None
        if (
            old is not None
            and old[0] == note.prose
            and not (removed and any(h[0] in removed for h in old[1]))
            and not (probe and probe.may_hold(fold(note.prose)))
        ):
            out[note.path] = old[1]
            continue
        names = names or _Names.of(index)
        out[note.path] = tuple(_scan(note.prose, names))
    return out


def _mentions(note: NoteNames, hits: list[tuple[str, int, str, str | None]]) -> list[Mention]:
    first: dict[str, tuple[int, str, str | None]] = {}
    count: Counter[str] = Counter()
    for target, line, text, heading in hits:
        if target == note.path or target in note.linked:
            continue
        count[target] += 1
        first.setdefault(target, (line, text, heading))
    made = [Mention(note.path, t, first[t][1], first[t][0], first[t][2], n) for t, n in count.items()]
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
