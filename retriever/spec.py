"""What a search is and what it returns: ``SearchSpec`` (with its ``Budget`` and the default search), ``Hit`` and
``Retrieval``. Light on purpose (no numpy, no index): the CLI builds its options from these and a client of a
running ``vault2okf serve`` rebuilds a retrieval from JSON without loading the search core
(``retriever.retrieve`` runs the search and re-exports these).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from retriever.errors import RetrieverError
from retriever.filters import NoteFilter

if TYPE_CHECKING:
    from retriever.graph import Concept

# The neighbour rankers by name, in the registry's order (`retriever.rankers.RANKERS`; test_rankers checks they
# agree): a spec is checked against the names without importing the rankers.
RANKER_NAMES = (
    "dense", "dense-hub", "context", "support", "lexical", "lex-dense", "lex-dense-hub", "lex-dense-pr",
    "lex-dense-comm", "lex-dense-hub-comm", "rrf", "rrf-lex", "file",
)  # fmt: skip
RankerName = StrEnum("RankerName", {name: name for name in RANKER_NAMES})  # type: ignore[misc]  # for option parsing
GRAPH_SEEDS = 5
SCALE_REFERENCE = 15  # with ``scale_seeds``, k seeds at vector@15's budget: k * K / 15 at vector@K's
DEFAULT_RANKER = "lex-dense"  # the default search's hop ranker: chosen blind, see DEFAULT_SPEC


class Mode(StrEnum):
    VECTOR = "vector"
    GRAPH = "graph"
    UNION = "union"


class Seeds(StrEnum):
    DENSE = "dense"
    HYBRID = "hybrid"  # dense + BM25 chunks fused by reciprocal rank


class Via(StrEnum):
    """How a note entered the context."""

    VECTOR = "vector"
    HOP = "hop"


@dataclass(frozen=True)
class Budget:
    """The most context a method may use; None means no limit on that axis.

    ``notes`` and ``tokens`` cap the whole context: the vector stage keeps its hits best first while they fit
    (a hit too big for what is left is skipped, the same rule as the hop's), and the hop fills what is left.
    ``match=K`` also caps the hop, question by question, at the tokens that plain vector search at k=K spends
    on the same question: a union then never hands over more tokens of context than ``vector@K`` would, so
    "it retrieves more" cannot pass for "it retrieves better". Tokens are the cost that matters to the answerer;
    the note count stays capped by ``notes`` only, so a union may hand over more, shorter, notes.
    """

    notes: int | None = None
    tokens: int | None = None
    match: int | None = None

    def capped(self, tokens: int) -> Budget:
        """This budget, capped at ``tokens`` (without ``match``: it has been applied)."""
        return Budget(self.notes, _least(self.tokens, tokens))


def _least(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)


@dataclass(frozen=True)
class SearchSpec:
    """How to retrieve, the same for the CLI, the harness, the benchmarks and the tools.

    The vector stage (``mode``, ``k`` chunks, ``seeds``), the hop (``ranker``, ``sessions``: offer the previous and
    next session of a retrieved session note; ``mentions``: offer the sessions that name or link a seed, or a note
    the question names; ``named``: offer the notes the question names by title or alias; ``threads``: first offer,
    in session order, the sessions of a retrieved session's series that share the question's specific terms or
    named notes, ``retriever.threads``) and the ``budget`` that caps the hop. ``dedup`` makes the vector stage take
    the k best *notes* (each by its best chunk) instead of the k best chunks, so one long note cannot fill several
    of k's slots. ``phrases`` lets the question's adjacent word pairs score as phrases in every BM25 (hybrid seeds,
    the lexical rankers). ``filters`` (``retriever.filters``) limits every stage to the notes that pass: the vector
    stage finds its k among them (dense and BM25 alike), the hop offers only them; the budget is the same.
    Issue 37's options (off by default): ``runs`` first offers, in session order, the sessions between two seed
    sessions of one series that name a note both of them name (the run's people, places, objects) or one the
    question names; ``twins`` (with ``runs``) makes two adjacent seed sessions a run too, so their tellings in a
    parallel series (a player's notes and the GM's recaps) are offered; ``mention_edges`` makes an unlinked mention
    (a note naming another by title or alias) a hop edge both ways, its candidates' scores halved below the links';
    ``entities`` searches the question's named notes, capitalised names and quoted phrases on their own (dense and
    BM25, hybrid seeds) and fuses them in; ``entity_rank`` ranks the hop's candidates by how many of the notes the
    question names each names or links too (one more reciprocal-rank list added to the ranker's); ``scale_seeds``
    scales the seeds with a budget matched to vector@K: ``k * K / SCALE_REFERENCE`` of them (at least 1), kept to
    vector@K's tokens like the hop; ``passage=N`` (0: off) makes each hop note hand over at most N tokens of its
    best chunk, the window of lines best covering the question's words and the seeds' names (``retriever.passage``),
    so more notes fit the budget; ``seed_passage=N`` cuts the vector stage's notes (union and graph modes) the same
    way; ``passage_sessions`` cuts only session notes so (the other notes hand over whole chunks). Strings are
    accepted for the enums; a value outside their sets, or an unknown
    ranker, is a ``RetrieverError``.
    """

    mode: Mode = Mode.UNION
    k: int = 10
    seeds: Seeds = Seeds.DENSE
    ranker: str = DEFAULT_RANKER
    sessions: bool = True
    budget: Budget = Budget()
    mentions: bool = False
    named: bool = False
    dedup: bool = False
    threads: bool = False
    phrases: bool = False
    filters: NoteFilter = NoteFilter()
    runs: bool = False
    mention_edges: bool = False
    entities: bool = False
    entity_rank: bool = False
    scale_seeds: bool = False
    twins: bool = False
    passage: int = 0
    seed_passage: int = 0
    passage_sessions: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _member(Mode, self.mode, "mode"))
        object.__setattr__(self, "seeds", _member(Seeds, self.seeds, "seeds"))
        object.__setattr__(self, "ranker", str(self.ranker))
        if self.ranker not in RANKER_NAMES:
            raise RetrieverError(f"unknown ranker {self.ranker!r}; choose one of {', '.join(RANKER_NAMES)}")
        if self.k < 1:
            raise RetrieverError(f"k must be at least 1, not {self.k}")
        for name, size in (("passage", self.passage), ("seed_passage", self.seed_passage)):
            if size < 0:
                raise RetrieverError(f"{name} must be 0 (whole chunks) or a number of tokens, not {size}")
        if not isinstance(self.filters, NoteFilter):
            raise RetrieverError(f"filters must be a NoteFilter (from_json reads a dict), not {self.filters!r}")

    @property
    def vector_k(self) -> int:
        """Chunks the vector stage takes: ``k``, or the graph walk's fixed seeds; with ``scale_seeds`` and a budget
        matched to vector@K, ``k * K / SCALE_REFERENCE`` (rounded, at least 1)."""
        if self.mode is Mode.GRAPH:
            return GRAPH_SEEDS
        if self.scale_seeds and self.mode is Mode.UNION and self.budget.match is not None:
            return max(1, round(self.k * self.budget.match / SCALE_REFERENCE))
        return self.k


def _member(enum: type[StrEnum], value: object, what: str) -> Any:
    try:
        return enum(str(value))
    except ValueError:
        raise RetrieverError(f"unknown {what} {value!r}; choose one of {', '.join(enum)}") from None


DEFAULT_SPEC = SearchSpec(
    Mode.UNION, 10, Seeds.HYBRID, DEFAULT_RANKER, True, Budget(notes=None, tokens=6000, match=15),
    dedup=True, phrases=True, runs=True, scale_seeds=True, twins=True, passage=100, seed_passage=200,
    passage_sessions=True,
)  # fmt: skip
"""What ``search``, ``ask``, ``chat`` and the tools do with no options: chosen blind, leave one vault out, by
``scripts/select_default.py`` (reports/ranker-selection.md: the ranker, hybrid seeds, dedup, phrases) and by
``scripts/select_frontier.py`` at budgets matched to vector@5, @10 and @15 (reports/frontier-selection.md: runs,
twins, scale_seeds, and no note cap: the context is capped in tokens; then, with `--answers`, the passages:
a session note hands over at most 100 tokens as a hop note, 200 as a seed). Neither the seeds nor the hop
spend more than vector@15 would on the question; with ``--match-vector K`` no more than vector@K, from
``10 * K / 15`` seeds."""


@dataclass(frozen=True)
class Hit:
    note_id: str
    title: str
    vault_path: str
    doc_path: str
    score: float
    via: Via
    text: str  # the chunk text(s) used as context
    tokens: int
    session_label: str | None = None
    concept: Concept | None = field(default=None, repr=False, compare=False)  # the graph's, that the hit was made from
    seed: str | None = field(default=None, compare=False)  # a hop hit: the seed note whose link or session reached it

    def to_json(self) -> dict[str, Any]:
        """The hit without its text (`search --json`, `ask --json`'s `retrieved`; `seed` is the server's)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("text", "concept", "seed")}


@dataclass(frozen=True)
class Retrieval:
    hits: tuple[Hit, ...]
    mode: Mode
    k: int
    ranker: str | None
    timings: dict[str, float] = field(default_factory=dict)  # milliseconds
    left_out: int = 0  # vector hits the budget had no room for

    @property
    def notes(self) -> int:
        return len(self.hits)

    @property
    def tokens(self) -> int:
        return sum(h.tokens for h in self.hits)


def left_out_notice(retrieval: Retrieval, budget: Budget) -> str | None:
    """What to tell a person when the context budget left retrieved notes out (None when it left none)."""
    if not retrieval.left_out:
        return None
    caps = ", ".join(f"--max-{what} {cap}" for what, cap in (("notes", budget.notes), ("tokens", budget.tokens)) if cap)
    what = "no retrieved note fits" if not retrieval.hits else f"{retrieval.left_out} retrieved notes do not fit"
    return f"{what} the context budget ({caps})"
