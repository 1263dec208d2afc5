"""The registry of answer backends, and ``AnswerSpec``: which backend answers, with the options it owns.

Each backend module holds its model, its single-shot answerer, its agent driver and its options dataclass
(``LlamaOptions``, ``BedrockOptions``, ``ExtractOptions``): the fields are that backend's options, with their
defaults, and nothing else. ``AnswerSpec.of`` builds the options of the backend picked from the flags a front end
holds (the CLI's answer options); ``check`` checks them, once per command, before any model loads: the backend
exists, bedrock has a model ID, the GGUF is a file, extract is given no model. Heavy imports happen only in the
backend picked, when its answerer or driver is built.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, Protocol

from retriever.answer.contract import Answerer, Driver
from retriever.answer.records import AnswerError


class Backend(StrEnum):
    LLAMA = "llama"  # a local GGUF through llama-cpp-python
    BEDROCK = "bedrock"  # AWS Bedrock through boto3 Converse
    EXTRACT = "extract"  # no model: the best sentences of the context, quoted (`extract.py`)


BACKENDS = tuple(Backend)
_OPTIONS = {  # backend -> "module:options class"
    Backend.LLAMA: "retriever.answer.llama:LlamaOptions",
    Backend.BEDROCK: "retriever.answer.bedrock:BedrockOptions",
    Backend.EXTRACT: "retriever.answer.extract:ExtractOptions",
}


class BackendOptions(Protocol):
    """What every backend's options dataclass offers."""

    model: str | None

    def check(self) -> None: ...

    def answerer(self) -> Answerer: ...

    def driver(self) -> Driver: ...


def options_class(llm: str) -> type[Any]:
    """The options dataclass of backend ``llm``; an AnswerError naming the backends for an unknown one."""
    try:
        backend = Backend(str(llm))
    except ValueError:
        raise AnswerError(f"unknown answer backend {llm!r}; choose one of: {', '.join(BACKENDS)}") from None
    module, name = _OPTIONS[backend].split(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class AnswerSpec:
    """How to answer: the backend and its own options."""

    llm: Backend
    options: BackendOptions

    @classmethod
    def of(cls, llm: str = Backend.LLAMA, **flags: Any) -> AnswerSpec:
        """The spec for backend ``llm``, its options taken from ``flags`` by name (a flag another backend owns is
        not this backend's concern: ``--region`` means nothing to llama)."""
        kind = options_class(llm)
        own = {f.name for f in fields(kind)}
        return cls(Backend(str(llm)), kind(**{k: v for k, v in flags.items() if k in own and v is not None}))

    def check(self) -> AnswerSpec:
        """This spec, once what can be checked before a model loads is checked (an AnswerError otherwise)."""
        self.options.check()
        return self

    def to_json(self) -> dict[str, Any]:
        """The backend and its options, as JSON: what a server records so a client can tell it answers the same."""
        return {"llm": str(self.llm), **{f.name: getattr(self.options, f.name) for f in fields(self.options)}}  # type: ignore[arg-type]

    @property
    def model(self) -> str | None:
        return self.options.model

    @property
    def answer_tokens(self) -> int | None:
        return getattr(self.options, "answer_tokens", None)

    def answerer(self) -> Answerer:
        """The single-shot answerer (heavy imports happen only for its backend)."""
        return self.options.answerer()

    def driver(self) -> Driver:
        """The agent loop's model; an AnswerError for a backend with no model (extract)."""
        return self.options.driver()


def get_answerer(name: str, *, model: str | None = None, **options: Any) -> Answerer:
    """The answerer of backend ``name`` with ``options`` (its options dataclass's fields), checked."""
    return AnswerSpec.of(name, model=model, **options).check().answerer()
