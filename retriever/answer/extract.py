"""Answer backend `extract`: no model. The one to three passages of the context that best answer the question,
quoted verbatim, each cited as `note#heading`.

Each context note is cut into passages with markdown-it's block parser (`passages`): the sentences of a
paragraph line, list items, table rows; never code, HTML, headings or the `Title > Heading` line that opens
each chunk of a note's context (it names the section the passages under it are in). A passage is quoted as
written; it is scored on its words with markdown, URLs and HTML taken out, folded and lightly stemmed, plus
half a count for each word of its note's title, its heading and its table's header row.

`score` ranks the passages by BM25 over the passages of the context divided by the question's total IDF (the
share: 1.0 is one occurrence of every question word in a passage of average length), plus `rank_weight / (1 +
rank)` for the place of its note in the search; a question word that no passage of the context holds is looked
for as its variants there (`support.variant`: `ledger` finds `leger`).

Each quote is marked `strong` or `weak` with a one-line reason (`retriever/answer/support.py`: does the passage
cover the question's words, and does it hold the kind of thing the question asks for, a name, a number, a date,
a place, a reason). The answer quotes the strong passages among the first `DEPTH` passages that share a content
word with the question, best first, then the weak ones scoring within `RATIO` of the best; three at most, with
`per_note` one per note (its best), so that the quotes point a reader to three places instead of three sentences
of one section. When none is strong the answer says so first ("No passage says this directly; the closest:").
It is the one not-found reply (`refusal.not_found`) only when no passage of the context shares a content word
with the question; a `threshold` above 0 (raw BM25 of the best passage, `Support`) also refuses below it, and
`typed` quotes only passages naming a number for a quantity question: both off by default, as
`scripts/select_extract.py` once chose them on (`reports/extract-threshold.md`). `per_note`, `rank_weight`,
`DEPTH` and `support.COVERAGE` were chosen leaving one vault out by `scripts/select_support.py`
(`reports/extract-support.md`).
"""

from __future__ import annotations

import functools
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol, TypeVar

from markdown_it import MarkdownIt
from markdown_it.token import Token

from retriever.answer.base import Answer, Citation, ContextNote, OnToken
from retriever.answer.prompt import poses_as_answer
from retriever.answer.refusal import NOT_FOUND, fold, not_found
from retriever.answer.support import Asked, Candidate, Mark, asked, mark, overall, proper_words, shares, variant

MODEL = "extract"
SUPPORT = "raw"  # what a threshold is compared with (`Support`)
THRESHOLD = 0.0  # no refusal on the score: "not found" only when no passage shares a content word (`quotes`)
TYPED = False  # a quantity question is answered by any passage; one naming no number is marked weak
RANK_WEIGHT = 0.0
PER_NOTE = True  # one quote per note (`choose`, `quotes`)
DEPTH = 10  # a strong passage is looked for among this many first passages sharing a content word
RATIO = 0.5  # a weak passage joins the best one when it scores at least this share of it (fixed, not tuned)
STRONG_NONE = "No passage says this directly; the closest:"  # the answer's first line when no quote is strong
WEAKER = "Less direct:"  # the line before the weak quotes that follow strong ones
MAX_QUOTES = 3
K1, B = 1.2, 0.75  # BM25's usual constants
CONTEXT_TF = 0.5  # what a word of the title, heading or table header adds to a passage's count of it
# IDF is computed as if the context held at least this many passages. The raw BM25 threshold was chosen on the
# golden sets' contexts, which hold 51 to 259 passages; over a context of three short notes (a small vault, a
# tight --max-tokens) every word's IDF is small, so a question the one passage answers word for word scored
# under the threshold and was refused. A floor below every golden context changes none of their scores.
IDF_PASSAGES = 40

