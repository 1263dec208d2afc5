"""Answer backend `extract`: no model. The one to three passages of the context that best answer the question,
quoted verbatim, each cited as `note#heading`.

Each context note is cut into passages with markdown-it's block parser (`passages.passages`): the sentences of a
paragraph line, list items, table rows; never code, HTML, headings or the `Title > Heading` line that opens
each chunk of a note's context (it names the section the passages under it are in). A passage is quoted as
written; it is scored on its words with markdown, URLs and HTML taken out, folded and lightly stemmed, plus
half a count for each word of its note's title, its heading and its table's header row.

`score` ranks the passages by BM25 over the passages of the context divided by the question's total IDF (the
share: 1.0 is one occurrence of every question word in a passage of average length), plus `rank_weight / (1 +
rank)` for the place of its note in the search. The answer's support is the best passage's share or its raw
BM25 (`Support`); below `threshold` the answer is the one not-found reply (`refusal.not_found`). With `typed`, a
`how much / how many / how long / how old / what year` question quotes only passages that name a number.
Passages within `RATIO` of the best (and at the threshold or above) join it, three at most; with `per_note`, one
passage per note (its best), so that the three quotes point a reader to three places instead of three sentences of
one section. The support measure, `typed`, `per_note`, `rank_weight` and `threshold` were chosen leaving one vault
out on the seven golden sets by `scripts/select_extract.py` (`reports/extract-threshold.md`).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, TypeVar

from retriever.answer.contract import Driver, OnToken
from retriever.answer.passages import Passage, passages, terms
from retriever.answer.records import Answer, AnswerError, ContextNote
from retriever.answer.refusal import NOT_FOUND, not_found

MODEL = "extract"
# Chosen on all seven golden sets (contexts from the default search, phrases on), objective `balanced`, after the
# held-out report (reports/extract-threshold.md):
SUPPORT = "raw"  # what the threshold is compared with (`Support`)
THRESHOLD = 5.0
TYPED = True  # a quantity question quotes only passages naming a number
RANK_WEIGHT = 0.0
PER_NOTE = True  # one quote per note (`choose`)
RATIO = 0.5  # a passage joins the best one when it scores at least this share of it (fixed, not tuned)
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


NO_AGENT = "--llm extract has no model to call the tools: use --llm llama or bedrock with --agent"


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
    ) -> None:
        self.threshold, self.rank_weight, self.typed, self.support = threshold, rank_weight, typed, Support(support)
        self.per_note = per_note

    def rank(self, question: str, notes: Sequence[ContextNote]) -> list[Scored]:
        """Every passage of the context scored against the question, best first; with `typed`, a quantity
        question keeps only the passages that name a number."""
        candidates = [p for rank, note in enumerate(notes) for p in passages(note, rank)]
        ranked = score(question, candidates, rank_weight=self.rank_weight)
        return [s for s in ranked if s.quantity] if self.typed and wants_quantity(question) else ranked

    def answer(self, question: str, notes: Sequence[ContextNote], *, on_token: OnToken = None) -> Answer:
        start = time.perf_counter()
        ranked = self.rank(question, notes)
        chosen = choose(ranked, self.threshold, self.support, per_note=self.per_note)
        citations = tuple(dict.fromkeys(s.passage.citation for s in chosen))
        lines = [f'{s.passage.citation.label}: "{s.passage.text}" [{citations.index(s.passage.citation) + 1}]'
                 for s in chosen]  # fmt: skip
        text = "\n".join(lines) or NOT_FOUND
        if on_token is not None:
            on_token(text)
        best = _SUPPORT[self.support](ranked[0]) if ranked else 0.0
        raw = {"support": round(best, 4), "measure": str(self.support), "threshold": self.threshold,
               "quotes": [{"ref": s.passage.citation.ref, "text": s.passage.text, "bm25": round(s.bm25, 4),
                           "raw": round(s.raw, 4), "score": round(s.score, 4)} for s in chosen]}  # fmt: skip
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
        )
