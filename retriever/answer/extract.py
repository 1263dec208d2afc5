"""Answer backend `extract`: no model. The one to three passages of the context that best answer the question,
quoted verbatim, each cited as `note#heading`.

Each context note is cut into passages with markdown-it's block parser (`passages.passages`): the sentences of a
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
`DEPTH` and `support.Rules` were chosen leaving one vault out by `scripts/select_support.py`
(`reports/extract-support.md`).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol, TypeVar

from retriever.answer.contract import Driver, OnToken
from retriever.answer.passages import Passage, passages, terms
from retriever.answer.records import Answer, AnswerError, Citation, ContextNote
from retriever.answer.refusal import NOT_FOUND, not_found
from retriever.answer.support import (
    RULES,
    Asked,
    Candidate,
    Mark,
    Rules,
    asked,
    mark,
    overall,
    proper_words,
    shares,
    variant,
)

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

# A question asking for a quantity wants a number in the quote (the answer-type check of classic extractive QA).
_QUANTITY_QUESTION = re.compile(r"\bhow (?:much|many|long|old)\b|\b(?:what|which) year\b", re.IGNORECASE)
_NUMBER = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundreds?"
    r"|thousands?|millions?|billions?|dozens?|half|twice)\b",
    re.IGNORECASE,
)


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


def candidate(
    passage: Passage, proper: frozenset[str] = frozenset(), section: frozenset[str] = frozenset()
) -> Candidate:
    """What `support.mark` reads of a passage: its words, those of its note's title, aliases and heading (and
    table header), its note's session, the context's names, and the words of its section."""
    note = passage.note
    aliases = frozenset(t for alias in note.aliases for t in terms(alias))
    session = note.session_label or note.session_date or (
        f"session {note.session_number}" if note.session_number is not None else "")  # fmt: skip
    return Candidate(passage.text, frozenset(passage.terms), passage.context | aliases, session, proper, section)


def sections(ranked: Sequence[Scored]) -> dict[tuple[str, str], frozenset[str]]:
    """(note, heading) -> the terms of every passage of that section of the context."""
    found: dict[tuple[str, str], set[str]] = {}
    for s in ranked:
        found.setdefault((s.note_id, s.passage.heading), set()).update(s.passage.terms)
    return {key: frozenset(words) for key, words in found.items()}


def quotes(
    ask: Asked,
    ranked: Sequence[Scored],
    *,
    depth: int = DEPTH,
    per_note: bool = PER_NOTE,
    rules: Rules = RULES,
) -> list[Quote]:
    """The quotes of the answer (module docstring): the strong passages among the first `depth` that share a
    content word with the question, then the weak ones within `RATIO` of the best; [] when none shares one."""
    proper = proper_words((s.passage.text for s in ranked), openers=rules.openers)
    section = sections(ranked) if rules.section else {}
    pool: list[Quote] = []
    for s in ranked:
        if len(pool) == depth:
            break
        c = candidate(s.passage, proper, section.get((s.note_id, s.passage.heading), frozenset()))
        if shares(ask, c):
            pool.append(Quote(s, mark(ask, c, rules)))
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


QUOTED_PASSAGES = 8  # what `--llm llama` reads by default (`quoted_context`): this many passages at most


def quoted_context(question: str, notes: Sequence[ContextNote], *, most: int = QUOTED_PASSAGES) -> list[ContextNote]:
    """The context cut down to its quoted passages, for a model to read instead of whole notes: what `--llm
    extract` would quote, then the best-scoring others sharing a question word, `most` in all. Each note keeps its
    ID, title, path and facts (so a citation still names a note of the context), its text now its passages in the
    note's order under their headings (`## Heading`); a note with none is left out."""
    if not notes:
        return []
    candidates = [p for rank, note in enumerate(notes) for p in passages(note, rank)]
    order = {id(p): i for i, p in enumerate(candidates)}
    ranked = score(question, candidates)
    first = [q.scored for q in quotes(asked(question, terms), ranked)]
    picked: dict[int, Scored] = {}
    for s in [*first, *(s for s in ranked if s.raw > 0)]:
        if len(picked) == most:
            break
        picked.setdefault(id(s.passage), s)
    chosen = sorted(picked.values(), key=lambda s: order[id(s.passage)])
    by_note: dict[str, list[Passage]] = {}
    for s in chosen:
        by_note.setdefault(s.note_id, []).append(s.passage)
    return [replace(n, text=_quoted_text(by_note[n.note_id])) for n in notes if n.note_id in by_note]


def _quoted_text(chosen: Sequence[Passage]) -> str:
    lines: list[str] = []
    heading = ""
    for p in chosen:
        if p.heading and p.heading != heading:
            lines.append(f"## {p.heading}")
        heading = p.heading
        lines.append(p.text)
    return "\n".join(lines)


NO_AGENT = (
    "--llm extract has no model to call the tools: use --llm llama or bedrock with --agent (extract answers when "
    "--llm is left out and no local model is configured; `vault2okf doctor` says which)"
)


@dataclass(frozen=True)
class ExtractOptions:
    """``--llm extract``: no model and no options (the quotes' rules are chosen, not set: see above)."""

    model: str | None = None  # only so that a --model given with extract is refused, not ignored

    def check(self) -> None:
        if self.model:
            raise AnswerError("--llm extract uses no model — leave out --model, or pick --llm llama or bedrock")

    def answerer(self) -> ExtractAnswerer:
        return ExtractAnswerer()

    def driver(self) -> Driver:
        raise AnswerError(NO_AGENT)


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
        rules: Rules = RULES,
    ) -> None:
        self.threshold, self.rank_weight, self.typed, self.support = threshold, rank_weight, typed, Support(support)
        self.per_note, self.depth, self.rules = per_note, depth, rules

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
        chosen = quotes(ask, floor, depth=self.depth, per_note=self.per_note, rules=self.rules)
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
