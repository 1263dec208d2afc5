"""Records, the `Answerer` protocol and the backend factory of the answer stage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import quote

from retriever.errors import RetrieverError


class Backend(StrEnum):
    LLAMA = "llama"  # a local GGUF through llama-cpp-python
    BEDROCK = "bedrock"  # AWS Bedrock through boto3 Converse
    EXTRACT = "extract"  # no model: the best sentences of the context, quoted (`extract.py`)


BACKENDS = tuple(Backend)


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


@dataclass(frozen=True)
class AnswerSpec:
    """How to answer: the backend, its model and the options it takes (the CLI's answer options build one)."""

    llm: Backend = Backend.LLAMA
    model: str | None = None  # a GGUF path for llama (else the default model), a model ID for bedrock
    region: str | None = None  # bedrock only
    profile: str | None = None  # bedrock only
    gpu_layers: int = 0  # llama only
    n_ctx: int = 8192  # llama only
    context_tokens: int | None = None  # llama only: most tokens of note text the model reads (None: its default)
    answer_tokens: int = 512

    def options(self) -> dict[str, Any]:
        """The options `get_answerer` (and `agent.get_driver`) take for this backend."""
        if self.llm == Backend.EXTRACT:
            return {}
        if self.llm == Backend.BEDROCK:
            return {"region": self.region, "profile": self.profile, "max_tokens": self.answer_tokens}
        from retriever.embed import verbose  # `vault2okf --verbose`: llama.cpp's log lines too

        budget = {} if self.context_tokens is None else {"context_tokens": self.context_tokens}
        return {"n_gpu_layers": self.gpu_layers, "n_ctx": self.n_ctx, "max_tokens": self.answer_tokens,
                "verbose": verbose(), **budget}  # fmt: skip

    def answerer(self) -> Answerer:
        """The answerer this spec describes (heavy imports happen only for its backend)."""
        return get_answerer(self.llm, model=self.model, **self.options())


OnToken = Callable[[str], None] | None  # gets each piece of the answer text as it is generated


class Answerer(Protocol):
    model: str  # the name answers carry (`Answer.model`)
    notice: str | None  # said to the person before the first answer (the tiny packaged model is in use)

    def answer(self, question: str, notes: Sequence[ContextNote], *, on_token: OnToken = None) -> Answer: ...


def check_answerer(name: str, *, model: str | None = None) -> None:
    """What can be checked before any model loads: the backend exists, bedrock has a model ID, the GGUF is a file,
    extract is given none."""
    if name == Backend.EXTRACT:
        if model:
            raise AnswerError("--llm extract uses no model — leave out --model, or pick --llm llama or bedrock")
    elif name == Backend.LLAMA:
        from retriever.answer.llama import resolve_model_path

        resolve_model_path(model)
    elif name == Backend.BEDROCK:
        if not model:
            raise AnswerError(
                "the bedrock backend needs a model ID — pass --model, e.g. --model us.amazon.nova-lite-v1:0"
            )
    else:
        raise AnswerError(f"unknown answer backend {name!r}; choose one of: {', '.join(BACKENDS)}")


def get_answerer(name: str, *, model: str | None = None, **opts: Any) -> Answerer:
    """Build the `llama`, `bedrock` or `extract` answerer; heavy imports happen only for the one picked."""
    check_answerer(name, model=model)
    if name == Backend.EXTRACT:
        from retriever.answer.extract import ExtractAnswerer

        return ExtractAnswerer(**opts)
    if name == Backend.LLAMA:
        from retriever.answer.llama import LlamaAnswerer

        return LlamaAnswerer(model, **opts)
    from retriever.answer.bedrock import BedrockAnswerer

    return BedrockAnswerer(model or "", **opts)
