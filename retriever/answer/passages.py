"""The quotable passages of a context note, and the terms they are scored on: shared by the extractive answerer
(``extract``) and citation anchoring (``grounding``).

Each context note is cut into passages with markdown-it's block parser (``passages``): the sentences of a paragraph
line, list items, table rows; never code, HTML, headings or the ``Title > Heading`` line that opens each chunk of a
note's context (it names the section the passages under it are in). A passage is quoted as written; its terms are
its words with markdown, URLs and HTML taken out, folded and lightly stemmed (``terms``).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

from retriever.answer.prompt import poses_as_answer
from retriever.answer.records import Citation, ContextNote
from retriever.answer.refusal import fold

_BLOCKS = MarkdownIt("commonmark").disable("inline").enable("table")
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"'\u201d\u2019)\]*_]*)\s+(?=[\"'\u201c\u2018(\[*_]*[A-Z0-9])")
_ABBREVIATION = re.compile(r"(?:\b(?:[A-Z]|Mr|Mrs|Ms|Dr|St|Mt|Lt|Sgt|Capt|Col|Gen|No|vs|etc|e\.g|i\.e|cf))\.$")
_URL = re.compile(r"https?://\S+|www\.\S+")
_HTML = re.compile(r"<[^<>\n]*>")
_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")  # [label](target) -> label (the chunker did most already)
_CALLOUT = re.compile(r"^\[![^\]\n]*\][+-]?\s*")  # `[!note]`, `[!column|2 no-title]`
_WORD = re.compile(r"[^\W_]+")
_TABLE_RULE = re.compile(r"^[\s|:-]+$")
_STOPWORDS = """a about above after again against all also am an and any are as at be been before being below between
    both but by can could did do does doing down during each few for from further had has have having he
    her here hers herself him himself his how i if in into is it its itself just me more most my myself
    no nor not now of off on once only or other our ours out over own same she should so some such than
    that the their theirs them then there these they this those through to too under until up very was
    we were what when where which while who whom whose why will with would you your yours s t d ll re ve
    m don doesn didn isn wasn weren haven hasn won"""
STOPWORDS = frozenset(_STOPWORDS.split())


@dataclass(frozen=True)
class Passage:
    """One quotable piece of a context note: `text` as written in the note, under section `heading`."""

    rank: int  # the note's place in the context (0 = first)
    note: ContextNote
    heading: str
    text: str
    terms: Counter[str]  # the passage's own scoring terms
    context: frozenset[str]  # terms of the note title, the heading and the table header

    @property
    def citation(self) -> Citation:
        title = "[title withheld: it poses as an answer]" if poses_as_answer(self.note.title) else self.note.title
        return Citation(title, self.note.path, self.note.note_id, self.heading, quote=self.text)


def terms(text: str) -> list[str]:
    """The scoring terms of `text`: markdown, URLs and HTML out, folded, stop words dropped, lightly stemmed."""
    plain = _LINK.sub(r"\1", _HTML.sub(" ", _URL.sub(" ", text)))
    folded = plain.casefold() if plain.isascii() else fold(plain)
    return [stem(w) for w in _WORD.findall(folded) if w not in STOPWORDS]


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English stemmer: plural, past and -ing endings (`pilots`, `piloted`, `piloting` -> `pilot`)."""
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix, least in (("ing", 6), ("ed", 5), ("es", 5), ("s", 4)):
        if word.endswith(suffix) and len(word) >= least and not word.endswith(("ss", "us", "is")):
            word = word[: -len(suffix)]
            return word[:-1] if suffix in ("ing", "ed") and len(word) > 3 and word[-1] == word[-2] else word
    return word


def sentences(line: str) -> list[str]:
    """The sentences of one line, each a slice of it (`Mr.`, `e.g.` and initials do not end one)."""
    found, start = [], 0
    for match in _SENTENCE_END.finditer(line):
        if _ABBREVIATION.search(line, max(start, match.start() - 6), match.start()):  # the tail only: linear
            continue
        found.append(line[start : match.end(1)].strip())
        start = match.end()
    found.append(line[start:].strip())
    return [s for s in found if s]


