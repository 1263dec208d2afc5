"""Unlinked mentions: where a note's text names another note (its file name, title or an alias) without
linking it, as Obsidian's "Unlinked mentions" pane shows them. Pure: prose and names in, ``Mention`` records out.

A note's **prose** (``prose``, kept in the convert cache with the note's other per-note results) is its body
with everything that is not running text blanked: code blocks and ``%%`` comments (the parser's
``CodeLines``), inline code, every link, wikilink and embed the parser found, HTML tags and comments, bare URLs,
tags and block ids; frontmatter lines are empty. A removed span breaks a name (``Old [[x]] Bell`` names neither
"Old Bell" nor anything across the link).

Names are matched as **whole words, case and accents folded** (``\\w+`` tokens: "Kanda" never matches in
"Kandahar", "ECLAT" matches "Éclat"), the longest name starting at a word first, never overlapping. A note
never mentions itself, and a note that links a target anywhere (any link that reached it, an ambiguous one's
candidates included) has no unlinked mention of it.

**The rule for short and common names** (parameters below, measured in ``reports/mentions-precision.md``):
1. a name must hold a letter and a word that is not a number ("2023-04-01", "12" name nothing);
2. a one-word name shorter than ``MIN_CHARS`` letters is dropped ("Ash", "Bo", "Inn" are words first);
3. a name that more than ``MAX_NOTES_PER_NAME`` notes carry names none of them (a suggestion must name one
   note), though it is still matched, so its words are not taken for a shorter name;
4. a one-word name found (outside links) in more than ``MAX_SHARE`` of the vault's notes, and in at least
   ``MIN_COMMON_NOTES`` of them, is dropped: measured on the vault itself, so "Rest", "Magic" or "Water" as a
   title stop flooding in a vault whose text uses them everywhere, while a rare proper name is kept. Only
   one-word names: a name of two words or more is already specific, and the vault's main city named in a third
   of the notes is a mention, not a common word. A dropped one-word name is removed after matching, which is
   exact: it was the longest match where it stood, so no other name started there.
5. a one-word name written with a capital ("Note", "Rest", "Kanda") is not matched where the text writes the
   word all in lower case ("the other note", "a short rest"): one word capitalised is a proper name, in lower
   case it is the ordinary word. Case is folded for everything else: names of two words or more ("the union"
   names "The Union"), a capitalised or upper-case spelling ("KANDA"), and names written in lower case.
Why not a fixed stop list: the vaults differ (a German wiki, a task tracker, campaigns); the document
frequency on the vault's own notes says which of *its* titles are ordinary words.

On thellade (1,442 notes) rule 3 leaves 8 names to no note and rule 4 drops "Reach" (named in 619 notes) and
"Religions" (566); by hand 29 of 30 sampled mentions there are right, 11 of 17 on children-of-ash.

Cost: one pass over each note's prose lines; a line is split into words only when it holds the first word of
some name (``set.isdisjoint`` over a ``findall``, both in C): on thellade 15,857 of 267,622 lines, 0.43 s of
CPU in all. Linear in the vault's size and on hostile lines (``tests/test_unlinked_mentions.py``).
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vault2okf.db import MentionRow
from vault2okf.scan import CodeLines

MIN_CHARS = 4
MAX_NOTES_PER_NAME = 1
MAX_SHARE = 0.05
MIN_COMMON_NOTES = 3
TOP_PER_NOTE = 5  # mentions per note in the link-health report (all of them are in okf.duckdb)

_WORD = re.compile(r"\w+")
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


def name_words(name: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(fold(name)))


def usable(words: tuple[str, ...]) -> bool:
    """Rules 1 and 2: a name of letters, not a short single word."""
    if not words or all(w.isdigit() for w in words) or not any(c.isalpha() for w in words for c in w):
        return False
    return len(words) > 1 or len(words[0]) >= MIN_CHARS


def name_index(notes: Sequence[NoteNames]) -> tuple[dict[tuple[str, ...], str | None], frozenset[tuple[str, ...]]]:
    """Folded name -> the one note carrying it (rules 1 and 2), None for a name several notes carry (rule 3: it
    is still matched, so "Boba" is not found inside a shared "Boba Market"); and the one-word names written with
    a capital."""
    owners: dict[tuple[str, ...], set[str]] = defaultdict(set)
    capital: set[tuple[str, ...]] = set()
    for note in notes:
        if not posixpath.basename(note.path)[:-3]:
            continue  # ``.md``: no name to link it by
        for name in note.names:
            words = name_words(name)
            if usable(words):
                owners[words].add(note.path)
                if len(words) == 1 and not name.islower():
                    capital.add(words)
    index = {k: next(iter(v)) if len(v) <= MAX_NOTES_PER_NAME else None for k, v in owners.items()}
    return index, frozenset(capital)


def find_mentions(notes: Sequence[NoteNames]) -> list[Mention]:
    """Every unlinked mention in the vault: by source (in ``notes``' order), most often named first, then by
    line and target path (a total order, so the output never depends on hashing)."""
    index, capital = name_index(notes)
    names = _Names.of(index)
    found: list[tuple[str, list[tuple[tuple[str, ...], int, str]]]] = []
    seen_in: Counter[tuple[str, ...]] = Counter()  # name -> notes it was found in, outside links (rule 4)
    for note in notes:
        hits = [h for h in _scan(note.prose, names) if not (h[0] in capital and h[2].islower())]  # rule 5
        found.append((note.path, hits))
        seen_in.update({name for name, _, _ in hits if index[name] not in (note.path, None)})
    floor = max(MIN_COMMON_NOTES, MAX_SHARE * len(notes))
    common = {name for name, n in seen_in.items() if len(name) == 1 and n > floor}
    by_path = {n.path: n for n in notes}
    out: list[Mention] = []
    for path, hits in found:
        note = by_path[path]
        kept = [(target, line, text) for k, line, text in hits if (target := index[k]) and k not in common]
        out.extend(_mentions(note, kept))
    return out


def _mentions(note: NoteNames, hits: list[tuple[str, int, str]]) -> list[Mention]:
    first: dict[str, tuple[int, str]] = {}
    count: Counter[str] = Counter()
    for target, line, text in hits:
        if target == note.path or target in note.linked:
            continue
        count[target] += 1
        first.setdefault(target, (line, text))
    lines = note.prose.split("\n") if first else []
    made = [Mention(note.path, t, first[t][1], first[t][0], _heading(lines, first[t][0]), n) for t, n in count.items()]
    return sorted(made, key=lambda m: (-m.count, m.line, m.target))


def _scan(text: str, names: _Names) -> Iterable[tuple[tuple[str, ...], int, str]]:
    """(name, 1-based line, the words as written) for each name in ``text``, leftmost-longest. Only a line that
    holds the first word of some name is split into words in Python."""
    folded = fold(text).split("\n")
    lines = text.split("\n")
    for lineno, line in enumerate(folded, 1):
        if not line or names.lengths.keys().isdisjoint(_WORD.findall(line)):
            continue
        for segment in lines[lineno - 1].split(_BREAK):
            words = _words(segment)
            i = 0
            while i < len(words):
                n = names.match(words, i)
                if n:
                    key = tuple(w for w, _, _ in words[i : i + n])
                    yield key, lineno, segment[words[i][1] : words[i + n - 1][2]]
                i += n or 1


@dataclass(frozen=True)
class _Names:
    index: Mapping[tuple[str, ...], str | None]
    lengths: Mapping[str, tuple[int, ...]]  # first word of a name -> the lengths of names starting so, longest first

    @classmethod
    def of(cls, index: Mapping[tuple[str, ...], str | None]) -> _Names:
        lengths: dict[str, set[int]] = defaultdict(set)
        for key in index:
            lengths[key[0]].add(len(key))
        return cls(index, {w: tuple(sorted(n, reverse=True)) for w, n in lengths.items()})

    def match(self, words: list[tuple[str, int, int]], i: int) -> int:
        """How many words the longest name starting at word ``i`` has (0: none)."""
        for n in self.lengths.get(words[i][0], ()):
            if i + n <= len(words) and tuple(w for w, _, _ in words[i : i + n]) in self.index:
                return n
        return 0


def _words(segment: str) -> list[tuple[str, int, int]]:
    """(folded word, start, end) of each word of ``segment``, the offsets in ``segment`` as written."""
    if segment.isascii():
        return [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(segment)]
    out: list[tuple[str, int, int]] = []
    for m in _WORD.finditer(segment):
        out.extend((w, m.start(), m.end()) for w in _WORD.findall(fold(m.group())))
    return out


def _heading(lines: list[str], line: int) -> str | None:
    for text in reversed(lines[: line - 1]):
        m = _HEADING.match(text)
        if m:
            return m.group(1).replace(_BREAK, " ").rstrip(" \t#").strip() or None
    return None


def linked_targets(records: Iterable[Any]) -> dict[str, set[str]]:
    """Source vault path -> every note its links reached (an ambiguous link's candidates too)."""
    out: dict[str, set[str]] = defaultdict(set)
    for r in records:
        res = r.resolution
        if res.path is not None:
            out[r.source].add(res.path)
        out[r.source].update(res.candidates)
    return out


def vault_mentions(
    paths: Sequence[str], metas: Mapping[str, Any], proses: Mapping[str, str], records: Iterable[Any]
) -> list[Mention]:
    """The vault's mentions from what a convert holds: each note's ``Meta`` (title, aliases) and prose, and
    the resolved links (``LinkRecord``)."""
    linked = linked_targets(records)
    notes = [
        NoteNames(
            p,
            (posixpath.basename(p)[:-3], metas[p].title, *metas[p].aliases),
            proses[p],
            frozenset(linked.get(p, ())),
        )
        for p in paths
    ]
    return find_mentions(notes)


def suggestion(mention: Mention, unique_stems: Mapping[str, int]) -> str:
    """The wikilink that would link it: ``[[Target|text]]`` (the file name alone when no other note has it)."""
    stem = posixpath.basename(mention.target)[:-3]
    target = stem if unique_stems.get(stem.casefold(), 0) <= 1 else mention.target[:-3]
    return f"[[{target}]]" if target == mention.text else f"[[{target}|{mention.text}]]"


def stem_counts(paths: Iterable[str]) -> Counter[str]:
    return Counter(posixpath.basename(p)[:-3].casefold() for p in paths)


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