_BLOCKS = MarkdownIt("commonmark").disable("inline").enable("table")
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"'\u201d\u2019)\]*_]*)\s+(?=[\"'\u201c\u2018(\[*_]*[A-Z0-9])")
_ABBREVIATION = re.compile(r"(?:\b(?:[A-Z]|Mr|Mrs|Ms|Dr|St|Mt|Lt|Sgt|Capt|Col|Gen|No|vs|etc|e\.g|i\.e|cf))\.$")
_URL = re.compile(r"https?://\S+|www\.\S+")
_HTML = re.compile(r"<[^<>\n]*>")
_LINK = re.compile(r"!?\[([^\[\]\n]*)\]\([^()\n]*\)")  # [label](target) -> label (the chunker did most already)
_CALLOUT = re.compile(r"^\[![^\]\n]*\][+-]?\s*")  # `[!note]`, `[!column|2 no-title]`
_WORD = re.compile(r"[^\W_]+")
_TABLE_RULE = re.compile(r"^[\s|:-]+$")
# A question asking for a quantity wants a number in the quote (the answer-type check of classic extractive QA).
_QUANTITY_QUESTION = re.compile(r"\bhow (?:much|many|long|old)\b|\b(?:what|which) year\b", re.IGNORECASE)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundreds?"
    r"|thousands?|millions?|billions?|dozens?|half|twice)\b",
    re.IGNORECASE,
)
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
        return Citation(self.note.title, self.note.path, self.note.note_id, self.heading, quote=self.text)


@dataclass(frozen=True)
class Scored:
    passage: Passage
    bm25: float  # BM25 divided by the question's total IDF: the support
    score: float  # bm25 plus the rank prior: the order
    raw: float  # BM25 itself

    @property
    def text(self) -> str:
        return self.passage.text

    @property
    def note_id(self) -> str:
        return self.passage.note.note_id

    @property
    def quantity(self) -> bool:
        """The passage names a number (in digits or words)."""
        return _NUMBER.search(self.passage.text) is not None


def wants_quantity(question: str) -> bool:
    """A `how much / how many / how long / how old / what year` question."""
    return _QUANTITY_QUESTION.search(question) is not None


class Ranked(Protocol):
    """What `choose` reads of a scored passage (`Scored`, or a cached copy of one)."""

    @property
    def text(self) -> str: ...
    @property
    def note_id(self) -> str: ...
    @property
    def bm25(self) -> float: ...
    @property
    def score(self) -> float: ...
    @property
    def raw(self) -> float: ...


R = TypeVar("R", bound=Ranked)


class Support(StrEnum):
    """What the threshold is compared with: BM25 as a share of the question's IDF, or BM25 itself."""

    SHARE = "share"
    RAW = "raw"


_SUPPORT: dict[Support, Callable[[Ranked], float]] = {Support.SHARE: lambda s: s.bm25, Support.RAW: lambda s: s.raw}


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
    """The note's quotable passages in order: sentences of paragraphs and list items, and table body rows."""
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
            found += _row(note, rank, heading, lines[line], context | header)
        elif parent == "paragraph_open":
            found += _paragraph(note, rank, heading, token, lines, context)
    return found


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


def score(question: str, candidates: Sequence[Passage], *, rank_weight: float = RANK_WEIGHT) -> list[Scored]:
    """Every passage scored against the question, best first (see the module docstring)."""
    query = list(dict.fromkeys(terms(question)))
    if not query or not candidates:
        return []
    query += _variants(query, candidates)
    n = len(candidates)
    lengths = [sum(p.terms.values()) for p in candidates]
    average = sum(lengths) / n
    df = Counter(t for p in candidates for t in set(p.terms) | p.context if t in query)
    idf = {t: math.log(1 + (max(n, IDF_PASSAGES) - df[t] + 0.5) / (df[t] + 0.5)) for t in query}
    total = sum(idf.values())
    scored = []
    for p, length in zip(candidates, lengths, strict=True):
        norm = K1 * (1 - B + B * length / average)
        bm25 = 0.0
        for t in query:
            tf = p.terms.get(t, 0) + (CONTEXT_TF if t in p.context else 0.0)
            if tf:
                bm25 += idf[t] * tf * (K1 + 1) / (tf + norm)
        scored.append(Scored(p, bm25 / total, bm25 / total + rank_weight / (1 + p.rank), bm25))
    return sorted(scored, key=lambda s: -s.score)