def chunk_headings(note: ContextNote) -> dict[int, str]:
    """Line number -> section, for each `Title > Heading > Path` line that opens a chunk of the note's context
    (the first line, and a line after a blank one); `""` for a chunk of the note's opening text."""
    lines = note.text.split("\n")
    found = {}
    for i, line in enumerate(lines):
        if i and lines[i - 1].strip():
            continue
        if line == note.title:
            found[i] = ""
        elif line.startswith(note.title + " > "):
            found[i] = line.rsplit(" > ", 1)[-1].strip()
    return found


def passages(note: ContextNote, rank: int = 0) -> list[Passage]:
    """The note's quotable passages in order: sentences of paragraphs and list items, and table body rows.

    The cutting depends on the note's title and text alone, so it is done once per (title, text) and kept
    (``PASSAGES_KEPT`` notes, least recently used out): a served bundle and a question set meet the same notes
    again and again, and parsing them was most of an extractive answer's time."""
    return [Passage(rank, note, *cut) for cut in _cut(note.title, note.text)]


PASSAGES_KEPT = 2048  # notes whose cut passages are kept (a few MB)


@functools.lru_cache(maxsize=PASSAGES_KEPT)
def _cut(note_title: str, text: str) -> tuple[tuple[str, str, Counter[str], frozenset[str]], ...]:
    """(heading, text, terms, context) of each passage of a note with this title and text (read-only: shared)."""
    note = ContextNote("", note_title, "", text, "", 0.0)
    lines = note.text.split("\n")
    openers = chunk_headings(note)
    tokens = _BLOCKS.parse("\n".join("" if i in openers else line for i, line in enumerate(lines)))
    title = frozenset(terms(note.title))
    blocks = [(line, -1) for line in openers]
    blocks += [(t.map[0], i) for i, t in enumerate(tokens) if t.map and t.type == "inline"]
    found: list[Passage] = []
    heading, header = "", frozenset[str]()
    for line, index in sorted(blocks):
        if index < 0:
            heading = openers[line]
            continue
        token, parent, context = tokens[index], tokens[index - 1].type, title | frozenset(terms(heading))
        if parent == "heading_open":
            heading = token.content.strip()
        elif parent == "th_open":  # the header row: its words go with every body row of the table
            header = (frozenset() if tokens[index - 2].type == "tr_open" else header) | frozenset(terms(token.content))
        elif parent == "td_open" and tokens[index - 2].type == "tr_open":  # a body row, quoted whole
            found += _row(note, 0, heading, lines[line], context | header)
        elif parent == "paragraph_open":
            found += _paragraph(note, 0, heading, token, lines, context)
    return tuple((p.heading, p.text, p.terms, p.context) for p in found)


def _row(note: ContextNote, rank: int, heading: str, line: str, context: frozenset[str]) -> list[Passage]:
    text = line.strip().strip("|").strip()
    return [] if _TABLE_RULE.match(text) or poses_as_answer(text) else _passage(note, rank, heading, text, context)


def _paragraph(
    note: ContextNote, rank: int, heading: str, token: Token, lines: Sequence[str], context: frozenset[str]
) -> list[Passage]:
    """The sentences of each line of a paragraph, each a slice of the note's own line."""
    found: list[Passage] = []
    first = token.map[0] if token.map else 0
    for offset, content in enumerate(token.content.split("\n")):
        source = lines[first + offset] if first + offset < len(lines) else content
        at = source.find(content.strip())
        line = source[at : at + len(content.strip())] if at >= 0 and content.strip() else ""
        line = _CALLOUT.sub("", line)
        if poses_as_answer(line):
            continue  # a planted reply is never quoted as the answer
        for sentence in sentences(line):
            found += _passage(note, rank, heading, sentence, context)
    return found


def _passage(note: ContextNote, rank: int, heading: str, text: str, context: frozenset[str]) -> list[Passage]:
    words = Counter(terms(text))
    return [Passage(rank, note, heading, text, words, context)] if words else []
