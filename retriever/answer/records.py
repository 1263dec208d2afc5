"""The records of the answer stage: what a backend is given (``ContextNote``) and returns (``Answer`` with its
``Citation``s), and its one error. A leaf: every answer module may import it (``contract`` re-exports it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from retriever.errors import RetrieverError

ANSWER_TOKENS = 512  # the answer budget every backend defaults to (`--answer-tokens`)


class AnswerError(RetrieverError):
    """An answer backend could not run; the message says what went wrong and how to fix it."""


@dataclass(frozen=True)
class ContextNote:
    """One retrieved note handed to the generator.

    `path` is the plain bundle-relative doc path (`concepts/Sessions/Session 3.md`); citations render it
    percent-encoded. `via` is how retrieval found it (`vector`, `hop`, ...).
    """

    note_id: str
    title: str
    path: str
    text: str
    via: str
    score: float
    session_label: str | None = None
    type: str | None = None  # the OKF concept type (`session`, `person`, ...), when the graph knows it
    session_number: int | None = None
    session_date: str | None = None  # ISO date of a session note
    aliases: tuple[str, ...] = ()  # the note's other names (the extract answerer counts them as its words)


@dataclass(frozen=True)
class Citation:
    """A note (and optionally one of its sections) that an answer rests on: `note_id#heading`."""

    title: str
    path: str
    note_id: str = ""
    heading: str = ""  # plain heading text ("Loot"), "" for the note as a whole
    quote: str = field(default="", compare=False)  # the passage of the note it rests on, verbatim ("" if none)
    support: str = field(default="", compare=False)  # extract: how well the quote answers, strong or weak
    reason: str = field(default="", compare=False)  # extract: why, in one line

    @property
    def url(self) -> str:
        """The path percent-encoded, as written in a markdown link, with `#heading` when there is one."""
        anchor = "#" + quote(self.heading, safe="") if self.heading else ""
        return quote(self.path, safe="/") + anchor

    @property
    def ref(self) -> str:
        """`note_id#heading` (or the note ID alone)."""
        return f"{self.note_id}#{self.heading}" if self.heading else self.note_id

    @property
    def label(self) -> str:
        """The title, then the section: `Session 3 › Loot`."""
        return f"{self.title} › {self.heading}" if self.heading else self.title

    def to_markdown(self) -> str:
        return f"[{self.label}]({self.url})"

    def to_json(self) -> dict[str, str]:
        marked = {"support": self.support, "reason": self.reason} if self.support else {}
        return {"note_id": self.note_id, "heading": self.heading, "title": self.title, "path": self.path,
                "quote": self.quote, **marked}  # fmt: skip


@dataclass(frozen=True)
class Answer:
    text: str
    citations: tuple[Citation, ...]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    model: str
    not_found: bool = False  # the one rule of `refusal.not_found`, decided when the answer was parsed
    raw: str = ""  # what the model returned before parsing (JSON for the structured backends)
    flag: str = ""  # why a cited answer is not to be relied on (a note's planted reply, copied: `prompt.posed_by`)
    support: str = ""  # extract: strong (a quote answers), weak (none does) or none (not found); "" for the others

    @property
    def supported(self) -> bool:
        """A claim that cites at least one note of its context, and no flag against it."""
        return bool(self.citations) and not self.not_found and not self.flag