def _variants(query: Sequence[str], candidates: Sequence[Passage]) -> list[str]:
    """The context's variants (`support.variant`) of the question words no passage of it holds: `leger` for
    `ledger`; none for a word the context has."""
    vocabulary = {t for p in candidates for t in p.terms} | {t for p in candidates for t in p.context}
    missing = [t for t in query if t not in vocabulary]
    found = [v for t in missing for v in sorted(vocabulary) if variant(t, v)] if missing else []
    return [v for v in dict.fromkeys(found) if v not in query]


def choose(
    ranked: Sequence[R], threshold: float, support: Support = Support.SHARE, *, per_note: bool = PER_NOTE
) -> list[R]:
    """The best passage and those within `RATIO` of it, three at most, each with `support` at `threshold` or
    more (with `per_note`, only a note's best passage); [] (refuse) when the best one has less. A passage sharing
    no word with the question never counts."""
    measure = _SUPPORT[support]
    ranked = [s for s in ranked if measure(s) > 0]
    if not ranked or measure(ranked[0]) < threshold:
        return []
    chosen: list[R] = []
    for s in ranked:
        if len(chosen) == MAX_QUOTES or s.score < RATIO * ranked[0].score:
            break
        if per_note and any(s.note_id == c.note_id for c in chosen):
            continue
        if measure(s) >= threshold and all(s.text != c.text for c in chosen):
            chosen.append(s)
    return chosen


@dataclass(frozen=True)
class Quote:
    """A scored passage chosen for the answer, and how well it answers (`support.mark`)."""

    scored: Scored
    mark: Mark

    @property
    def citation(self) -> Citation:
        c = self.scored.passage.citation
        return replace(c, support=str(self.mark.support), reason=self.mark.reason)


def candidate(passage: Passage, proper: frozenset[str] = frozenset()) -> Candidate:
    """What `support.mark` reads of a passage: its words, those of its note's title, aliases and heading (and
    table header), its note's session, and the context's names."""
    note = passage.note
    aliases = frozenset(t for alias in note.aliases for t in terms(alias))
    session = note.session_label or note.session_date or (
        f"session {note.session_number}" if note.session_number is not None else "")  # fmt: skip
    return Candidate(passage.text, frozenset(passage.terms), passage.context | aliases, session, proper)


def quotes(
    ask: Asked,
    ranked: Sequence[Scored],
    *,
    depth: int = DEPTH,
    per_note: bool = PER_NOTE,
    coverage: float | None = None,
) -> list[Quote]:
    """The quotes of the answer (module docstring): the strong passages among the first `depth` that share a
    content word with the question, then the weak ones within `RATIO` of the best; [] when none shares one."""
    proper = proper_words(s.passage.text for s in ranked)
    pool: list[Quote] = []
    for s in ranked:
        if len(pool) == depth:
            break
        c = candidate(s.passage, proper)
        if shares(ask, c):
            pool.append(Quote(s, mark(ask, c) if coverage is None else mark(ask, c, coverage=coverage)))
    if not pool:
        return []
    best = pool[0].scored.score
    strong = [q for q in pool if q.mark.strong]
    weak = [q for q in pool if not q.mark.strong and q.scored.score >= RATIO * best]
    chosen: list[Quote] = []
    for q in strong + weak:
        if len(chosen) == MAX_QUOTES:
            break
        if per_note and any(q.scored.note_id == c.scored.note_id for c in chosen):
            continue
        if all(q.scored.text != c.scored.text for c in chosen):
            chosen.append(q)
    return chosen


def render(chosen: Sequence[Quote]) -> str:
    """The answer text: the strong quotes, then the weak ones after `WEAKER`; with none strong, `STRONG_NONE`
    first. Each quote is `Title › Heading: "passage" [n]`, n its citation's number."""
    citations = list(dict.fromkeys(q.citation for q in chosen))
    strong = [q for q in chosen if q.mark.strong]
    weak = [q for q in chosen if not q.mark.strong]
    lines = [] if strong else [STRONG_NONE]
    for group, head in ((strong, []), (weak, [WEAKER] if strong and weak else [])):
        lines += head
        lines += [f'{q.scored.passage.citation.label}: "{q.scored.text}" [{citations.index(q.citation) + 1}]'
                  for q in group]  # fmt: skip
    return "\n".join(lines) if chosen else NOT_FOUND


class ExtractAnswerer:
    """Answers quoted from the context: no model, no load, one answerer for any number of questions."""

    model = MODEL
    notice: str | None = None

    def __init__(
        self,
        *,
        threshold: float = THRESHOLD,
        rank_weight: float = RANK_WEIGHT,
        typed: bool = TYPED,
        support: str = SUPPORT,
        per_note: bool = PER_NOTE,
        depth: int = DEPTH,
        coverage: float | None = None,
    ) -> None:
        self.threshold, self.rank_weight, self.typed, self.support = threshold, rank_weight, typed, Support(support)
        self.per_note, self.depth, self.coverage = per_note, depth, coverage

    def rank(self, question: str, notes: Sequence[ContextNote]) -> list[Scored]:
        """Every passage of the context scored against the question, best first; with `typed`, a quantity
        question keeps only the passages that name a number."""
        candidates = [p for rank, note in enumerate(notes) for p in passages(note, rank)]
        ranked = score(question, candidates, rank_weight=self.rank_weight)
        return [s for s in ranked if s.quantity] if self.typed and wants_quantity(question) else ranked

    def answer(self, question: str, notes: Sequence[ContextNote], *, on_token: OnToken = None) -> Answer:
        start = time.perf_counter()
        ask = asked(question, terms)
        ranked = self.rank(question, notes)
        best = _SUPPORT[self.support](ranked[0]) if ranked else 0.0
        floor = [s for s in ranked if _SUPPORT[self.support](s) >= self.threshold] if best >= self.threshold else []
        chosen = quotes(ask, floor, depth=self.depth, per_note=self.per_note, coverage=self.coverage)
        citations = tuple(dict.fromkeys(q.citation for q in chosen))
        text = render(chosen)
        if on_token is not None:
            on_token(text)
        support = overall(q.mark for q in chosen)
        raw = {"support": str(support or "none"), "kind": str(ask.kind), "words": list(ask.words),
               "best": round(best, 4), "measure": str(self.support), "threshold": self.threshold,
               "quotes": [{"ref": q.citation.ref, "text": q.scored.text, "support": str(q.mark.support),
                           "reason": q.mark.reason, "bm25": round(q.scored.bm25, 4), "raw": round(q.scored.raw, 4),
                           "score": round(q.scored.score, 4)} for q in chosen]}  # fmt: skip
        return Answer(
            text=text,
            citations=citations,
            finish_reason="stop",
            prompt_tokens=0,
            completion_tokens=0,
            seconds=time.perf_counter() - start,
            model=MODEL,
            not_found=not_found(text, flag=not chosen, cited=bool(citations)),
            raw=json.dumps(raw, ensure_ascii=False),
            support=str(support or "none"),
        )


def anchored(claim: str, citations: Sequence[Citation], notes: Sequence[ContextNote]) -> tuple[Citation, ...]:
    """Each citation with the passage it rests on: the passage of the cited section (the whole note when it names
    none) that shares the most scoring terms with ``claim``, verbatim; none shared, no quote."""
    by_id = {note.note_id: note for note in notes}
    want = set(terms(claim))
    out = []
    for c in citations:
        note = by_id.get(c.note_id)
        best, most = "", 0
        for passage in passages(note) if note is not None and want else ():
            if c.heading and passage.heading != c.heading:
                continue
            shared = len(want & set(passage.terms))
            if shared > most:
                best, most = passage.text, shared
        out.append(replace(c, quote=best))
    return tuple(out)
